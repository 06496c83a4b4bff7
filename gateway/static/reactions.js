// Reactions and pins on a group's messages, a person's or a VP's.
//
// Under each stored message: its reactions as chips (the emoji and how
// many; yours highlighted; a click turns yours on or off), an "add a
// reaction" button that opens a small picker (common emoji, or any emoji
// typed in), and Pin / Unpin. In the header: the group's pinned list, whose
// items jump to their message (loading earlier pages when it is older than
// what is shown).
//
// Changes go over HTTP (gateway/reactions.py). What anyone changed, this
// tab included, arrives as a `message_reactions` or `message_pins` frame
// from the group's event log, carrying the whole new state: what is shown is
// replaced with it, never patched, so tabs and people cannot drift apart.
// A page of history brings each message's `reactions` the same way.
//
// One Reactions serves every timeline that shows the group's messages: the
// main one, and a thread's side panel (`watch`, threadpanel.js), which shows
// reactions without Pin (the pinned list jumps to the main timeline).

import { request } from './api.js';
import { onEveryFrame } from './connection.js';
import { el } from './dom.js';
import { closesLikeAMenu, detailsMenu } from './menus.js';

const COMMON = ['👍', '❤️', '😂', '🎉', '🤔', '👀', '🚀', '✅'];
const enc = encodeURIComponent;

export class Reactions {
  /**
   * `timeline` shows the messages (this registers as its observer); `pager`
   * finds an older message; `groupId()` is the open group (null in a
   * one-to-one conversation, which has no reactions); `toast(text)` tells the user.
   */
  constructor({ timeline, pager, groupId, toast }) {
    Object.assign(this, { timeline, pager, groupId, toast });
    this.reactions = new Map(); // message id -> [{emoji, users}]
    // Message id -> how many states of its reactions were shown: the answer to
    // a change of ours is dropped when a frame came meanwhile (it may be newer).
    this.changes = new Map();
    this.views = []; // each timeline watched: {nodes: message id -> its node, pins}
    this.pinned = new Set();
    this.pinsOf = null; // the group the pinned list was read for
    this.picker = this.buildPicker();
    this.menu = this.buildPinsMenu();
    this.watch(timeline, { main: true, pins: true });
    onEveryFrame((frame) => this.frame(frame));
  }

  /**
   * Show reactions under the messages of one more `timeline` of the open
   * group (a thread's panel); `pins`: offer Pin there too. The `main`
   * timeline's reset is another group opening.
   */
  watch(timeline, { pins = false, main = false } = {}) {
    const view = { nodes: new Map(), pins };
    this.views.push(view);
    timeline.observe({
      reset: () => {
        view.nodes.clear();
        if (main) this.reset();
      },
      shown: (node, message) => this.shown(view, node, message),
    });
  }

  // -- the timelines' observer --------------------------------------------------
  reset() {
    this.reactions.clear();
    this.changes.clear();
    this.pinned.clear();
    this.closePicker();
    // Once the page has said what opens: a conversation is marked open just
    // after the timeline resets, and has no pinned list to read.
    queueMicrotask(() => this.loadPins());
  }

  shown(view, node, message) {
    if (!message.id || !this.groupId()) return;
    if (Array.isArray(message.reactions)) this.reactions.set(message.id, message.reactions);
    view.nodes.set(message.id, node);
    this.render(message.id);
  }

  // -- frames ---------------------------------------------------------------------
  frame(frame) {
    if (!frame.groupId || frame.groupId !== this.groupId()) return;
    if (frame.type === 'message_reactions') this.applyReactions(frame);
    else if (frame.type === 'message_pins') this.applyPins(frame, true);
  }

  applyReactions(frame) {
    this.changes.set(frame.messageId, (this.changes.get(frame.messageId) || 0) + 1);
    this.reactions.set(frame.messageId, frame.reactions || []);
    this.render(frame.messageId);
  }

