// The group list's extras: each group's last message and the user's unread
// count, from the server (GET /api/inbox), and the read mark that clears it.
//
// Unread counts live on the server (a read mark per user per group), so
// they agree across tabs and devices. The page moves the mark when it shows
// a group's newest message (POST /api/groups/{id}/read), and re-reads the
// summaries every POLL_MS and when the window comes back to the front: only
// the open group streams live, so the others' counts come from these reads.

import { api } from './api.js';

const POLL_MS = 10_000;
const MARK_DELAY_MS = 300;

export class Inbox {
  /** `onChange(summaries)` redraws the group list; summaries map group id → summary. */
  constructor({ onChange }) {
    this.onChange = onChange;
    this.summaries = new Map();
    this.timer = null;
    this.pendingMark = new Map();
    this.markTimer = null;
    // The newest message shown while the page was in the background: read
    // only once the person can see it.
    this.unseen = null;
    this.visible = () => {
      if (document.visibilityState !== 'visible') return;
      if (this.unseen) this.read(this.unseen.groupId, this.unseen.messageId);
      this.unseen = null;
      this.refresh();
    };
  }

  start() {
    this.stop();
    this.timer = setInterval(() => this.refresh(), POLL_MS);
    document.addEventListener('visibilitychange', this.visible);
    return this.refresh();
  }

  stop() {
    clearInterval(this.timer);
    this.timer = null;
    document.removeEventListener('visibilitychange', this.visible);
  }

  async refresh() {
    try {
      const data = await api.inbox();
      this.summaries = new Map((data?.groups || []).map((s) => [s.groupId, s]));
      // A mark still on its way: that group is read, whatever this answer says.
      for (const groupId of this.pendingMark.keys()) {
        const shown = this.summaries.get(groupId);
        if (shown) this.summaries.set(groupId, { ...shown, unread: 0 });
      }
      this.onChange(this.summaries);
    } catch {
      // The next poll tries again; the list keeps what it showed.
    }
  }

  /** The open group's newest message was seen: move the read mark there (batched). */
  read(groupId, messageId) {
    if (!groupId || !messageId) return;
    if (document.visibilityState === 'hidden') {
      this.unseen = { groupId, messageId };
      return;
    }
    this.pendingMark.set(groupId, messageId);
    const shown = this.summaries.get(groupId);
    if (shown && shown.unread) {
      this.summaries.set(groupId, { ...shown, unread: 0 });
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
    const shown = this.summaries.get(groupId) || { groupId, unread: 0, lastMessage: null };
    this.summaries.set(groupId, { ...shown, lastMessage: last });
    this.onChange(this.summaries);
  }
}
