// Files with messages: paste, drag and drop or the Attach button put files
// in a tray above the input; each is uploaded at once (POST
// /api/groups/{id}/attachments) and the message names them by id when it is
// sent. Messages show their files: images as thumbnails, everything as a
// download link.

import { ApiError } from './api.js';
import { el } from './dom.js';

const enc = encodeURIComponent;
const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);

/** Upload one file to a group (or conversation); resolves to {id, name, mime, size, url}. */
export async function uploadFile(groupId, file) {
  const response = await fetch(`/api/groups/${enc(groupId)}/attachments?name=${enc(file.name || 'file')}`, {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'Content-Type': file.type || 'application/octet-stream', Accept: 'application/json' },
    body: file,
  });
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    const error = (data && data.error) || {};
    throw new ApiError(response.status, error.code || `http_${response.status}`, error.message || 'upload failed');
  }
  return data;
}

function sizeLabel(size) {
  if (typeof size !== 'number') return '';
  if (size < 1024) return `${size} B`;
  if (size < 1024 * 1024) return `${(size / 1024).toFixed(1)} KiB`;
  return `${(size / 1024 / 1024).toFixed(1)} MiB`;
}

/** A message's files under its text: thumbnails for images, a download link for each. */
export function attachmentsNode(attachments) {
  if (!attachments || !attachments.length) return null;
  const list = el('div', { class: 'msg-attachments', testid: 'message-attachments' });
  for (const file of attachments) {
    const link = el('a', {
      class: 'msg-attachment',
      testid: 'message-attachment',
      href: file.url || file.previewUrl || '#',
      download: file.name,
      title: `${file.name} (${sizeLabel(file.size)})`,
    });
    if (IMAGE_TYPES.has(file.mime) && (file.previewUrl || file.url)) {
      link.append(el('img', { class: 'attachment-thumb', testid: 'attachment-thumb', src: file.previewUrl || file.url, alt: file.name }));
    }
    link.append(el('span', { class: 'attachment-name', text: file.name }));
    list.append(link);
  }
  return list;
}

export class AttachmentTray {
  /**
   * `form` is the composer's form, `input` its textarea; `groupId()` names
   * where files go; `onError(message)` reports a refused file.
   */
  constructor({ form, input, groupId, onError }) {
    this.groupId = groupId;
    this.onError = onError;
    this.items = [];
    this.tray = el('div', { class: 'attachment-tray', testid: 'attachment-tray', hidden: true });
    this.picker = el('input', { type: 'file', multiple: true, hidden: true, testid: 'attach-input' });
    this.button = el('button', {
      type: 'button',
      class: 'attach-button',
      testid: 'attach-button',
      title: 'Attach files (or paste, or drop them here)',
      text: '📎',
      onclick: () => this.picker.click(),
    });
    form.prepend(this.tray);
    input.before(this.button, this.picker);
    this.picker.addEventListener('change', () => {
      this.add([...this.picker.files]);
      this.picker.value = '';
    });
    input.addEventListener('paste', (event) => {
      const files = [...(event.clipboardData?.files || [])];
      if (!files.length) return;
      event.preventDefault();
      this.add(files);
    });
    form.addEventListener('dragover', (event) => {
      if ([...(event.dataTransfer?.types || [])].includes('Files')) {
        event.preventDefault();
        form.dataset.dropping = 'true';
      }
    });
    form.addEventListener('dragleave', () => delete form.dataset.dropping);
    form.addEventListener('drop', (event) => {
      delete form.dataset.dropping;
      const files = [...(event.dataTransfer?.files || [])];
      if (!files.length) return;
      event.preventDefault();
      this.add(files);
    });
  }

  add(files) {
    const groupId = this.groupId();
    if (!groupId) return;
    for (const file of files) {
      const item = {
        name: file.name || 'pasted',
        mime: file.type || 'application/octet-stream',
        size: file.size,
        previewUrl: IMAGE_TYPES.has(file.type) ? URL.createObjectURL(file) : null,
        state: 'uploading',
      };
      item.node = this.chip(item);
      this.items.push(item);
      this.tray.append(item.node);
      uploadFile(groupId, file).then(
        (stored) => {
          Object.assign(item, { id: stored.id, url: stored.url, state: 'ready' });
          item.node.dataset.state = 'ready';
        },
        (err) => {
          this.remove(item);
          this.onError(`${item.name}: ${err.message}`);
        },
      );
    }
    this.tray.hidden = !this.items.length;
  }

  chip(item) {
    return el(
      'div',
      { class: 'attachment-chip', testid: 'attachment-chip', dataset: { state: item.state } },
      item.previewUrl ? el('img', { class: 'attachment-thumb', testid: 'attachment-thumb', src: item.previewUrl, alt: item.name }) : null,
      el('span', { class: 'attachment-name', text: `${item.name} · ${sizeLabel(item.size)}` }),
      el('button', { type: 'button', class: 'attachment-remove', text: '×', title: 'Remove', onclick: () => this.remove(item) }),
    );
  }

  remove(item) {
    this.items = this.items.filter((other) => other !== item);
    item.node.remove();
    this.tray.hidden = !this.items.length;
  }

  /** Whether every file has finished uploading (a message waits for its files). */
  busy() {
    return this.items.some((item) => item.state !== 'ready');
  }

  /** The tray's files for a message being sent (the tray is emptied). */
  take() {
    const taken = this.items.map(({ id, name, mime, size, url, previewUrl }) => ({ id, name, mime, size, url, previewUrl }));
    for (const item of this.items) item.node.remove();
    this.items = [];
    this.tray.hidden = true;
    return taken;
  }
}
