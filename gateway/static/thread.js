// Where a reply goes: the timeline as threads of what answers what.
//
// Every message the timeline shows is remembered by its id (a person's
// message, a hand-off, a VP's stored reply) with the chain it belongs to
// (the id of the person's message that started it). A VP's turn names the
// message it answers (`triggerId` on its statuses, the last `causedBy` of a
// stored reply), and sits in the thread row of that message: a line that
// says what it answers (or, under a VP's reply that named other VPs, who
// handed to whom), then the replies side by side, so VPs answering the same
// message at the same time are read at the same time.
//
// A row goes right after its trigger (for a reply, after the row that holds
// the reply), then after the rows of the same chain already there, so rows
// answering the same message keep the order they came in. Both the live
// stream and a reloaded history place rows by this one rule, which is what
// makes a reload look like what was seen live.

import { el, truncate } from './dom.js';

const MAX_DEPTH = 4;

export class Threads {
  constructor() {
    this.reset();
  }

  reset() {
    // id -> {node, chain, kind: 'person'|'handoff'|'reply', author, text, depth}
    this.messages = new Map();
    // trigger id -> its thread row
    this.rows = new Map();
  }

  has(id) {
    return Boolean(id) && this.messages.has(id);
  }

  /** Remember a message shown in the timeline (its node carries its id). */
  remember(id, info) {
    if (!id) return;
    info.node.dataset.messageId = id;
    if (info.chain) info.node.dataset.chain = info.chain;
    this.messages.set(id, { depth: 0, ...info });
  }

  /** A stored reply is now known by id: later turns that answer it thread under it. */
  rememberReply(id, bubble) {
    const row = bubble.root.closest('.thread');
    this.remember(id, {
      node: bubble.root,
      kind: 'reply',
      author: bubble.vpId,
      chain: row?.dataset.chain || '',
      depth: Number(row?.dataset.depth || 1),
    });
  }

  /**
   * The thread row of replies to `triggerId`, made and placed if there is
   * none. With no trigger, or one not shown (older than the history page),
   * the row goes at the end of `container`.
   */
  rowFor(triggerId, container) {
    const known = triggerId ? this.rows.get(triggerId) : null;
    if (known) return known;
    const trigger = triggerId ? this.messages.get(triggerId) : null;
    const row = this.rowNode(triggerId, trigger);
    if (triggerId) this.rows.set(triggerId, row);
    if (!trigger) {
      container.append(row);
      return row;
    }
    // A reply sits in a row: the rows answering it go after that row.
    let anchor = trigger.node;
    if (trigger.kind === 'reply') anchor = anchor.closest('.thread') || anchor;
    const sameChain = (node) =>
      node?.classList.contains('thread') && node.dataset.chain === row.dataset.chain;
    // A task's card stays right under the message that started it (tasks.js).
    const cardOf = (node) => node?.classList.contains('task-card') && node.dataset.anchor === triggerId;
    while (sameChain(anchor.nextElementSibling) || cardOf(anchor.nextElementSibling)) {
      anchor = anchor.nextElementSibling;
    }
    anchor.after(row);
    return row;
  }

  /** Where a row's bubbles go: its grid of replies. */
  static repliesOf(row) {
    return row.querySelector(':scope > .replies');
  }

  rowNode(triggerId, trigger) {
    const depth = Math.min(MAX_DEPTH, (trigger?.depth ?? 0) + 1);
    const row = el('div', {
      class: 'thread',
      testid: 'thread',
      dataset: { trigger: triggerId || '', chain: trigger?.chain || '', depth: String(depth) },
    });
    row.style.setProperty('--depth', String(depth));
    if (trigger?.kind === 'reply') {
      // A VP's reply that named other VPs handed the work on: say who to whom.
      row.append(
        el(
          'div',
          {
            class: 'handoff mention',
            testid: 'handoff',
            dataset: { from: trigger.author, to: '', via: 'mention' },
          },
          el('span', { class: 'handoff-route', text: `@${trigger.author} →` }),
        ),
      );
    } else {
      const what = trigger ? `${trigger.author}: ${truncate(trigger.text, 60)}` : 'an earlier message';
      row.append(el('div', { class: 'reply-to', testid: 'reply-to', text: `↳ ${what}` }));
    }
    row.append(el('div', { class: 'replies', testid: 'replies' }));
    return row;
  }

  /** A VP joined a row: name it in the row's hand-off line, if it has one. */
  joined(row, vpId) {
    const line = row.querySelector(':scope > .handoff.mention');
    if (!line) return;
    const to = line.dataset.to ? line.dataset.to.split(' ') : [];
    if (to.includes(vpId)) return;
    to.push(vpId);
    line.dataset.to = to.join(' ');
    const names = to.map((v) => `@${v}`).join(', ');
    line.querySelector('.handoff-route').textContent = `@${line.dataset.from} → ${names}`;
  }
}
