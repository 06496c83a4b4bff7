// The chat timeline of one group: people's messages, VP bubbles, hand-offs
// and notices, in order.
//
// Every message arrives the same way whoever wrote it: a `group_message`
// frame from the group's event log (the sender's own pending bubble is
// matched to it by clientMessageId, so it is never shown twice). Replies to
// one message sit together in its thread row, right under it, which lays
// the bubbles side by side when the window is wide enough, so VPs answering
// at the same time are read at the same time; see thread.js for where a
// row goes.
//
// A message or a reply that arrives while the reader is scrolled up leaves
// the view where it is and is counted on the "new messages" button
// (newmarker.js) instead.

import { attachmentsNode } from './attachments.js';
import { avatar, el, formatTime } from './dom.js';
import { copyButton, renderMarkdown } from './markdown.js';
import { NewMessagesMarker } from './newmarker.js';
import { Threads } from './thread.js';
import { TurnBubble } from './turn.js';

const NEAR_BOTTOM_PX = 80;
const BUSY_STATES = new Set(['thinking', 'streaming', 'tool', 'queued']);

export class Timeline {
  /**
   * `scroller` scrolls, `list` holds the items. `persona(id)` returns
   * {name, role}; `onCancel(vpId)` stops a VP; `me` is the user's name;
   * `newMessages` is the button that counts what arrives out of sight.
   */
  constructor({ scroller, list, persona, onCancel, onChange, onTurnEnd, onDelete, onRegenerate, onBubble, newMessages }) {
    // `onDelete(messageId)` deletes one of the user's own messages;
    // `onRegenerate(bubble)` asks the bubble's VP to answer again;
    // `onBubble(bubble)` sees every new bubble (team mode labels a task's runs).
    this.onDelete = onDelete || null;
    this.onBubble = onBubble || (() => {});
    this.onRegenerate = onRegenerate || null;
    this.scroller = scroller;
    this.list = list;
    this.persona = persona;
    this.onCancel = onCancel;
    this.onChange = onChange || (() => {});
    this.onTurnEnd = onTurnEnd || (() => {});
    this.me = '';
    // A frame another view shows instead (a user thread's, threadpanel.js): true to take it.
    this.divert = () => false;
    this.threads = new Threads();
    this.unseen = 0;
    // Other views of the stored messages (reactions.js), told of each (see observe).
    this.observers = [];
    this.marker = newMessages
      ? new NewMessagesMarker({
        button: newMessages,
        scroller,
        nearBottom: () => this.nearBottom(),
        toBottom: () => this.scrollToBottom(),
      })
      : null;
    this.reset();
  }

  reset() {
    this.turns = new Map();
    this.userMessages = new Map();
    this.threads.reset();
    this.list.replaceChildren();
    this.marker?.clear();
    for (const observer of this.observers) observer.reset?.();
  }

  /**
   * `observer.shown(node, message)` is called with each stored message's node
   * as it is shown (a page of history, with its `reactions`; a person's
   * message or a VP's reply once stored, as `{id}`); `observer.reset()` when
   * the timeline starts over (another group).
   */
  observe(observer) {
    this.observers.push(observer);
  }

  shown(node, message) {
    for (const observer of this.observers) observer.shown?.(node, message);
  }

  // -- scrolling ------------------------------------------------------------
  nearBottom() {
    const s = this.scroller;
    return s.scrollHeight - s.scrollTop - s.clientHeight < NEAR_BOTTOM_PX;
  }

  /**
   * Run `change`, then keep the view pinned to the bottom if it was there;
   * if it was not, what `change` added (`this.unseen`) goes on the marker.
   */
  mutate(change) {
    const pinned = this.nearBottom();
    this.unseen = 0;
    const result = change();
    if (pinned) this.scrollToBottom();
    else if (this.unseen) this.marker?.add(this.unseen);
    this.unseen = 0;
    this.onChange();
    return result;
  }

