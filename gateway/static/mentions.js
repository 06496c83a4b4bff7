// People's @mentions: who can be mentioned, how a mention looks, and the
// browser notification when someone mentions you.
//
// `@bob` in a message mentions the member Bob of the group (the server
// resolves it; a VP of the same name wins). The composer's @-list offers the
// group's other members beside its VPs, tagged "person" (`peopleOf`). In the
// timeline, the mentions of people are highlighted, yours more strongly.
// When the server pushes an `inbox_summary` that carries a `mention` of you
// while this page is in the background, and you allowed it, the browser
// shows a notification; clicking it opens the group. Permission is asked
// only from a click on the "Notify me" button in the sidebar.

import { el } from './dom.js';

const MENTION = /(^|\s)@([A-Za-z0-9_][A-Za-z0-9_-]*)/g;

/** The composer's @-options for a group's people: every member but `me`. */
export function peopleOf(group, me) {
  return (group?.members || [])
    .filter((name) => name !== me)
    .map((name) => ({ id: name, name, role: 'person', aliases: [], person: true }));
}

/** Wrap each `@name` of `people` in the text nodes under `node` (once). */
export function highlightPeople(node, people, me) {
  if (!node || !people?.length) return;
  const wanted = new Map(people.map((p) => [p.toLowerCase(), p]));
  const walker = document.createTreeWalker(node, NodeFilter.SHOW_TEXT, {
    acceptNode: (text) =>
      text.parentElement?.closest('code, pre, .mention-person') ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT,
  });
  const texts = [];
  while (walker.nextNode()) texts.push(walker.currentNode);
  for (const text of texts) {
    const value = text.nodeValue;
    const parts = [];
    let last = 0;
    for (const match of value.matchAll(MENTION)) {
      const person = wanted.get(match[2].toLowerCase());
      if (!person) continue;
      const start = match.index + match[1].length;
      parts.push(value.slice(last, start));
      parts.push(
        el('span', {
          class: `mention-person${person === me ? ' mention-me' : ''}`,
          testid: person === me ? 'mention-me' : 'mention-person',
          title: person === me ? 'mentions you' : `mentions ${person}`,
          text: `@${match[2]}`,
        }),
      );
      last = start + match[2].length + 1;
    }
    if (!parts.length) continue;
    parts.push(value.slice(last));
    text.replaceWith(...parts.filter((p) => p !== ''));
  }
}

export class Mentions {
  /**
   * `timeline` shows the messages (this registers as its observer); `me()` is
   * the user; `groupName(id)` names a group; `open(id, messageId)` opens a
   * group at a message; `button` asks for permission to notify.
   */
  constructor({ timeline, me, groupName, open, button }) {
    Object.assign(this, { me, groupName, open, button });
    timeline.observe(this);
    if (button) {
      button.addEventListener('click', () => this.askPermission());
      this.showButton();
    }
  }

  // -- the timeline's observer ---------------------------------------------------
  shown(node, message) {
    const body = node.querySelector?.('[data-testid="user-text"]');
    highlightPeople(body, message.people, this.me());
  }

  // -- notifications ------------------------------------------------------------------
  get supported() {
    return typeof window.Notification === 'function';
  }

  showButton() {
    if (!this.button) return;
    this.button.hidden = !this.supported || window.Notification.permission !== 'default';
  }

  /** From the button's click only: browsers ask only in answer to a gesture. */
  async askPermission() {
    if (!this.supported) return;
    try {
      await window.Notification.requestPermission();
    } finally {
      this.showButton();
    }
  }

  /** A pushed `inbox_summary`: a mention of you while the page is in the background notifies. */
  summary(frame) {
    const mention = frame.mention;
    if (!mention || mention.author === this.me()) return;
    const background = document.visibilityState !== 'visible' || !document.hasFocus();
    if (!background || !this.supported || window.Notification.permission !== 'granted') return;
    const note = new window.Notification(`@${mention.author} mentioned you in ${this.groupName(frame.groupId)}`, {
      body: mention.excerpt,
      tag: `mention-${mention.messageId}`,
    });
    note.onclick = () => {
      window.focus();
      this.open(frame.groupId, mention.messageId);
      note.close();
    };
  }
}
