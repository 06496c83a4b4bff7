// Versions of messages: a person edits their own message (and resends it),
// and a VP's reply answered again (regenerated or resent) keeps its versions
// side by side behind a ‹1/2› switcher.
//
// A person's message: "Edit" opens the text in place, with Save, "Save and
// resend" (the VPs that answered it answer the new text) and Cancel. An
// edited message says "edited"; a click on that opens its own ‹1/2›
// switcher over its texts, for this reader only (the group reads the newest).
//
// A reply with versions shows one of them, the one the group chose (the
// newest until someone picks another); its switcher picks another for the
// whole group (the server's `reply_versions` frame tells every tab). A new
// version joins its reply as soon as its turn starts streaming: the old
// reply's `message_changed superseded` frame names the new turn.
//
// Changes go over HTTP (gateway/edits.py); what anyone changed arrives as a
// frame from the group's event log: `message_edited`, `message_changed`,
// `reply_versions`.

import { request } from './api.js';
import { onEveryFrame } from './connection.js';
import { el } from './dom.js';
import { copyButton, renderMarkdown } from './markdown.js';

const enc = encodeURIComponent;

export class Versions {
  /**
   * `timeline` shows the messages (this registers as its observer);
   * `groupId()` is the open group (null in a conversation); `toast(text)`
   * tells the user.
   */
  constructor({ timeline, groupId, toast }) {
    Object.assign(this, { timeline, groupId, toast });
    this.reset();
    timeline.observe(this);
    onEveryFrame((frame) => this.frame(frame));
  }

  // -- the timeline's observer --------------------------------------------------
  reset() {
    this.texts = new Map(); // a person's message id -> its texts, oldest first
    this.viewing = new Map(); // message id -> the index of the text shown (this reader's)
    this.rootOf = new Map(); // reply version id -> its reply's first version
    this.families = new Map(); // root id -> {members: [key], chosen: id|null}
    this.nodes = new Map(); // key (message id, or "turn:<id>" while streaming) -> node
    this.pendingTurns = new Map(); // turn id -> root id of the reply it answers again
  }

  shown(node, message) {
    if (!message.id || !this.groupId()) return;
    if (node.classList.contains('user-msg')) {
      this.shownPerson(node, message);
      return;
    }
    const meta = message.meta || {};
    const turnKey = node.dataset.turn ? `turn:${node.dataset.turn}` : null;
    this.nodes.set(message.id, node);
    const rootPending = [...this.pendingTurns].find(([turn]) => `turn:${turn}` === turnKey);
    if (rootPending) {
      // A new version that streamed in is stored: its key becomes its id.
      const [turn, root] = rootPending;
      this.pendingTurns.delete(turn);
      this.nodes.delete(turnKey);
      this.join(root, message.id, turnKey);
    } else if (meta.regenerates) {
      this.join(this.rootOf.get(meta.regenerates) || meta.regenerates, message.id);
    } else if (meta.supersededBy || this.families.has(message.id)) {
      this.join(message.id, message.id);
    }
    if (this.families.has(message.id) && meta.chosenVersion) {
      this.families.get(message.id).chosen = meta.chosenVersion;
    }
    const root = this.rootOf.get(message.id);
    if (root) this.render(root);
  }

  shownPerson(node, message) {
    const meta = message.meta || {};
    this.nodes.set(message.id, node);
    if (Array.isArray(meta.versions)) {
      this.texts.set(message.id, [...meta.versions.map((v) => v.text), message.text]);
    } else if (typeof message.text === 'string' && !this.texts.has(message.id)) {
      this.texts.set(message.id, [message.text]);
    }
    this.decoratePerson(node, message.id);
  }

  // -- frames -------------------------------------------------------------------
  frame(frame) {
    if (!frame.groupId || frame.groupId !== this.groupId()) return;
    if (frame.type === 'message_edited' && frame.seq !== undefined) this.edited(frame);
    else if (frame.type === 'reply_versions') this.chosen(frame.rootId, frame.chosen);
    else if (frame.type === 'message_changed' && frame.change === 'superseded' && frame.turnId) {
      const root = this.rootOf.get(frame.messageId) || frame.messageId;
      this.join(root, frame.messageId);
      this.pendingTurns.set(frame.turnId, root);
      this.families.get(root).chosen = null; // the new answer is the one shown
      this.render(root);
    } else if (frame.turnId && this.pendingTurns.has(frame.turnId)) {
      // The new version's bubble is made by the timeline for this very frame.
      queueMicrotask(() => this.streaming(frame.turnId));
    }
  }

