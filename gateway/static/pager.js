// Earlier pages of the open group's history, and finding one message in it.
//
// A group opens on its latest page of messages. "Load earlier messages"
// reads the page before the oldest one shown and puts it above, keeping the
// message being read in place (timeline.js); a search hit that is older than
// what is shown loads earlier pages until it is there.

import { api } from './api.js';
import { toast } from './dom.js';

export const HISTORY_PAGE = 100;
const MAX_PAGES_TO_FIND = 20;
const byId = (id) => document.getElementById(id);

export class HistoryPager {
  /**
   * `groupId()` is the group open now; `timeline` and `taskCards` draw a
   * page; `box` (the page's #older by default) holds the `button` that loads
   * the page before.
   */
  constructor({ timeline, taskCards, groupId, box = byId('older'), button = byId('load-older') }) {
    Object.assign(this, { box, timeline, taskCards, groupId });
    this.oldestId = null;
    button.addEventListener('click', () => this.loadOlder());
  }

  /** Another group (or conversation) is opening: no earlier page to offer yet. */
  reset() {
    this.oldestId = null;
    this.box.hidden = true;
  }

  /** A page was drawn (`messages` oldest first): where the one before starts, and whether there is one. */
  loaded(page, messages) {
    this.oldestId = messages[0]?.id || this.oldestId;
    this.box.hidden = !(page?.hasMore ?? messages.length >= HISTORY_PAGE);
  }

  async loadOlder() {
    const groupId = this.groupId();
    if (!groupId || !this.oldestId) return;
    try {
      const page = await api.messages(groupId, { before: this.oldestId, limit: HISTORY_PAGE });
      if (groupId !== this.groupId()) return;
      const messages = page?.messages || [];
      this.timeline.renderHistory(messages, { prepend: true });
      this.taskCards.reanchor();
      this.loaded(page, messages);
    } catch (err) {
      toast(`Could not load earlier messages: ${err.message}`);
    }
  }

  /** Show one message of the open group (`groupId`), loading earlier pages until it is there. */
  async find(groupId, messageId) {
    for (let page = 0; page < MAX_PAGES_TO_FIND; page += 1) {
      if (groupId !== this.groupId()) return;
      if (this.timeline.focusMessage(messageId)) return;
      if (this.box.hidden || !this.oldestId) break;
      await this.loadOlder();
    }
    if (!this.timeline.focusMessage(messageId)) toast('That message is no longer in the group.', 'info');
  }
}
