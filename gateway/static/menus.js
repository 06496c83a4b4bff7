// Header menus that behave like menus: the Export and Files menus (<details>
// elements) and the narrow header's "more" panel close on Escape, on a press
// anywhere outside them, and once one of their items (a link or a button) is
// chosen. A <details> left open otherwise stays open over the timeline until
// its summary is clicked again, which nobody expects of a menu.

/**
 * Make `menu` close like a menu. `isOpen()` says whether it is open and
 * `close()` closes it; `inside` lists elements outside `menu` that count as
 * part of it (the button that opens it), so pressing them does not close it
 * before their own click toggles it. `returnFocus` gets the focus back when
 * Escape closes the menu while the focus was in it.
 */
export function closesLikeAMenu(menu, { isOpen, close, inside = [], returnFocus = null }) {
  const within = (target) => menu.contains(target) || inside.some((node) => node.contains(target));
  document.addEventListener('keydown', (event) => {
    if (event.key !== 'Escape' || !isOpen()) return;
    const focusWasIn = within(document.activeElement);
    close();
    if (focusWasIn && returnFocus) returnFocus.focus();
  });
  // Capture: a handler further down that stops the event cannot keep the menu open.
  document.addEventListener(
    'pointerdown',
    (event) => {
      if (isOpen() && !within(event.target)) close();
    },
    true,
  );
  // After use. The choice's own action still runs: a link's download starts
  // after the click is dispatched, hidden or not, and a button's handler has run.
  menu.addEventListener('click', (event) => {
    const item = event.target.closest('a[href], button');
    if (item && menu.contains(item) && isOpen()) close();
  });
}

/** A <details> menu (Export, Files) that closes like a menu. */
export function detailsMenu(details) {
  const summary = details.querySelector('summary');
  closesLikeAMenu(details, {
    isOpen: () => details.open,
    close: () => {
      details.open = false;
    },
    returnFocus: summary,
  });
}