  streaming(turnId) {
    const bubble = this.timeline.turns.get(turnId);
    const root = this.pendingTurns.get(turnId);
    if (!bubble || !root) return;
    const key = `turn:${turnId}`;
    if (this.nodes.get(key) === bubble.root) return;
    this.nodes.set(key, bubble.root);
    this.join(root, key);
    this.render(root);
  }

  edited(frame) {
    const texts = this.texts.get(frame.messageId);
    if (texts && texts.length === frame.version - 1) texts.push(frame.text);
    else this.texts.delete(frame.messageId); // read whole when asked for
    this.viewing.delete(frame.messageId);
    const node = this.nodes.get(frame.messageId) || this.personNode(frame.messageId);
    if (!node) return;
    this.nodes.set(frame.messageId, node);
    node.dataset.edited = String(frame.version);
    this.showText(node, frame.text);
    // Copy copies what the message says now.
    node.querySelector('.msg-actions [data-testid="copy-message"]')?.replaceWith(
      copyButton(() => frame.text, { className: 'msg-action', testid: 'copy-message' }),
    );
    this.decoratePerson(node, frame.messageId);
  }

  chosen(root, chosen) {
    const family = this.families.get(root);
    if (!family) return;
    family.chosen = chosen;
    this.render(root);
  }

  // -- a reply's versions ---------------------------------------------------------
  /** Add `key` to the versions of reply `root` (`replacing` is the key it had while streaming). */
  join(root, key, replacing = null) {
    let family = this.families.get(root);
    if (!family) {
      family = { members: [], chosen: null };
      this.families.set(root, family);
    }
    const at = replacing ? family.members.indexOf(replacing) : -1;
    if (at >= 0) family.members[at] = key;
    else if (!family.members.includes(key)) family.members.push(key);
    if (replacing && family.chosen === replacing) family.chosen = key;
    this.rootOf.set(key, root);
    if (!this.rootOf.has(root)) this.rootOf.set(root, root);
  }

  render(root) {
    const family = this.families.get(root);
    if (!family) return;
    const members = family.members.filter((key) => this.nodes.has(key));
    if (members.length < 2) {
      for (const key of members) this.nodes.get(key).hidden = false;
      return;
    }
    const shown = members.includes(family.chosen) ? family.chosen : members[members.length - 1];
    this.timeline.mutate(() => {
      members.forEach((key, index) => {
        const node = this.nodes.get(key);
        node.hidden = key !== shown;
        node.classList.toggle('version-shown', key === shown);
        node.querySelector(':scope [data-testid="reply-versions"]')?.remove();
        if (key === shown) this.switcherInto(node, root, members, index);
      });
    });
  }

  switcherInto(node, root, members, index) {
    const pick = (step) => {
      const key = members[index + step];
      if (!key) return;
      this.chosen(root, key); // at once here; the frame tells the others
      if (key.startsWith('turn:')) return; // still streaming: nothing stored to pick yet
      request('PUT', `/api/groups/${enc(this.groupId())}/messages/${enc(key)}/versions/chosen`).catch(
        (err) => this.toast(`Could not show that version: ${err.message}`),
      );
    };
    const switcher = versionSwitcher('reply-versions', index, members.length, pick);
    const head = node.querySelector('.bubble-head') || node;
    head.append(switcher);
  }

  // -- a person's message -----------------------------------------------------------
  personNode(messageId) {
    return this.timeline.list.querySelector(`.user-msg[data-message-id="${CSS.escape(messageId)}"]`);
  }

  decoratePerson(node, messageId) {
    const meta = node.querySelector('.user-meta');
    const actions = node.querySelector('.msg-actions');
    const texts = this.texts.get(messageId);
    const edited = Number(node.dataset.edited || (texts ? texts.length : 0)) > 1;
    if (edited && meta && !meta.querySelector('[data-testid="edited-label"]')) {
      meta.append(
        el('button', {
          type: 'button',
          class: 'edited-label',
          testid: 'edited-label',
          title: 'Show the earlier versions',
          text: 'edited',
          onclick: () => this.browse(node, messageId),
        }),
      );
    }
    if (node.classList.contains('mine') && actions && !actions.querySelector('[data-testid="edit-message"]')) {
      actions.prepend(
        el('button', {
          type: 'button',
          class: 'msg-action',
          testid: 'edit-message',
          text: 'Edit',
          onclick: () => this.openEditor(node),
        }),
      );
    }
  }