  /** The pinned ids from a `message_pins` frame; `reread` fetches the list's texts. */
  applyPins(frame, reread) {
    const before = this.pinned;
    this.pinned = new Set((frame.pins || []).map((p) => p.messageId));
    for (const id of new Set([...before, ...this.pinned])) this.render(id);
    if (reread) this.loadPins();
  }

  // -- one message --------------------------------------------------------------
  render(messageId) {
    for (const view of this.views) {
      const node = view.nodes.get(messageId);
      if (node) this.renderInto(node, messageId, view.pins);
    }
  }

  renderInto(node, messageId, pins) {
    let bar = node.querySelector(':scope > .reactions-bar');
    if (!bar) {
      bar = el('div', { class: 'reactions-bar', testid: 'reactions' });
      node.append(bar);
    }
    const me = this.timeline.me;
    const chips = (this.reactions.get(messageId) || []).map(({ emoji, users }) => {
      const mine = users.includes(me);
      return el(
        'button',
        {
          type: 'button',
          class: 'reaction-chip',
          testid: 'reaction-chip',
          dataset: { emoji, mine: String(mine) },
          'aria-pressed': String(mine),
          title: `${users.join(', ')} reacted with ${emoji}`,
          onclick: () => this.react(messageId, emoji, null),
        },
        el('span', { class: 'reaction-emoji', text: emoji }),
        el('span', { class: 'reaction-count', testid: 'reaction-count', text: String(users.length) }),
      );
    });
    const pinned = this.pinned.has(messageId);
    node.dataset.pinned = String(pinned);
    const add = el('button', {
      type: 'button',
      class: 'msg-action reaction-add',
      testid: 'add-reaction',
      title: 'Add a reaction',
      'aria-label': 'Add a reaction',
      'aria-haspopup': 'dialog',
      text: '☺+',
      onclick: (event) => this.openPicker(messageId, event.currentTarget),
    });
    const pin = el('button', {
      type: 'button',
      class: 'msg-action',
      testid: 'pin-message',
      title: pinned ? 'Take it off the pinned list' : 'Pin it for everyone in the group',
      text: pinned ? 'Unpin' : 'Pin',
      onclick: () => this.setPinned(messageId, !pinned),
    });
    const mark = pinned ? el('span', { class: 'pinned-mark', testid: 'pinned-mark', text: '📌 pinned' }) : null;
    const tools = el('span', { class: 'reaction-tools' }, add, pins ? pin : '');
    bar.replaceChildren(...chips, tools, (pins && mark) || '');
    bar.dataset.empty = String(chips.length === 0 && !(pins && pinned));
  }

  /** Turn the user's `emoji` on (true), off (false) or over (null). */
  async react(messageId, emoji, on) {
    const groupId = this.groupId();
    if (!groupId) return;
    const body = on === null ? { emoji } : { emoji, on };
    const shown = this.changes.get(messageId) || 0;
    try {
      const state = await request(
        'POST',
        `/api/groups/${enc(groupId)}/messages/${enc(messageId)}/reactions`,
        body,
      );
      // A frame that came meanwhile is this change's, or a later one's: it stands.
      const since = (this.changes.get(messageId) || 0) !== shown;
      if (groupId === this.groupId() && !since) this.applyReactions(state);
    } catch (err) {
      this.toast(`Could not react: ${err.message}`);
    }
  }

  async setPinned(messageId, pinned) {
    const groupId = this.groupId();
    if (!groupId) return;
    try {
      const state = await request(pinned ? 'PUT' : 'DELETE', `/api/groups/${enc(groupId)}/pins/${enc(messageId)}`);
      if (groupId === this.groupId()) this.applyPins(state, true);
    } catch (err) {
      this.toast(`Could not ${pinned ? 'pin' : 'unpin'} the message: ${err.message}`);
    }
  }

