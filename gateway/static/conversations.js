// One-to-one conversations (the seed's chat mode): the sidebar's
// "Conversations" section, the "New conversation" form, and the protocol of
// an open conversation.
//
// An open conversation is shown by the same timeline as a group: its id
// takes the place of the group id in the app's state. Its stored history
// comes from `/api/conversations/{id}/messages`; then `resume_conversation
// {conversationId, lastSeq}` streams what came after it: the person's
// messages as `group_message`, the VP's turns as `claude_output`, which
// `toGroupFrame` hands to the timeline in the shape it draws for a group.
// Messages go out as `send_message`; stop and answers use the same frames
// as a group, naming the conversation.

import { request as call } from './api.js';
import { avatar, el, newId } from './dom.js';

const HISTORY_PAGE = 100;
const enc = encodeURIComponent;

export const conversationApi = {
  list: async () => (await call('GET', '/api/conversations'))?.conversations || [],
  create: (vpId, title) => call('POST', '/api/conversations', title ? { vpId, title } : { vpId }),
  remove: (id) => call('DELETE', `/api/conversations/${enc(id)}`),
  messages: (id) => call('GET', `/api/conversations/${enc(id)}/messages?limit=${HISTORY_PAGE}`),
};

export class Conversations {
  /**
   * `onSelect(id)` opens a conversation (the app resets its view, then calls
   * `open`); `onGone(id)` is told when the open conversation was deleted;
   * `onChange()` when the list was read again (titles follow first messages).
   */
  constructor({ list, form, persona, onSelect, onGone, onChange, toast }) {
    this.list = list;
    this.form = form;
    this.persona = persona;
    this.onSelect = onSelect;
    this.onGone = onGone;
    this.onChange = onChange;
    this.toast = toast;
    this.items = [];
    this.current = null;
    this.info = null;
    this.needsResume = false;
    this.input = document.getElementById('message-input');
    this.menuButton = document.getElementById('group-menu-button');
    this.defaults = {
      placeholder: this.input?.placeholder,
      label: this.menuButton?.getAttribute('aria-label'),
    };
    this.picker = form.querySelector('[data-testid="new-conversation-vp"]');
    this.titleInput = form.querySelector('[data-testid="new-conversation-title"]');
    this.error = form.querySelector('[data-testid="new-conversation-error"]');
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      this.create();
    });
  }

  get active() {
    return this.current !== null;
  }

  has(id) {
    return this.items.some((c) => c.conversationId === id);
  }

  setPersonas(personas) {
    this.picker.replaceChildren(
      ...personas.map((p) => el('option', { value: p.id, text: `${p.name} · ${p.role || p.id}` })),
    );
    if (personas.some((p) => p.id === 'omni')) this.picker.value = 'omni';
  }

  async refresh() {
    try {
      this.items = await conversationApi.list();
    } catch (err) {
      this.toast(`Could not list the conversations: ${err.message}`);
    }
    this.render();
    this.onChange();
  }

  render() {
    if (!this.items.length) {
      this.list.replaceChildren(
        el('li', { class: 'group-empty', text: 'No conversations yet: start one below.' }),
      );
      return;
    }
    this.list.replaceChildren(
      ...this.items.map((c) => {
        const vp = this.persona(c.vpId);
        return el(
          'li',
          {},
          el(
            'button',
            {
              type: 'button',
              class: 'group-item conversation-item',
              testid: 'conversation-item',
              dataset: { conversationId: c.conversationId },
              'aria-current': c.conversationId === this.current ? 'true' : 'false',
              onclick: () => this.onSelect(c.conversationId),
            },
            el(
              'span',
              { class: 'group-name' },
              avatar(c.vpId, vp.name, 'small'),
              el('span', { class: 'conversation-title', text: c.title }),
            ),
            el('span', { class: 'group-roster', text: c.lastMessage || `with ${vp.name}` }),
          ),
        );
      }),
    );
  }

  async create() {
    this.error.textContent = '';
    try {
      const created = await conversationApi.create(this.picker.value, this.titleInput.value.trim());
      this.titleInput.value = '';
      this.form.closest('details')?.removeAttribute('open');
      await this.refresh();
      this.onSelect(created.conversationId);
    } catch (err) {
      this.error.textContent = err.message;
    }
  }

  /** What the app's chrome shows for the open conversation (a group of one VP). */
  asGroup(id) {
    const c = this.items.find((item) => item.conversationId === id);
    if (!c) return null;
    return { id, name: c.title, roster: [c.vpId], conversation: true };
  }

  /** Show a conversation: its stored history, then everything after it, live. */
  async open(id, { timeline, connection, isCurrent, setLoading }) {
    this.current = id;
    this.info = null;
    this.render();
    const vp = this.persona(this.items.find((c) => c.conversationId === id)?.vpId || '');
    this.dress(`Message ${vp.name || 'the VP'}`, 'Delete this conversation');
    if (window.location.hash !== `#c=${id}`) history.replaceState(null, '', `#c=${id}`);
    setLoading(true);
    let page;
    try {
      page = await conversationApi.messages(id);
    } catch (err) {
      if (!isCurrent()) return;
      setLoading(false);
      this.toast(`Could not load the conversation: ${err.message}`);
      return;
    }
    if (!isCurrent()) return;
    setLoading(false);
    timeline.renderHistory(page?.messages || []);
    const lastSeq = typeof page?.lastSeq === 'number' ? page.lastSeq : 0;
    connection.lastSeq.set(id, lastSeq);
    connection.sendControl({ type: 'resume_conversation', conversationId: id, lastSeq });
  }

  /** Forget the open conversation (another one or a group is being opened). */
  close(connection) {
    if (this.current && connection) connection.lastSeq.delete(this.current);
    this.current = null;
    this.info = null;
    this.dress(this.defaults.placeholder, this.defaults.label);
    this.render();
  }

  /** The composer's placeholder and the menu button's label, for a conversation or a group. */
  dress(placeholder, label) {
    if (this.input && placeholder) this.input.placeholder = placeholder;
    if (this.menuButton && label) this.menuButton.setAttribute('aria-label', label);
  }

  /** After a reconnect, ask for what the open conversation missed. */
  connectionState(state, connection) {
    if (state === 'reconnecting') this.needsResume = true;
    if ((state === 'live' || state === 'replaying') && this.needsResume && this.current) {
      this.needsResume = false;
      const lastSeq = connection.lastSeq.get(this.current) ?? 0;
      connection.send({ type: 'resume_conversation', conversationId: this.current, lastSeq });
    }
  }

  /** Send the person's message; the timeline shows it pending until the ack. */
  send(text, connection, timeline, files = []) {
    if (!this.current) return false;
    const clientMessageId = newId('m');
    timeline.addPending({ text, clientMessageId, attachments: files });
    const frame = { type: 'send_message', conversationId: this.current, text, clientMessageId };
    if (files.length) frame.attachments = files.map(({ id }) => ({ id }));
    connection.sendControl(frame);
    return true;
  }

  /**
   * A `claude_output` frame as the timeline draws a VP's output in a group,
   * or null when it is not for the open conversation or was seen already.
   */
  toGroupFrame(frame, connection) {
    const id = frame.conversationId;
    if (id !== this.current) return null;
    if (typeof frame.seq === 'number') {
      if (frame.seq <= (connection.lastSeq.get(id) ?? -1)) return null;
      connection.lastSeq.set(id, frame.seq);
    }
    if (frame.data?.type === 'result') this.touch(id);
    return { ...frame, type: 'yeaft_output', groupId: id };
  }

  /** The chat-mode frames that are not output: ready, deleted. */
  frame(frame) {
    // Its VP and model are the header's subtitle (chathead.js); the title keeps its own name.
    if (frame.type === 'session_ready' && frame.conversationId === this.current) {
      this.info = frame.modelInfo || null;
    }
    if (frame.type === 'conversation_deleted') {
      this.items = this.items.filter((c) => c.conversationId !== frame.conversationId);
      const wasOpen = frame.conversationId === this.current;
      if (wasOpen) this.current = null;
      this.render();
      if (wasOpen) this.onGone(frame.conversationId);
    }
  }

  /** The list's order and previews follow new replies. */
  touch() {
    clearTimeout(this.refreshTimer);
    this.refreshTimer = setTimeout(() => this.refresh(), 300);
  }

  async remove(id) {
    if (!window.confirm('Delete this conversation and its history?')) return;
    try {
      await conversationApi.remove(id);
    } catch (err) {
      this.toast(`Could not delete the conversation: ${err.message}`);
      return;
    }
    this.frame({ type: 'conversation_deleted', conversationId: id });
  }

  /** A conversation named in the address (`#c=<id>`), if it is one of the user's. */
  fromHash() {
    const match = window.location.hash.match(/^#c=([A-Za-z0-9_-]+)$/);
    return match && this.has(match[1]) ? match[1] : null;
  }
}
