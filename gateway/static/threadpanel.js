// User threads: a side conversation under any message of a group.
//
// Not the reply rows of thread.js (a VP's replies grouped under the message
// they answer, on the main timeline): a user thread is a place of its own.
// Under each stored message the main timeline shows "Reply in thread" or,
// once it has replies, their summary ("3 replies · last 2 min ago" and who
// wrote them). Either opens the side panel: the message that started the
// thread, the thread's replies and VP turns (a timeline of its own), and a
// composer whose messages, and the VP answers to the @mentions in them,
// stay in the thread.
//
// Every frame of a thread carries its `threadId` (protocol/threads.py): the
// main timeline hands those to this view (`timeline.divert`), which moves
// the root's summary on and, when that thread is open, shows them in the
// panel. The panel reads the thread over HTTP (GET /api/groups/{id}/threads/
// {threadId}); frames that arrive while it loads are applied after it.
//
// The panel's messages have what the main timeline's have: reactions (the
// page's one Reactions watches this timeline too) and Edit, "edited" and the
// ‹1/2› version switchers (a Versions of its own, observing this timeline).

import { request } from './api.js';
import { Composer } from './composer.js';
import { onEveryFrame } from './connection.js';
import { el, newId } from './dom.js';
import { Timeline } from './timeline.js';
import { Versions } from './versions.js';

const enc = encodeURIComponent;
const MINUTE = 60;

