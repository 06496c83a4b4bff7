// The message input: Enter sends, Shift+Enter is a newline, and typing `@`
// opens a list of the group's VPs (plus @all) and its people (tagged
// "person", mentions.js) filtered by what follows.

import { avatar, el } from './dom.js';

// The server's limits until /api/limits says otherwise (protocol defaults).
const DEFAULT_LIMITS = { frameMaxBytes: 256 * 1024, maxTextLength: 100_000 };
// The counter shows from this share of a limit on.
const COUNTER_FROM = 0.8;
// Room the rest of a chat frame (type, ids, mentions) takes besides the text.
const FRAME_OVERHEAD = 512;

/** Bytes `text` takes inside a JSON frame, as UTF-8. */
export function frameBytes(text) {
  return new TextEncoder().encode(JSON.stringify(text)).length + FRAME_OVERHEAD;
}

// `@` at the start or after whitespace, then the id typed so far, ending at the caret.
const MENTION_AT_CARET = /(^|\s)@([A-Za-z0-9_-]*)$/;
const MENTION_ANYWHERE = /(^|\s)@([A-Za-z0-9_-]+)/g;

export class Composer {
  /**
   * `roster()` returns [{id, name, role, aliases}] of the current group;
   * `people()` the group's other members as options (`person: true`);
   * `onSend(text, mentions)` sends; returns false when it could not.
   */
  constructor({ form, input, button, menu, roster, people = () => [], onSend }) {
    this.people = people;
    this.form = form;
    this.input = input;
    this.button = button;
    this.menu = menu;
    this.roster = roster;
    this.onSend = onSend;
    this.options = [];
    this.active = 0;
    this.range = null;
    this.limits = { ...DEFAULT_LIMITS };
    // Shown near a limit, and the reason a message is refused before sending.
    this.counter = el('span', { class: 'composer-counter', testid: 'composer-counter', hidden: true });
    this.error = el('p', { class: 'composer-error', testid: 'composer-error', role: 'alert' });
    form.append(this.counter, this.error);

    form.addEventListener('submit', (event) => {
      event.preventDefault();
      this.send();
    });
    input.addEventListener('keydown', (event) => this.keydown(event));
    input.addEventListener('input', () => {
      this.autosize();
      this.refreshMenu();
      this.updateButton();
    });
    input.addEventListener('click', () => this.refreshMenu());
    input.addEventListener('blur', () => {
      // Let a click on an option land before the menu goes away; focus that
      // came back meanwhile (typing again) keeps it.
      setTimeout(() => {
        if (document.activeElement !== input) this.closeMenu();
      }, 150);
    });
    this.updateButton();
  }

  setEnabled(enabled) {
    this.input.disabled = !enabled;
    this.updateButton();
  }

  /** The server's limits ({frameMaxBytes, maxTextLength}). */
  setLimits(limits) {
    this.limits = { ...DEFAULT_LIMITS, ...(limits || {}) };
    this.updateButton();
  }

  /** Why `text` cannot be sent (a sentence), or '' when it can. */
  tooLong(text) {
    const chars = [...text].length;
    const { maxTextLength, frameMaxBytes } = this.limits;
    if (chars > maxTextLength) {
      return `Too long to send: ${chars.toLocaleString()} characters, the limit is ${maxTextLength.toLocaleString()}. Shorten it or split it in parts.`;
    }
    const bytes = frameBytes(text);
    if (bytes > frameMaxBytes) {
      return `Too long to send: ${Math.ceil(bytes / 1024).toLocaleString()} KiB, the limit is ${Math.floor(frameMaxBytes / 1024).toLocaleString()} KiB. Shorten it or split it in parts.`;
    }
    return '';
  }

  /** The counter near a limit, and the refusal over it. */
  updateCounter() {
    const text = this.input.value;
    const chars = [...text].length;
    const bytes = frameBytes(text);
    const { maxTextLength, frameMaxBytes } = this.limits;
    const share = Math.max(chars / maxTextLength, bytes / frameMaxBytes);
    const over = this.tooLong(text.trim());
    this.counter.hidden = share < COUNTER_FROM;
    this.counter.dataset.over = over ? 'true' : 'false';
    this.counter.textContent =
      bytes / frameMaxBytes > chars / maxTextLength
        ? `${Math.ceil(bytes / 1024).toLocaleString()} / ${Math.floor(frameMaxBytes / 1024).toLocaleString()} KiB`
        : `${chars.toLocaleString()} / ${maxTextLength.toLocaleString()}`;
    this.error.textContent = over;
    return over;
  }

  updateButton() {
    const over = this.updateCounter();
    this.button.disabled = this.input.disabled || !this.input.value.trim() || Boolean(over);
  }

  focus() {
    this.input.focus();
  }

  autosize() {
    this.input.style.height = 'auto';
    this.input.style.height = `${Math.min(this.input.scrollHeight, 220)}px`;
  }