  scrollToBottom() {
    this.scroller.scrollTop = this.scroller.scrollHeight;
  }

  // -- placing items -------------------------------------------------------
  /** Put a bubble in the row of the message it answers (see thread.js). */
  place(bubble, triggerId, container = this.list) {
    if (triggerId && bubble.triggerId === triggerId) return;
    if (triggerId) bubble.triggerId = triggerId;
    const before = bubble.root.closest('.thread');
    const row = triggerId ? this.threads.rowFor(triggerId, container) : this.lastRow(container);
    Threads.repliesOf(row).append(bubble.root);
    this.threads.joined(row, bubble.vpId);
    // A row left with no bubble (the one a moved bubble sat in) goes.
    if (before && before !== row && !before.querySelector('.bubble')) before.remove();
  }

  /** The row at the end of `container`, for a turn whose trigger is not known yet. */
  lastRow(container) {
    const last = container.lastElementChild;
    if (last && last.classList.contains('thread')) return last;
    return this.threads.rowFor(null, container);
  }

  // -- history -------------------------------------------------------------
  /** Render history messages (oldest first) at the end, or before everything. */
  renderHistory(messages, { prepend = false } = {}) {
    const target = prepend ? document.createDocumentFragment() : this.list;
    for (const message of messages) this.renderStored(target, message);
    if (prepend) {
      const before = this.scroller.scrollHeight;
      this.list.prepend(target);
      // Keep the message the user was reading where it was.
      this.scroller.scrollTop += this.scroller.scrollHeight - before;
    } else {
      this.scrollToBottom();
    }
    this.markLatest();
    this.onChange();
  }

  /**
   * Mark each VP's newest stored reply on screen: only that one offers
   * Regenerate (the server refuses the others).
   */
  markLatest() {
    const newest = new Map();
    for (const node of this.list.querySelectorAll('.bubble[data-message-id]')) {
      newest.get(node.dataset.vp)?.removeAttribute('data-latest');
      node.dataset.latest = 'true';
      newest.set(node.dataset.vp, node);
    }
  }

  renderStored(container, message) {
    const meta = message.meta || {};
    if (this.threads.has(message.id) || this.divert({ ...message, threadId: meta.threadId })) return;
    // Its author deleted it: it is gone for everyone (the log keeps a tombstone).
    if (meta.deleted) return;
    if (message.role === 'user') {
      const cmid = meta.clientMessageId;
      const pending = cmid ? this.userMessages.get(cmid) : null;
      const node = pending || this.userNode({ ...message, clientMessageId: cmid, state: 'sent' });
      if (pending) this.markSent(pending, message.id);
      container.append(node); // one sent while the history loaded moves into place
      this.rememberPerson(message.id, node, message);
      this.shown(node, message);
    } else if (message.role === 'system') {
      container.append(this.noticeNode(message.text, meta.notice || {}, message.ts));
    } else if (meta.injectedBy === 'route_forward') {
      const from = meta.senderVpId || message.author;
      const node = this.handoffNode(from, meta.routeForwardTarget, message.text, meta.reason);
      container.append(node);
      this.rememberHandoff(message.id, node, from, message.text, meta);
    } else {
      const turnId = meta.turnId || message.id;
      if (this.turns.has(turnId)) return;
      const bubble = this.newBubble(message.author, turnId);
      if (meta.task) bubble.markTask(meta.task);
      bubble.appendText(message.text);
      if (meta.stop === 'aborted' || meta.incomplete) bubble.end('cancelled');
      else if (meta.stop === 'error') bubble.end('error');
      else bubble.end('complete');
      bubble.showUsage({
        ts: message.ts,
        stopped: meta.stop === 'aborted',
        usage: meta.usage,
        costUsd: meta.costUsd,
        durationMs: meta.durationMs,
      });
      bubble.setMessageId(message.id);
      if (meta.supersededBy) bubble.markSuperseded();
      const causes = meta.causedBy || [];
      this.place(bubble, causes[causes.length - 1] || null, container);
      this.threads.rememberReply(message.id, bubble);
      this.shown(bubble.root, message);
    }
  }