  /** This reader's switcher over a person's texts (the group keeps reading the newest). */
  async browse(node, messageId) {
    let texts = this.texts.get(messageId);
    if (!texts) {
      try {
        const found = await request('GET', `/api/groups/${enc(this.groupId())}/messages/${enc(messageId)}/versions`);
        texts = found.versions.map((v) => v.text);
        this.texts.set(messageId, texts);
      } catch (err) {
        this.toast(`Could not read the versions: ${err.message}`);
        return;
      }
    }
    const show = (index) => {
      this.viewing.set(messageId, index);
      this.showText(node, texts[index]);
      node.dataset.viewing = String(index + 1);
      node.querySelector('[data-testid="message-versions"]')?.remove();
      const pick = (step) => {
        const next = index + step;
        if (next >= 0 && next < texts.length) show(next);
      };
      node.querySelector('.user-meta')?.append(versionSwitcher('message-versions', index, texts.length, pick));
    };
    show(this.viewing.get(messageId) ?? texts.length - 1);
  }

  showText(node, text) {
    const body = node.querySelector('.user-text');
    if (body) renderMarkdown(body, text);
  }

  openEditor(node) {
    const messageId = node.dataset.messageId;
    if (!messageId || node.querySelector('[data-testid="edit-form"]')) return;
    const body = node.querySelector('.user-text');
    const texts = this.texts.get(messageId);
    const input = el('textarea', { class: 'edit-input', testid: 'edit-input', rows: 3 });
    input.value = texts ? texts[texts.length - 1] : body?.textContent || '';
    const close = () => {
      form.remove();
      if (body) body.hidden = false;
    };
    const save = async (resend) => {
      const text = input.value;
      if (!text.trim()) {
        this.toast('A message needs some text.');
        return;
      }
      for (const b of form.querySelectorAll('button')) b.disabled = true;
      try {
        const path = `/api/groups/${enc(this.groupId())}/messages/${enc(messageId)}`;
        const answer = await request('PATCH', path, { text, resend });
        close();
        const skipped = answer.resent?.skipped || [];
        if (skipped.length) {
          this.toast(`Not answered again: ${skipped.map((s) => `@${s.vpId} (${s.reason.replace(/_/g, ' ')})`).join(', ')}`, 'info');
        }
      } catch (err) {
        for (const b of form.querySelectorAll('button')) b.disabled = false;
        this.toast(`Could not edit: ${err.message}`);
      }
    };
    const button = (testid, text, onclick, cls = 'msg-action') =>
      el('button', { type: 'button', class: cls, testid, text, onclick });
    const form = el(
      'div',
      { class: 'edit-form', testid: 'edit-form' },
      input,
      el(
        'div',
        { class: 'edit-buttons' },
        button('edit-save', 'Save', () => save(false)),
        button('edit-resend', 'Save and resend', () => save(true), 'msg-action primary'),
        button('edit-cancel', 'Cancel', close),
      ),
    );
    input.addEventListener('keydown', (event) => {
      if (event.key === 'Escape') close();
      else if (event.key === 'Enter' && (event.metaKey || event.ctrlKey)) save(false);
    });
    if (body) body.hidden = true;
    (body || node).after(form);
    input.focus();
  }
}

/** A ‹ i/n › switcher: `pick(-1)` or `pick(1)` on its arrows. */
function versionSwitcher(testid, index, count, pick) {
  return el(
    'span',
    { class: 'version-switcher', testid, role: 'group', 'aria-label': 'versions' },
    el('button', {
      type: 'button',
      class: 'version-step',
      testid: 'version-prev',
      title: 'Earlier version',
      text: '‹',
      disabled: index === 0,
      onclick: () => pick(-1),
    }),
    el('span', { class: 'version-label', testid: 'version-label', text: `${index + 1}/${count}` }),
    el('button', {
      type: 'button',
      class: 'version-step',
      testid: 'version-next',
      title: 'Later version',
      text: '›',
      disabled: index === count - 1,
      onclick: () => pick(1),
    }),
  );
}