  keydown(event) {
    // An IME composing Chinese or Japanese uses Enter to confirm a word.
    if (event.isComposing || event.keyCode === 229) return;
    if (this.menuOpen) {
      if (event.key === 'ArrowDown' || event.key === 'ArrowUp') {
        event.preventDefault();
        const step = event.key === 'ArrowDown' ? 1 : -1;
        this.highlight((this.active + step + this.options.length) % this.options.length);
        return;
      }
      if (event.key === 'Enter' || event.key === 'Tab') {
        event.preventDefault();
        this.pick(this.options[this.active]);
        return;
      }
      if (event.key === 'Escape') {
        event.preventDefault();
        this.closeMenu();
        return;
      }
    }
    if (event.key === 'Enter' && !event.shiftKey) {
      event.preventDefault();
      this.send();
    }
  }

  send() {
    const text = this.input.value.trim();
    if (!text || this.input.disabled) return;
    // Refused here, before it is queued: a frame the server would refuse
    // must never sit in the outbox, "sending…" and resent on every reload.
    const over = this.tooLong(text);
    if (over) {
      this.error.textContent = over;
      return;
    }
    if (this.onSend(text, this.mentionsIn(text)) === false) return;
    this.input.value = '';
    this.autosize();
    this.closeMenu();
    this.updateButton();
  }

  /** The roster ids (and `all`) the text mentions, resolved through aliases. */
  mentionsIn(text) {
    const roster = this.roster();
    const ids = [];
    for (const match of text.matchAll(MENTION_ANYWHERE)) {
      const name = match[2].toLowerCase();
      const vp = roster.find(
        (p) => p.id.toLowerCase() === name || (p.aliases || []).some((a) => a.toLowerCase() === name),
      );
      const id = vp ? vp.id : name === 'all' ? 'all' : null;
      if (id && !ids.includes(id)) ids.push(id);
    }
    return ids;
  }

  /** Insert `@id ` at the caret (used by the presence chips too). */
  insertMention(id) {
    const { value, selectionStart } = this.input;
    const before = value.slice(0, selectionStart);
    const spacer = before && !/\s$/.test(before) ? ' ' : '';
    this.input.setRangeText(`${spacer}@${id} `, selectionStart, this.input.selectionEnd, 'end');
    this.input.focus();
    this.updateButton();
  }

  // -- the mention menu ------------------------------------------------------
  get menuOpen() {
    return !this.menu.hidden && this.options.length > 0;
  }

  refreshMenu() {
    const caret = this.input.selectionStart;
    if (caret !== this.input.selectionEnd) return this.closeMenu();
    const match = this.input.value.slice(0, caret).match(MENTION_AT_CARET);
    if (!match) return this.closeMenu();
    const prefix = match[2].toLowerCase();
    this.range = { start: caret - match[2].length - 1, end: caret };
    const everyone = { id: 'all', name: 'Everyone', role: 'every VP in this group', aliases: [] };
    const matches = (p) =>
      p.id.toLowerCase().startsWith(prefix) ||
      p.name.toLowerCase().startsWith(prefix) ||
      (p.aliases || []).some((a) => a.toLowerCase().startsWith(prefix));
    const byName = [...this.roster()].sort((a, b) => a.name.localeCompare(b.name));
    this.options = [...byName, everyone, ...this.people()].filter(matches);
    if (!this.options.length) return this.closeMenu();
    this.renderMenu();
    return undefined;
  }

  renderMenu() {
    this.menu.replaceChildren(
      ...this.options.map((option, index) =>
        el(
          'li',
          {
            role: 'option',
            id: `mention-${option.id}`,
            class: `mention-option${option.person ? ' person' : ''}`,
            testid: 'mention-option',
            dataset: option.person ? { person: option.id } : { vp: option.id },
            'aria-selected': String(index === this.active),
            onmousedown: (event) => {
              event.preventDefault();
              this.pick(option);
            },
          },
          avatar(option.id, option.name, 'small'),
          el('span', { class: 'mention-id', text: `@${option.id}` }),
          option.person
            ? el('span', { class: 'mention-tag', testid: 'mention-person-tag', text: 'person' })
            : el('span', { class: 'mention-role', text: option.id === 'all' ? option.role : `${option.name} · ${option.role || ''}` }),
        ),
      ),
    );
    this.menu.hidden = false;
    this.input.setAttribute('aria-expanded', 'true');
    this.highlight(Math.min(this.active, this.options.length - 1));
  }

  highlight(index) {
    this.active = index;
    [...this.menu.children].forEach((node, i) => {
      node.setAttribute('aria-selected', String(i === index));
      if (i === index) {
        this.input.setAttribute('aria-activedescendant', node.id);
        node.scrollIntoView({ block: 'nearest' });
      }
    });
  }

  pick(option) {
    if (!option || !this.range) return;
    this.input.setRangeText(`@${option.id} `, this.range.start, this.range.end, 'end');
    this.closeMenu();
    this.input.focus();
    this.updateButton();
  }

  closeMenu() {
    this.menu.hidden = true;
    this.options = [];
    this.active = 0;
    this.range = null;
    this.input.setAttribute('aria-expanded', 'false');
    this.input.removeAttribute('aria-activedescendant');
  }
}