  rememberPerson(id, node, { author, text }) {
    this.threads.remember(id, { node, kind: 'person', chain: id, author, text });
  }

  rememberHandoff(id, node, from, text, { chainId, causedBy }) {
    const depth = (causedBy || []).length;
    node.style.setProperty('--depth', String(Math.min(depth, 4)));
    this.threads.remember(id, { node, kind: 'handoff', chain: chainId || '', author: from, text, depth });
  }

  /**
   * A `group_message` frame: a message stored in the group log, live. The
   * sender's pending bubble becomes it (and moves after whatever the log
   * put before it); anyone else's is added. Hand-offs show who handed to whom.
   */
  message(frame) {
    if (this.threads.has(frame.messageId) || this.divert(frame)) return; // in the history already
    this.mutate(() => {
      if (frame.handoff) {
        const { from, to, reason } = frame.handoff;
        const node = this.handoffNode(from, to, frame.text, reason);
        this.list.append(node);
        this.rememberHandoff(frame.messageId, node, from, frame.text, frame);
        this.unseen += 1;
        return;
      }
      if (frame.role !== 'user') return;
      const cmid = frame.clientMessageId;
      let node = cmid ? this.userMessages.get(cmid) : null;
      if (node) {
        this.markSent(node, frame.messageId);
      } else {
        node = this.userNode({ ...frame, id: frame.messageId, state: 'sent' });
        this.unseen += 1;
      }
      this.list.append(node);
      this.rememberPerson(frame.messageId, node, frame);
      this.shown(node, { id: frame.messageId, people: frame.people, text: frame.text });
    });
  }

  // -- user messages -------------------------------------------------------
  userNode({ id, author, text, ts, clientMessageId, state, attachments }) {
    const mine = !author || author === this.me;
    const node = el(
      'div',
      {
        class: `user-msg${mine ? ' mine' : ''}`,
        testid: 'user-message',
        dataset: { state, messageId: id || '', clientMessageId: clientMessageId || '' },
      },
      el(
        'div',
        { class: 'user-meta' },
        el('span', { class: 'user-name', text: mine ? 'You' : author }),
        el('time', { class: 'user-time', text: formatTime(ts) }),
        el('span', { class: 'user-state', testid: 'user-message-state' }),
      ),
      this.userBody(text),
      attachmentsNode(attachments),
      this.userActions(text),
    );
    if (clientMessageId) this.userMessages.set(clientMessageId, node);
    this.setUserState(node, state);
    return node;
  }

  userBody(text) {
    const body = el('div', { class: 'user-text', testid: 'user-text' });
    renderMarkdown(body, text);
    return body;
  }

  /** Copy (any message) and Delete (the user's own, once stored). */
  userActions(text) {
    const copy = copyButton(() => text, { className: 'msg-action', testid: 'copy-message' });
    const remove = el('button', {
      type: 'button',
      class: 'msg-action danger',
      testid: 'delete-message',
      text: 'Delete',
      onclick: (event) => {
        const node = event.target.closest('.user-msg');
        const id = node?.dataset.messageId;
        if (!id || !this.onDelete) return;
        if (!window.confirm('Delete this message for everyone?')) return;
        event.target.disabled = true;
        this.onDelete(id, () => {
          event.target.disabled = false;
        });
      },
    });
    return el('div', { class: 'msg-actions', testid: 'user-actions' }, copy, remove);
  }

  // -- changes to stored messages ------------------------------------------
  /** A `message_changed` frame: a message was deleted, or a reply superseded. */
  changed(frame) {
    if (frame.change === 'deleted') this.removeMessage(frame.messageId);
    else if (frame.change === 'superseded') this.markSuperseded(frame.messageId);
  }

