// The Files menu of the chat header: the files of the open group's (or
// conversation's) workspace, each a download link. The list is read from
// GET /api/groups/{id}/files (or /api/conversations/{id}/files) every time
// the menu opens, so a file a VP just wrote is there without a reload. It
// closes like a menu (menus.js): on Escape, a press outside, a file chosen.

import { clear, el } from './dom.js';
import { detailsMenu } from './menus.js';

const enc = encodeURIComponent;

function base(target) {
  const kind = target.conversation ? 'conversations' : 'groups';
  return `/api/${kind}/${enc(target.id)}/files`;
}

function fileUrl(target, path) {
  return `${base(target)}/${path.split('/').map(enc).join('/')}`;
}

function sizeText(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

export class FilesMenu {
  /** `menu` is the <details> element, `list` the element the links go in. */
  constructor(menu, list) {
    this.menu = menu;
    this.list = list;
    this.target = null;
    menu.addEventListener('toggle', () => {
      if (menu.open) this.load();
    });
    detailsMenu(menu);
  }

  /** The group or conversation on screen (`{id, conversation}`), or null. */
  update(target) {
    // The chrome is re-rendered often (unread counts, presence): the same
    // group keeps its menu as it is, open or not, and a list being loaded.
    const same = this.target && target && this.target.id === target.id;
    this.menu.hidden = !target;
    if (same) return;
    this.target = target;
    this.menu.open = false;
  }

  async load() {
    const target = this.target;
    if (!target) return;
    this.show(el('span', { class: 'files-note', text: 'Loading…' }));
    let data;
    try {
      const response = await fetch(base(target), {
        credentials: 'same-origin',
        headers: { Accept: 'application/json' },
      });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      data = await response.json();
    } catch (err) {
      this.show(el('span', { class: 'files-note', text: `The files could not be listed (${err.message}).` }));
      return;
    }
    if (this.target !== target) return;
    const files = Array.isArray(data.files) ? data.files : [];
    if (!files.length) {
      this.show(el('span', { class: 'files-note', testid: 'files-empty', text: 'No files yet. Files the VPs write appear here.' }));
      return;
    }
    const links = files.map((file) =>
      el(
        'a',
        { href: fileUrl(target, file.path), download: file.path.split('/').pop(), testid: 'file-link', dataset: { path: file.path } },
        el('span', { class: 'file-path', text: file.path }),
        el('span', { class: 'file-size', text: sizeText(file.size) }),
      ),
    );
    if (data.truncated) links.push(el('span', { class: 'files-note', text: 'Only the first files are listed.' }));
    this.show(...links);
  }

  show(...nodes) {
    clear(this.list);
    this.list.append(...nodes);
  }
}
