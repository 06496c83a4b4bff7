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

  forget() {
    this.seen.clear();
  }
}