  /** Dim a reply a regenerated one replaces (it stays readable). */
  markSuperseded(messageId) {
    const node = this.list.querySelector(`.bubble[data-message-id="${CSS.escape(messageId)}"]`);
    if (!node) return;
    node.classList.add('superseded');
    node.dataset.superseded = 'true';
  }

  /** Take a deleted message off the screen (its replies stay). */
  removeMessage(messageId) {
    const node = this.list.querySelector(`.user-msg[data-message-id="${CSS.escape(messageId)}"]`);
    if (!node) return;
    this.mutate(() => {
      node.remove();
      const cmid = node.dataset.clientMessageId;
      if (cmid) this.userMessages.delete(cmid);
      // The replies stay; the line naming what they answer no longer quotes it.
      const rows = this.list.querySelectorAll(`.thread[data-trigger="${CSS.escape(messageId)}"] > .reply-to`);
      for (const label of rows) label.textContent = '↳ a deleted message';
    });
  }

  /** Scroll to a message and flash it; false when it is not on screen. */
  focusMessage(messageId) {
    const sel = CSS.escape(messageId);
    const node = this.list.querySelector(`[data-message-id="${sel}"]`);
    if (!node) return false;
    node.scrollIntoView({ block: 'center' });
    node.classList.remove('flash');
    void node.offsetWidth; // restart the animation
    node.classList.add('flash');
    node.dataset.focused = 'true';
    return true;
  }

  setUserState(node, state, reason) {
    node.dataset.state = state;
    const label = { pending: 'sending…', sent: '', failed: `not sent: ${reason || 'error'}` };
    node.querySelector('.user-state').textContent = label[state] ?? '';
  }

  /**
   * Show a message the user just sent, pending until its ack. One sent while
   * the history was loading is already shown: it moves after the history.
   */
  addPending(frame) {
    if (this.divert(frame)) return;
    const shown = this.userMessages.get(frame.clientMessageId);
    this.mutate(() => {
      this.list.append(
        shown ||
        this.userNode({
          author: this.me,
          text: frame.text,
          ts: Date.now() / 1000,
          clientMessageId: frame.clientMessageId,
          state: 'pending',
          attachments: frame.attachments,
        }),
      );
    });
    this.scrollToBottom();
  }

  markSent(node, messageId) {
    if (messageId) node.dataset.messageId = messageId;
    this.setUserState(node, 'sent');
  }

  ack(clientMessageId, messageId) {
    const node = this.userMessages.get(clientMessageId);
    if (node) this.markSent(node, messageId);
  }

  fail(clientMessageId, reason) {
    const node = this.userMessages.get(clientMessageId);
    if (node) this.setUserState(node, 'failed', reason);
  }

  // -- notices and hand-offs -----------------------------------------------
  noticeNode(text, detail = {}, ts) {
    const rule = detail.rule || detail.kind || '';
    const kind = detail.level === 'error' || detail.error ? 'error' : 'notice';
    return el(
      'div',
      { class: `notice ${kind}`, testid: 'notice', role: 'status', dataset: { rule } },
      el('span', { class: 'notice-icon', 'aria-hidden': 'true', text: kind === 'error' ? '!' : 'i' }),
      el('span', { class: 'notice-text', text }),
      ts ? el('time', { class: 'notice-time', text: formatTime(ts) }) : null,
    );
  }

  notice(text, detail = {}) {
    this.mutate(() => this.list.append(this.noticeNode(text, detail, Date.now() / 1000)));
  }

  handoffNode(from, to, text, reason) {
    return el(
      'div',
      {
        class: 'handoff',
        testid: 'handoff',
        dataset: { from: from || '', to: to || '', via: 'route_forward' },
        title: reason ? `why: ${reason}` : null,
      },
      el('span', { class: 'handoff-route', text: `@${from} → @${to || '?'}` }),
      el('span', { class: 'handoff-text', text: `: ${text}` }),
    );
  }

