// The "new messages" button over the timeline. While the reader is scrolled
// up (reading something older), what arrives below does not move the view
// (timeline.js keeps it only when the view was at the bottom); the button
// counts what arrived out of sight, and a click on it jumps to the latest.
// It goes away on that click, once the reader scrolls down to the bottom
// themselves, and when another group is opened.

export class NewMessagesMarker {
  /**
   * `button` is the marker; `scroller` the timeline's scrolling box;
   * `nearBottom()` says whether the view is at the bottom and `toBottom()`
   * scrolls there (the timeline's own, so both agree on what "bottom" is).
   */
  constructor({ button, scroller, nearBottom, toBottom }) {
    this.button = button;
    this.nearBottom = nearBottom;
    this.count = 0;
    button.addEventListener('click', () => {
      toBottom();
      this.clear();
    });
    scroller.addEventListener(
      'scroll',
      () => {
        if (this.count && this.nearBottom()) this.clear();
      },
      { passive: true },
    );
    this.clear();
  }

  /** `n` messages or replies arrived below the view while it was scrolled up. */
  add(n) {
    this.count += n;
    const label = this.count === 1 ? '1 new message' : `${this.count} new messages`;
    this.button.textContent = `↓ ${label}`;
    this.button.setAttribute('aria-label', `${label}: jump to the latest`);
    this.button.dataset.count = String(this.count);
    this.button.hidden = false;
  }

  clear() {
    this.count = 0;
    this.button.hidden = true;
    this.button.dataset.count = '0';
  }
}
