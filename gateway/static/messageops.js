// What the page does with messages beyond showing them: delete one's own,
// regenerate a VP's reply, fetch a reply joined mid-way whole, keep the
// group's usage total in the header, and drop queued messages too large to
// ever be sent.

import { api } from './api.js';
import { frameBytes } from './composer.js';

const USAGE_DELAY_MS = 200;

export class MessageOps {
  /**
   * `groupId()` is the open group; `timeline` shows the messages; `toast(text, kind)`
   * tells the user; `usageNode` is the header's usage total.
   */
  constructor({ groupId, timeline, toast, usageNode }) {
    this.groupId = groupId;
    this.timeline = timeline;
    this.toast = toast;
    this.usageNode = usageNode;
    this.usageTimer = null;
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

  /** The group's token and cost total in the header, from the store (throttled). */
  refreshUsage() {
    clearTimeout(this.usageTimer);
    this.usageTimer = setTimeout(() => this.showUsage(), USAGE_DELAY_MS);
  }

  async showUsage() {
    const groupId = this.groupId();
    const node = this.usageNode;
    if (!groupId) {
      node.hidden = true;
      return;
    }
    try {
      const usage = await api.usage(groupId);
      if (groupId !== this.groupId()) return;
      const tokens = (usage.inputTokens || 0) + (usage.outputTokens || 0);
      node.textContent = `${tokens.toLocaleString()} tokens · $${(usage.costUsd || 0).toFixed(4)}`;
      node.title = `${usage.turns} turns: ${usage.inputTokens} tokens in, ${usage.outputTokens} out`;
      const today = usage.today;
      if (today && (today.maxTokens || today.maxUsd)) {
        // The group has a daily budget: how much of it today's turns used.
        const parts = [];
        if (today.maxTokens) parts.push(`${today.tokens.toLocaleString()}/${today.maxTokens.toLocaleString()} tokens`);
        if (today.maxUsd) parts.push(`$${today.costUsd.toFixed(2)}/$${today.maxUsd}`);
        node.textContent += ` · today ${parts.join(', ')}`;
        node.dataset.budgetSpent = String(
          (today.maxTokens && today.tokens >= today.maxTokens) || (today.maxUsd && today.costUsd >= today.maxUsd),
        );
      }
      node.dataset.turns = String(usage.turns);
      node.hidden = false;
    } catch {
      node.hidden = true;
    }
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
