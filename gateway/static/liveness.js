/**
 * Whether each busy VP still shows signs of life.
 *
 * A running turn sends `agent_status` `busy` (with its phase) every
 * `heartbeatS` seconds until its last status. A VP that is busy and has sent
 * nothing for STALE_BEATS of those intervals is probably hung, not slow: its
 * presence chip gets `data-stale` (see style.css). A VP whose server sends no
 * heartbeat is never marked.
 */
export const STALE_BEATS = 3;

export class Liveness {
  constructor(now = () => Date.now()) {
    this.now = now;
    this.seen = new Map();
  }

  /** A frame of `vpId` came; `every` is the heartbeat interval it named, if any. */
  alive(vpId, every) {
    const prior = this.seen.get(vpId);
    this.seen.set(vpId, { at: this.now(), every: every || prior?.every || null });
  }

  /** Whole seconds `vpId` has been silent, when that is past STALE_BEATS heartbeats; else 0. */
  staleFor(vpId) {
    const last = this.seen.get(vpId);
    if (!last || !last.every) return 0;
    const silent = (this.now() - last.at) / 1000;
    return silent > STALE_BEATS * last.every ? Math.floor(silent) : 0;
  }

  /** Take a VP's `agent_status`: show it on its chip in `bar`; returns it as shown. */
  status(bar, frame) {
    const shown = shownStatus(frame);
    if (shown.vpId) {
      this.alive(shown.vpId, frame.heartbeatS);
      showPresence(bar, shown);
    }
    return shown;
  }

  forget() {
    this.seen.clear();
  }
}

/** How a status shows: a heartbeat (`busy`) as the phase it names. */
export function shownStatus(frame) {
  return frame.state === 'busy' ? { ...frame, state: frame.phase || 'thinking' } : frame;
}

/** Show a VP's status (as `shownStatus` gives it) on its presence chip in `bar`. */
export function showPresence(bar, shown) {
  const chip = bar.querySelector(`[data-vp="${CSS.escape(shown.vpId)}"]`);
  if (!chip) return;
  chip.dataset.state = shown.state;
  delete chip.dataset.stale;
  chip.removeAttribute('aria-description');
}

/** Mark the presence chips in `bar` of busy VPs (a state in `busy`) that stopped beating. */
export function markStale(bar, liveness, busy) {
  for (const chip of bar.querySelectorAll('[data-vp]')) {
    const silent = busy.has(chip.dataset.state) ? liveness.staleFor(chip.dataset.vp) : 0;
    if (silent) {
      chip.dataset.stale = 'true';
      chip.setAttribute('aria-description', `no sign of life for ${silent} s`);
    } else if (chip.dataset.stale) {
      delete chip.dataset.stale;
      chip.removeAttribute('aria-description');
    }
  }
}
