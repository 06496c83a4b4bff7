// The chat header's title, and its "more" panel on a narrow screen.
//
// The title is one line, cut with an ellipsis when it does not fit; the
// whole name stays reachable: it is the title's tooltip, and a tap (or
// Enter) on the title opens a card under the header that shows it in full.
// On a phone the header is one row (chathead.css): the title with the VPs'
// chips under it, the connection state and Stop all, and a ⋮ button that
// opens the rest (usage, Export, Files, People, Settings, the group's menu)
// as a panel. The card and the panel close like menus (menus.js).

import { closesLikeAMenu } from './menus.js';

const $ = (id) => document.getElementById(id);

/** The name of what is open (or none) on the title, in its tooltip and card, and as the tab's title. */
export function showTitle(name) {
  const button = $('group-title-button');
  const card = $('title-full');
  button.textContent = name || 'No group selected';
  button.title = name || '';
  if (card.textContent !== (name || '')) {
    card.textContent = name || '';
    setExpanded(button, card, false);
  }
  document.title = name ? `${name} · Yeaft` : 'Yeaft';
}

function setExpanded(button, panel, open) {
  panel.hidden = !open;
  button.setAttribute('aria-expanded', String(open));
}

/** Wire the title's card and the narrow header's ⋮ panel. */
export function mountHeadBar() {
  const button = $('group-title-button');
  const card = $('title-full');
  button.addEventListener('click', () => setExpanded(button, card, card.hidden && Boolean(card.textContent)));
  closesLikeAMenu(card, {
    isOpen: () => !card.hidden,
    close: () => setExpanded(button, card, false),
    inside: [button],
    returnFocus: button,
  });

  const head = $('chat-head');
  const more = $('head-more');
  const tools = $('head-tools');
  const setMore = (open) => {
    head.dataset.more = open ? 'open' : 'closed';
    more.setAttribute('aria-expanded', String(open));
  };
  more.addEventListener('click', () => setMore(head.dataset.more !== 'open'));
  closesLikeAMenu(tools, {
    isOpen: () => head.dataset.more === 'open',
    close: () => setMore(false),
    inside: [more],
    returnFocus: more,
  });
}
