// What the page does with messages beyond showing them: delete one's own,
// regenerate a VP's reply, fetch a reply joined mid-way whole, and drop
// queued messages too large to ever be sent. (The header's usage total is
// chathead.js's.)

import { api } from './api.js';
import { frameBytes } from './composer.js';

export class MessageOps {
  /**
   * `groupId()` is the open group; `timeline` shows the messages; `toast(text, kind)`
   * tells the user.
   */
  constructor({ groupId, timeline, toast }) {
    this.groupId = groupId;
    this.timeline = timeline;
    this.toast = toast;
  }

  async deleteMessage(messageId, failed) {
    const groupId = this.groupId();
    if (!groupId) return;
    try {
      await api.deleteMessage(groupId, messageId);
      // The message_changed frame takes it off every screen; this one need not wait.
      this.timeline.removeMessage(messageId);
    } catch (err) {
      failed();
      this.toast(`Could not delete the message: ${err.message}`);
    }
  }

  async regenerate(bubble) {
    const groupId = this.groupId();
    if (!groupId || !bubble.messageId) return;
    try {
      await api.regenerate(groupId, bubble.messageId);
      this.timeline.markSuperseded(bubble.messageId);
    } catch (err) {
      bubble.showActions();
      this.toast(`Could not regenerate: ${err.message}`);
    }
  }

  /**
   * A reply the page joined in the middle is stored whole once it ends (just
   * after its result frame); fetch it and show it in full. `current()` says
   * whether the group is still the one shown.
   */
  async fetchWholeReply(groupId, bubble, current) {
    for (let attempt = 0; attempt < 6; attempt += 1) {
      await new Promise((resolve) => setTimeout(resolve, 250 * 2 ** attempt));
      if (!current()) return;
      try {
        const page = await api.messages(groupId, { limit: 50 });
        const stored = (page?.messages || []).find(
          (m) => m.role === 'assistant' && m.meta?.turnId === bubble.turnId,
        );
        if (stored) {
          this.timeline.mutate(() => bubble.replaceText(stored.text));
          return;
        }
      } catch {
        // Try again; the bubble keeps the part that was seen meanwhile.
      }
    }
    bubble.lateFetchFailed();
  }

  /** Queued messages (from an earlier page) too large to ever pass: dropped, and said so. */
  dropOversized(connection, limit) {
    if (!limit || !connection) return;
    for (const frame of [...connection.outbox.values()]) {
      if (frameBytes(frame.text || '') > limit) {
        connection.drop(frame.clientMessageId);
        this.toast('A message too long to send was discarded.', 'info');
      }
    }
  }

  /** A `frame_too_large` error names no message: fail every pending one over `limit`. */
  dropRefused(connection, groupId, limit) {
    for (const pending of connection.pending(groupId)) {
      if (frameBytes(pending.text) > limit) {
        this.timeline.fail(pending.clientMessageId, 'too long to send');
        connection.drop(pending.clientMessageId);
      }
    }
  }
}
