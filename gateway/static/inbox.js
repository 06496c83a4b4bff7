// The group list's extras: each group's last message and the user's unread
// and mention counts, from the server, and the read mark that clears them.
//
// Unread counts live on the server (a read mark per user per group), so
// they agree across tabs and devices. The page moves the mark when it shows
// a group's newest message (POST /api/groups/{id}/read). The counts come
// whole from GET /api/inbox once the connection is live (at connect and
// after every reconnect) and when the window comes back to the front; in
// between the server pushes an `inbox_summary` frame for a group whenever a
// message lands in it or the user's mark there moves (on any tab or
// device): nothing is polled.

import { api } from './api.js';
import { onEveryFrame } from './connection.js';

const MARK_DELAY_MS = 300;

export class Inbox {
  /**
   * `onChange(summaries)` redraws the group list; summaries map group id → summary.
   * `onSummary(frame)` sees each pushed `inbox_summary` (mentions.js notifies).
   */
  constructor({ onChange, onSummary = () => {} }) {
    this.onChange = onChange;
    this.onSummary = onSummary;
    this.summaries = new Map();
    this.pendingMark = new Map();
    // The newest message marked read per group: a push that says it is the
    // group's last message is read, whatever order the pushes came in.
    this.marked = new Map();
    this.markTimer = null;
    this.running = false;
    this.opening = false;
    // The newest message shown while the page was in the background: read
    // only once the person can see it.
    this.unseen = null;
    this.visible = () => {
      if (document.visibilityState !== 'visible') return;
      if (this.unseen) this.read(this.unseen.groupId, this.unseen.messageId);
      this.unseen = null;
      this.refresh();
    };
    onEveryFrame((frame) => {
      if (frame.type === 'inbox_summary' && this.running) this.pushed(frame);
    });
  }

  start() {
    this.stop();
    this.running = true;
    document.addEventListener('visibilitychange', this.visible);
  }

  stop() {
    this.running = false;
    document.removeEventListener('visibilitychange', this.visible);
  }

  /**
   * The connection's state: each socket it opens (`connecting`, at start and
   * on every reconnect) reads the whole inbox once it is live. A replay after
   * opening a group (`replaying` → `live`) reads nothing.
   */
  connectionState(state) {
    if (state === 'connecting') this.opening = true;
    if (state !== 'live' || !this.opening || !this.running) return;
    this.opening = false;
    this.refresh();
  }

  async refresh() {
    try {
      const data = await api.inbox();
      this.summaries = new Map((data?.groups || []).map((s) => [s.groupId, this.settled(s)]));
      this.onChange(this.summaries);
    } catch {
      // The next connect or return to the front tries again; the list keeps what it showed.
    }
  }

  /** A summary the server pushed: it replaces the group's line. */
  pushed(frame) {
    const { type, mention, ...summary } = frame;
    this.summaries.set(frame.groupId, this.settled(summary));
    this.onChange(this.summaries);
    this.onSummary(frame);
  }

  /** A summary with what this tab read and the server may not know yet taken off. */
  settled(summary) {
    const last = summary.lastMessage?.messageId;
    const read = this.pendingMark.has(summary.groupId) || (last && this.marked.get(summary.groupId) === last);
    return read ? { ...summary, unread: 0, mentions: 0 } : summary;
  }

  /** The open group's newest message was seen: move the read mark there (batched). */
  read(groupId, messageId) {
    if (!groupId || !messageId) return;
    if (document.visibilityState === 'hidden') {
      this.unseen = { groupId, messageId };
      return;
    }
    this.pendingMark.set(groupId, messageId);
    this.marked.set(groupId, messageId);
    const shown = this.summaries.get(groupId);
    if (shown && (shown.unread || shown.mentions)) {
      this.summaries.set(groupId, { ...shown, unread: 0, mentions: 0 });
      this.onChange(this.summaries);
    }
    clearTimeout(this.markTimer);
    this.markTimer = setTimeout(() => this.flush(), MARK_DELAY_MS);
  }

  async flush() {
    const marks = [...this.pendingMark.entries()];
    this.pendingMark.clear();
    for (const [groupId, messageId] of marks) {
      try {
        const summary = await api.markRead(groupId, messageId);
        if (summary) this.summaries.set(groupId, summary);
      } catch {
        // A message not stored yet (a pending one) or a group left: nothing to mark.
      }
    }
    this.onChange(this.summaries);
  }

  /** A message arrived live in a group: it is the group's last message now. */
  saw(groupId, last) {
    const shown = this.summaries.get(groupId) || { groupId, unread: 0, mentions: 0, lastMessage: null };
    this.summaries.set(groupId, { ...shown, lastMessage: last });
    this.onChange(this.summaries);
  }
}
