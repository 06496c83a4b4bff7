// Search across the user's groups: a box in the sidebar, hits below it
// (group, author, snippet, time); a hit opens its group at that message, and
// a reply in a thread opens its thread's panel at the reply (`threadId`).
// The same list shows the messages that mention the user (`showMentions`).

import { api } from './api.js';
import { el, formatTime } from './dom.js';

const DEBOUNCE_MS = 250;

export class SearchBox {
  /**
   * `input` is the search field, `results` the list the hits go in;
   * `onOpen(groupId, messageId, threadId)` opens a hit (`threadId`: the thread it is a reply in); `label(author, role)` names an author;
   * `mentionsButton` shows the user's mentions in the list (a second click hides them).
   */
  constructor({ input, results, onOpen, label, mentionsButton }) {
    this.input = input;
    this.results = results;
    this.onOpen = onOpen;
    this.label = label;
    this.timer = null;
    this.token = 0;
    this.listing = null; // 'search' | 'mentions' while the list shows one
    mentionsButton?.addEventListener('click', () => {
      if (this.listing === 'mentions') this.clear();
      else this.showMentions();
    });
    input.addEventListener('input', () => {
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this.run(), DEBOUNCE_MS);
    });
    input.addEventListener('keydown', (event) => {
      if (event.key === 'Enter') {
        event.preventDefault();
        clearTimeout(this.timer);
        this.run();
      } else if (event.key === 'Escape') {
        this.clear();
      }
    });
  }

  clear() {
    this.input.value = '';
    this.token += 1;
    this.results.replaceChildren();
    this.results.hidden = true;
    this.listing = null;
  }

  async run() {
    const query = this.input.value.trim();
    if (!query) {
      this.clear();
      return;
    }
    await this.fill('search', () => api.search(query), {
      failed: 'Search failed',
      empty: { testid: 'search-empty', text: 'No messages match.' },
      nodes: (data) => (data?.hits || []).map((hit) => this.hitNode(hit)),
    });
  }

  /** The newest messages of the user's groups that mention them, in the hits list. */
  async showMentions() {
    this.input.value = '';
    await this.fill('mentions', () => api.mentions(), {
      failed: 'Mentions could not be read',
      empty: { testid: 'mentions-empty', text: 'Nobody has mentioned you yet.' },
      nodes: (data) =>
        (data?.mentions || []).map((m) => this.hitNode({ ...m, role: 'user', snippet: m.excerpt }, 'mention-hit')),
    });
  }

  /**
   * Fill the list with what `load()` answers, as `nodes(data)`; `empty` when
   * that is none, the `failed` words when it fails. An answer that a newer
   * listing overtook is dropped.
   */
  async fill(listing, load, { failed, empty, nodes }) {
    const token = ++this.token;
    this.listing = listing;
    let data;
    try {
      data = await load();
    } catch (err) {
      if (token !== this.token) return;
      this.show([el('li', { class: 'search-empty', text: `${failed}: ${err.message}` })]);
      return;
    }
    if (token !== this.token) return;
    const items = nodes(data);
    this.show(items.length ? items : [el('li', { class: 'search-empty', testid: empty.testid, text: empty.text })]);
  }

  show(items) {
    this.results.replaceChildren(...items);
    this.results.hidden = false;
  }

  hitNode(hit, testid = 'search-hit') {
    return el(
      'li',
      {},
      el(
        'button',
        {
          type: 'button',
          class: 'search-hit',
          testid,
          dataset: { groupId: hit.groupId, messageId: hit.messageId, threadId: hit.threadId || '' },
          onclick: () => this.onOpen(hit.groupId, hit.messageId, hit.threadId || null),
        },
        el(
          'span',
          { class: 'search-hit-head' },
          el('span', { class: 'search-hit-group', text: hit.groupName }),
          el('span', { class: 'search-hit-author', text: this.label(hit.author, hit.role) }),
          el('time', { class: 'search-hit-time', text: formatTime(hit.ts) }),
        ),
        el('span', { class: 'search-hit-snippet', text: hit.snippet }),
      ),
    );
  }
}