  // -- VP turns --------------------------------------------------------------
  newBubble(vpId, turnId, joinedLate = false) {
    const bubble = new TurnBubble({
      vpId,
      turnId,
      joinedLate,
      persona: this.persona(vpId),
      onCancel: (id) => this.onCancel(id),
      onRegenerate: this.onRegenerate,
    });
    this.turns.set(turnId, bubble);
    this.onBubble(bubble);
    return bubble;
  }

  /**
   * The bubble of a turn, made on its first frame. Every turn starts with
   * `agent_status thinking`; a bubble made from any other frame was joined
   * in the middle (the page loaded while the VP was writing).
   */
  bubbleFor(vpId, turnId, firstFrame) {
    let bubble = this.turns.get(turnId);
    if (!bubble) {
      const fromStart =
        firstFrame.type === 'agent_status' && (firstFrame.state === 'thinking' || !!firstFrame.queue);
      bubble = this.newBubble(vpId, turnId, !fromStart);
      this.place(bubble, firstFrame.triggerId || null);
      this.unseen += 1;
    }
    return bubble;
  }

  /** A yeaft_output frame. */
  output(frame) {
    if (this.divert(frame)) return;
    const data = frame.data || {};
    if (frame.vpId === 'system') {
      if (data.type === 'system' || data.message) {
        const level = data.subtype === 'error' || data.is_error ? 'error' : 'notice';
        this.notice(data.message || data.error || 'notice', { ...(data.detail || {}), level });
      }
      return;
    }
    const existing = this.turns.get(frame.turnId);
    // A turn already shown whole (from history) needs none of its pieces again.
    if (existing && existing.final) return;
    const bubble = this.mutate(() => {
      const target = this.bubbleFor(frame.vpId, frame.turnId, frame);
      target.apply(data);
      return target;
    });
    // The result names the reply the turn stored: turns it starts thread under it.
    if (data.type === 'result' && data.message_id) {
      this.threads.rememberReply(data.message_id, bubble);
      this.markLatest();
      this.shown(bubble.root, { id: data.message_id });
    }
    if (bubble.final) this.onTurnEnd(bubble);
  }

  /** An agent_status frame. */
  status(frame) {
    if (this.divert(frame)) return;
    if (frame.queue && frame.turnId && frame.vpId !== 'system') {
      // A message that found its VP busy: say what became of it, under it.
      this.mutate(() => this.bubbleFor(frame.vpId, frame.turnId, frame).queueNote(frame.queue));
    }
    const bubble = this.turns.get(frame.turnId);
    if (bubble) {
      // A bubble made before its trigger was known (joined mid-turn) moves under it.
      if (frame.triggerId && !bubble.triggerId) this.mutate(() => this.place(bubble, frame.triggerId));
      if (!bubble.final) this.mutate(() => bubble.setStatus(frame.state));
    } else if (frame.turnId && BUSY_STATES.has(frame.state) && frame.vpId !== 'system') {
      this.mutate(() => this.bubbleFor(frame.vpId, frame.turnId, frame).setStatus(frame.state));
    }
  }

  /** Bubbles still running. */
  activeTurns() {
    return [...this.turns.values()].filter((bubble) => !bubble.final);
  }
}

/** A roster member's presence chip for the chat header. */
export function presenceChip(vpId, persona, onClick) {
  return el(
    'button',
    {
      type: 'button',
      class: 'presence',
      testid: 'vp-presence',
      dataset: { vp: vpId, state: 'idle' },
      title: `${persona.name}, ${persona.role || 'VP'}: click to mention`,
      onclick: () => onClick(vpId),
    },
    avatar(vpId, persona.name),
    el('span', { class: 'presence-dot', 'aria-hidden': 'true' }),
    el('span', { class: 'presence-name', text: persona.name }),
  );
}