/** "just now", "2 min ago", "3 h ago", "4 d ago" for a Unix time in seconds. */
export function ago(ts, now = Date.now() / 1000) {
  const s = Math.max(0, now - ts);
  if (s < MINUTE) return 'just now';
  if (s < 60 * MINUTE) return `${Math.floor(s / MINUTE)} min ago`;
  if (s < 24 * 60 * MINUTE) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

export class ThreadPanel {
  /**
   * `timeline` is the main timeline (this observes it and takes its thread
   * frames); `persona(id)` names VPs; `groupId()` is the open group (null in
   * a one-to-one conversation); `me()` the user; `connection()` the live
   * connection; `roster()` the group's VPs for the composer's @-list;
   * `toast(text)` tells the user; `reactions` (reactions.js) shows reactions
   * in the panel too.
   */
  constructor({ timeline, persona, groupId, me, connection, roster, toast, reactions }) {
    Object.assign(this, { main: timeline, persona, groupId, me, connection, roster, toast });
    this.summaries = new Map(); // root id -> {count, lastTs, participants}
    this.nodes = new Map(); // root id -> its node on the main timeline
    this.replyRoot = new Map(); // reply id -> its root id (to count a deletion)
    this.openId = null;
    this.buffer = null; // frames of the open thread that came while it loaded
    this.build();
    reactions?.watch(this.timeline);
    new Versions({ timeline: this.timeline, groupId, toast });
    timeline.observe(this);
    timeline.divert = (frame) => this.divert(frame);
    onEveryFrame((frame) => this.frame(frame));
    setInterval(() => this.refreshAges(), 30_000);
  }

  // -- the panel --------------------------------------------------------------------
  build() {
    const list = el('div', { class: 'timeline', testid: 'thread-timeline' });
    this.scroll = el('div', { class: 'timeline-scroll thread-scroll' }, list);
    this.title = el('span', { class: 'thread-title', text: 'Thread' });
    const close = el('button', {
      type: 'button',
      class: 'icon-button',
      testid: 'thread-close',
      'aria-label': 'Close the thread',
      text: '✕',
      onclick: () => this.close(),
    });
    const input = el('textarea', {
      rows: '1',
      testid: 'thread-input',
      placeholder: 'Reply in the thread (@ to mention)',
      'aria-label': 'Reply in the thread',
    });
    const button = el('button', { type: 'submit', class: 'primary send', testid: 'thread-send', text: 'Send' });
    const menu = el('ul', { class: 'mention-menu', role: 'listbox', hidden: true });
    const form = el('form', { class: 'composer thread-composer', testid: 'thread-composer', autocomplete: 'off' }, menu, input, button);
    this.panel = el(
      'aside',
      { class: 'thread-panel', testid: 'thread-panel', hidden: true, 'aria-label': 'Thread' },
      el('header', { class: 'thread-head' }, this.title, close),
      this.scroll,
      form,
    );
    document.getElementById('chat').append(this.panel);
    this.timeline = new Timeline({
      scroller: this.scroll,
      list,
      persona: this.persona,
      onCancel: (vpId) => this.groupId() && this.connection()?.cancel(this.groupId(), vpId),
    });
    this.composer = new Composer({ form, input, button, menu, roster: this.roster, onSend: (text, mentions) => this.send(text, mentions) });
    // Named apart from the main composer's, which tests and screen readers find by name.
    this.composer.counter.setAttribute('data-testid', 'thread-composer-counter');
    this.composer.error.setAttribute('data-testid', 'thread-composer-error');
    this.panel.addEventListener('keydown', (event) => {
      if (event.key === 'Escape') this.close();
    });
  }

  async open(rootId) {
    const groupId = this.groupId();
    if (!groupId) return;
    this.openId = rootId;
    this.buffer = [];
    this.timeline.me = this.me();
    this.timeline.reset();
    this.panel.hidden = false;
    this.panel.dataset.threadId = rootId;
    this.composer.setEnabled(true);
    let thread;
    try {
      thread = await request('GET', `/api/groups/${enc(groupId)}/threads/${enc(rootId)}`);
    } catch (err) {
      this.toast(`Could not open the thread: ${err.message}`);
      this.close();
      return;
    }
    if (this.openId !== rootId || this.groupId() !== groupId) return;
    this.timeline.renderHistory([thread.root, ...thread.messages]);
    this.summary(rootId, thread.summary);
    const waiting = this.buffer;
    this.buffer = null;
    for (const frame of waiting) {
      if (typeof frame.seq !== 'number' || frame.seq > thread.lastSeq) this.show(frame);
    }
    this.composer.focus();
  }

  /** Open the thread under `rootId` at one of its replies (a search hit), flashed. */
  async openAt(rootId, messageId) {
    await this.open(rootId);
    if (this.openId !== rootId || this.panel.hidden) return;
    if (!this.timeline.focusMessage(messageId)) this.toast('That reply is no longer in the thread.', 'info');
  }

  close() {
    this.openId = null;
    this.buffer = null;
    this.panel.hidden = true;
    delete this.panel.dataset.threadId;
    this.timeline.reset();
  }

  send(text, mentions) {
    const groupId = this.groupId();
    const connection = this.connection();
    if (!groupId || !connection || !this.openId) return false;
    const clientMessageId = newId('m');
    this.timeline.addPending({ text, clientMessageId });
    connection.sendChat(groupId, text, mentions, clientMessageId, [], this.openId);
    return true;
  }

  // -- the main timeline's observer -------------------------------------------------
  reset() {
    this.summaries.clear();
    this.nodes.clear();
    this.replyRoot.clear();
    this.close();
  }

  shown(node, message) {
    if (!message.id || !this.groupId() || message.meta?.threadId) return;
    this.nodes.set(message.id, node);
    if (message.thread) this.summaries.set(message.id, message.thread);
    this.render(message.id);
  }

  /** The main timeline asks: is `frame` (or a stored message) a thread's? */
  divert(frame) {
    const rootId = frame.threadId || frame.meta?.threadId;
    if (!rootId || !this.groupId()) return false;
    if (frame.type === 'group_message' && frame.role !== 'system') {
      this.counted(rootId, frame.messageId, frame.author, frame.ts); // said just now
    } else if (frame.id && frame.role !== 'system' && !frame.meta?.deleted) {
      this.replyRoot.set(frame.id, rootId); // in a page of history: its root's summary counts it
    }
    return true;
  }

  // -- frames -------------------------------------------------------------------------
  frame(frame) {
    if (frame.type === 'ack' || frame.type === 'error') {
      // The panel's own messages: sent, or refused (the thread's root went, say).
      if (frame.type === 'ack') this.timeline.ack(frame.clientMessageId, frame.messageId);
      else if (frame.requestId && this.timeline.userMessages.has(frame.requestId)) {
        this.timeline.fail(frame.requestId, frame.message);
        this.connection()?.drop(frame.requestId);
      }
      return;
    }
    if (!frame.groupId || frame.groupId !== this.groupId()) return;
    if (frame.type === 'yeaft_output' && frame.threadId && frame.data?.type === 'result' && frame.data.message_id) {
      this.counted(frame.threadId, frame.data.message_id, frame.vpId, Date.now() / 1000);
    }
    if (frame.type === 'message_changed' && frame.change === 'deleted') this.uncounted(frame.messageId);
    const ours = frame.threadId === this.openId || frame.type === 'message_changed';
    if (!this.openId || !ours) return;
    if (this.buffer) this.buffer.push(frame);
    else this.show(frame);
  }

  show(frame) {
    if (frame.type === 'group_message') this.timeline.message(frame);
    else if (frame.type === 'yeaft_output') this.timeline.output(frame);
    else if (frame.type === 'agent_status') this.timeline.status(frame);
    else if (frame.type === 'message_changed') this.timeline.changed(frame);
  }

  // -- summaries ----------------------------------------------------------------------
  counted(rootId, id, author, ts) {
    if (id && this.replyRoot.has(id)) return;
    if (id) this.replyRoot.set(id, rootId);
    const was = this.summaries.get(rootId) || { count: 0, participants: [] };
    const participants = was.participants.includes(author) ? was.participants : [...was.participants, author];
    this.summaries.set(rootId, { count: was.count + 1, lastTs: ts || Date.now() / 1000, lastId: id, participants });
    this.render(rootId);
  }

  uncounted(id) {
    const rootId = this.replyRoot.get(id);
    const was = rootId && this.summaries.get(rootId);
    if (!was) return;
    this.replyRoot.delete(id);
    this.summaries.set(rootId, { ...was, count: Math.max(0, was.count - 1) });
    this.render(rootId);
  }

  summary(rootId, summary) {
    if (summary) this.summaries.set(rootId, summary);
    this.render(rootId);
  }

  /** The root's line on the main timeline: "Reply in thread", or its replies' summary. */
  render(rootId) {
    const node = this.nodes.get(rootId);
    if (!node) return;
    let bar = node.querySelector(':scope > .thread-bar');
    if (!bar) {
      bar = el('div', { class: 'thread-bar', testid: 'thread-bar' });
      node.append(bar);
    }
    const summary = this.summaries.get(rootId);
    const count = summary?.count || 0;
    const who = (summary?.participants || []).map((id) => this.label(id)).join(', ');
    const text = count
      ? `${count} ${count === 1 ? 'reply' : 'replies'} · last ${ago(summary.lastTs)}`
      : 'Reply in thread';
    bar.dataset.count = String(count);
    bar.replaceChildren(
      el(
        'button',
        {
          type: 'button',
          class: count ? 'thread-summary' : 'msg-action thread-start',
          testid: count ? 'thread-summary' : 'thread-start',
          dataset: { ts: String(summary?.lastTs || '') },
          onclick: () => this.open(rootId),
        },
        el('span', { class: 'thread-count', testid: 'thread-count', text }),
        count ? el('span', { class: 'thread-people', testid: 'thread-people', text: who }) : '',
      ),
    );
  }

  label(id) {
    const persona = this.persona(id);
    return persona.name !== id || this.roster().some((p) => p.id === id) ? `@${persona.name}` : id;
  }

  refreshAges() {
    for (const rootId of this.summaries.keys()) this.render(rootId);
  }
}