  // -- the picker ---------------------------------------------------------------
  buildPicker() {
    const input = el('input', {
      type: 'text',
      class: 'picker-input',
      testid: 'picker-input',
      placeholder: 'any emoji',
      'aria-label': 'Any emoji',
      maxlength: '16',
    });
    const form = el(
      'form',
      {
        class: 'picker-form',
        onsubmit: (event) => {
          event.preventDefault();
          const emoji = input.value.trim();
          if (emoji) this.choose(emoji);
        },
      },
      input,
      el('button', { type: 'submit', class: 'quiet', testid: 'picker-add', text: 'Add' }),
    );
    const common = COMMON.map((emoji) =>
      el('button', {
        type: 'button',
        class: 'picker-emoji',
        testid: 'picker-emoji',
        dataset: { emoji },
        title: emoji,
        text: emoji,
        onclick: () => this.choose(emoji),
      }),
    );
    const picker = el(
      'div',
      { class: 'reaction-picker', testid: 'reaction-picker', role: 'dialog', 'aria-label': 'Add a reaction', hidden: true },
      el('div', { class: 'picker-common' }, ...common),
      form,
    );
    picker.input = input;
    document.body.append(picker);
    closesLikeAMenu(picker, { isOpen: () => !picker.hidden, close: () => this.closePicker() });
    return picker;
  }

  openPicker(messageId, button) {
    const box = button.getBoundingClientRect();
    this.pickingFor = messageId;
    this.picker.hidden = false;
    this.picker.input.value = '';
    const width = this.picker.offsetWidth;
    this.picker.style.left = `${Math.max(8, Math.min(box.left, window.innerWidth - width - 8))}px`;
    const below = box.bottom + 4 + this.picker.offsetHeight < window.innerHeight;
    this.picker.style.top = `${below ? box.bottom + 4 : Math.max(8, box.top - this.picker.offsetHeight - 4)}px`;
    this.picker.querySelector('.picker-emoji')?.focus();
  }

  closePicker() {
    // `pickingFor` stays: a click on Add closes the picker (menus.js) before its form submits.
    this.picker.hidden = true;
  }

  choose(emoji) {
    const messageId = this.pickingFor;
    this.closePicker();
    if (messageId) this.react(messageId, emoji, true);
  }

  // -- the pinned list ----------------------------------------------------------
  buildPinsMenu() {
    this.pinsCount = el('span', { class: 'pins-count', testid: 'pins-count', text: '0' });
    this.pinsList = el('div', { class: 'export-options pins-list', testid: 'pins-list' });
    const menu = el(
      'details',
      { class: 'export-menu pins-menu', testid: 'pins-menu', hidden: true },
      el('summary', { class: 'quiet', testid: 'pins-toggle', title: 'Pinned messages' }, '📌 ', this.pinsCount),
      this.pinsList,
    );
    const tools = document.getElementById('head-tools');
    tools?.insertBefore(menu, document.getElementById('members-button'));
    detailsMenu(menu);
    return menu;
  }

  async loadPins() {
    const groupId = this.groupId();
    this.pinsOf = groupId;
    if (this.menu.dataset.group !== groupId) this.showPins(null, []); // another group's list goes at once
    if (!groupId) return;
    let listed;
    try {
      listed = await request('GET', `/api/groups/${enc(groupId)}/pins`);
    } catch {
      listed = null; // a conversation, or a group just left: no pinned list
    }
    if (this.pinsOf !== groupId || groupId !== this.groupId()) return;
    this.applyPins(listed || { pins: [] }, false);
    this.showPins(listed ? groupId : null, listed?.pins || []);
  }

  showPins(groupId, pins) {
    this.menu.hidden = !groupId;
    this.menu.dataset.group = groupId || '';
    this.pinsCount.textContent = String(pins.length);
    const items = pins.map((pin) =>
      el(
        'button',
        {
          type: 'button',
          class: 'pin-item',
          testid: 'pinned-item',
          dataset: { pinnedId: pin.messageId },
          title: `Pinned by ${pin.by}`,
          onclick: () => this.pager.find(groupId, pin.messageId),
        },
        el('span', { class: 'pin-author', text: pin.author }),
        el('span', { class: 'pin-text', text: pin.text || '(no text)' }),
      ),
    );
    if (!items.length) items.push(el('span', { class: 'pins-empty', text: 'Nothing pinned yet' }));
    this.pinsList.replaceChildren(...items);
  }
}
