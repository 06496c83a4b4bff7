// The chat header's parts that follow what is open, a group or a one-to-one
// conversation: the token total of its own turns, its Export links, and for a
// conversation its VP and model and its own Settings.
//
// Each part asks the routes of what is open: `/api/groups/{id}/...` for a
// group, `/api/conversations/{id}/...` for a conversation (usage, export,
// settings; gateway/conversations_http.py). A conversation is a group record
// underneath, but its header never shows a group's numbers or a group's
// settings form: the group's People and Settings buttons are hidden while a
// conversation is open, and its own Settings button opens a form over the
// settings a conversation has (title, language, model, queue mode, tools),
// which its owner saves with PATCH /api/conversations/{id}/settings. The
// Export menu closes like a menu (menus.js).

import { request as call } from './api.js';
import { el, fillInputs } from './dom.js';
import { detailsMenu } from './menus.js';

const enc = encodeURIComponent;
const USAGE_DELAY_MS = 200;

const QUEUE_MODES = [
  { value: 'collect', text: 'Collect: merge them into one answer after a short pause' },
  { value: 'steer', text: 'Steer: the answer in progress takes them in' },
  { value: 'followup', text: 'Follow up: answer each after the current one' },
  { value: 'interrupt', text: 'Interrupt: stop the current answer, answer the new one' },
];

/** The routes of a group or a conversation (`{id, conversation}`). */
function base(target) {
  return `/api/${target.conversation ? 'conversations' : 'groups'}/${enc(target.id)}`;
}

function sameTarget(a, b) {
  return Boolean(a && b && a.id === b.id && Boolean(a.conversation) === Boolean(b.conversation));
}

function headerNodes() {
  const $ = (id) => document.getElementById(id);
  return {
    usage: $('group-usage'),
    exportMenu: $('export-menu'),
    exportMarkdown: $('export-markdown'),
    exportJson: $('export-json'),
    subtitle: $('chat-subtitle'),
    settingsButton: $('conversation-settings-button'),
    dialog: $('conversation-settings-dialog'),
    groupOnly: [$('members-button'), $('settings-button')],
  };
}

export class ChatHead {
  /**
   * `me()` is the signed-in user; `onSaved(view)` is told a conversation's
   * settings were saved (its title may have changed). `nodes` defaults to the
   * page's header: its usage total, export menu and links, the subtitle (a
   * conversation's VP and model), the conversation Settings button and its
   * dialog, and the group-only buttons hidden while a conversation is open.
   */
  constructor({ me, onSaved, nodes = headerNodes() }) {
    this.nodes = nodes;
    this.me = me;
    this.onSaved = onSaved;
    this.target = null;
    this.info = null;
    this.usageTimer = null;
    this.inputs = new Map();
    this.build();
    detailsMenu(nodes.exportMenu);
    nodes.settingsButton.addEventListener('click', () => this.openSettings());
  }

  /** What is open (`{id, conversation}`), or null; called on every render of the chrome. */
  update(target) {
    const { exportMenu, exportMarkdown, exportJson, subtitle, settingsButton } = this.nodes;
    const changed = !sameTarget(this.target, target);
    this.target = target;
    exportMenu.hidden = !target;
    if (target) {
      exportMarkdown.href = `${base(target)}/export?format=markdown`;
      exportJson.href = `${base(target)}/export?format=json`;
    }
    const conversation = Boolean(target?.conversation);
    for (const button of this.nodes.groupOnly) button.hidden = conversation;
    settingsButton.hidden = !conversation;
    subtitle.hidden = !conversation || !this.info;
    if (!changed) return;
    this.info = null;
    subtitle.hidden = true;
    if (this.dialog.open) this.dialog.close();
    if (exportMenu.open) exportMenu.open = false;
    this.refreshUsage();
    if (conversation) this.loadInfo();
  }

  // -- usage ----------------------------------------------------------------
  /** The token and cost total of what is open, read again (throttled). */
  refreshUsage() {
    clearTimeout(this.usageTimer);
    this.nodes.usage.hidden = true;
    if (!this.target) return;
    this.usageTimer = setTimeout(() => this.showUsage(), USAGE_DELAY_MS);
  }

  async showUsage() {
    const target = this.target;
    const node = this.nodes.usage;
    if (!target) return;
    let usage;
    try {
      usage = await call('GET', `${base(target)}/usage`);
    } catch {
      if (sameTarget(target, this.target)) node.hidden = true;
      return;
    }
    if (!sameTarget(target, this.target)) return;
    const tokens = (usage.inputTokens || 0) + (usage.outputTokens || 0);
    node.textContent = `${tokens.toLocaleString()} tokens · $${(usage.costUsd || 0).toFixed(4)}`;
    const where = target.conversation ? 'this conversation' : 'this group';
    node.title = `${usage.turns} turns in ${where}: ${usage.inputTokens} tokens in, ${usage.outputTokens} out`;
    delete node.dataset.budgetSpent;
    const today = usage.today;
    if (today && (today.maxTokens || today.maxUsd)) {
      // A daily budget is set: how much of it today's turns used.
      const parts = [];
      if (today.maxTokens) parts.push(`${today.tokens.toLocaleString()}/${today.maxTokens.toLocaleString()} tokens`);
      if (today.maxUsd) parts.push(`$${today.costUsd.toFixed(2)}/$${today.maxUsd}`);
      node.textContent += ` · today ${parts.join(', ')}`;
      node.dataset.budgetSpent = String(
        (today.maxTokens && today.tokens >= today.maxTokens) || (today.maxUsd && today.costUsd >= today.maxUsd),
      );
    }
    node.dataset.turns = String(usage.turns);
    node.dataset.target = target.id;
    node.hidden = false;
  }

  // -- a conversation's VP, model and settings -------------------------------------
  /** Read the open conversation's settings view: the subtitle, and the form if it is open. */
  async loadInfo() {
    const target = this.target;
    let info;
    try {
      info = await call('GET', `${base(target)}/settings`);
    } catch {
      return; // the conversation is gone or out of reach: its list says so
    }
    if (!sameTarget(target, this.target)) return;
    this.show(info);
  }

  /** A change announced in the open conversation's log (`group_update`): read it again. */
  changed(id) {
    if (this.target?.conversation && this.target.id === id) this.loadInfo();
  }

  show(info) {
    this.info = info;
    const subtitle = this.nodes.subtitle;
    subtitle.textContent = `with ${info.vpName} · ${info.model}`;
    subtitle.dataset.vp = info.vpId;
    subtitle.hidden = false;
    if (this.dialog.open && !this.isOwner()) this.fill();
  }

  isOwner() {
    return Boolean(this.info) && this.info.owner === this.me();
  }

  build() {
    this.dialog = this.nodes.dialog;
    const input = (key, attrs) => {
      const node = el('input', { name: key, testid: `conversation-setting-${key}`, ...attrs });
      this.inputs.set(key, node);
      return node;
    };
    const select = (key, options) => {
      const node = el('select', { name: key, testid: `conversation-setting-${key}` }, ...options.map((o) => el('option', o)));
      this.inputs.set(key, node);
      return node;
    };
    const field = (label, node) =>
      el('label', { class: 'field setting' }, el('span', { text: label }), node);
    this.note = el('p', { class: 'panel-hint', testid: 'conversation-settings-note' });
    this.error = el('p', { class: 'form-error', testid: 'conversation-settings-error', role: 'alert' });
    this.save = el('button', { type: 'submit', class: 'primary', testid: 'conversation-settings-save', text: 'Save' });
    this.form = el(
      'form',
      { class: 'group-dialog-form settings-form', testid: 'conversation-settings-form', novalidate: true },
      el('h2', { text: 'Conversation settings' }),
      this.note,
      field('Title', input('title', { maxlength: '120', required: true })),
      field('Language the VP answers in', select('language', [
        { value: 'en', text: 'English' },
        { value: 'zh', text: '中文 (Chinese)' },
      ])),
      field('Model', input('model', {
        placeholder: 'the VP’s own (e.g. openai:gpt-4o-mini)',
        maxlength: '200',
        autocomplete: 'off',
      })),
      field('Messages sent while the VP is answering', select('queueMode', QUEUE_MODES)),
      el(
        'label',
        { class: 'switch' },
        input('autoApprove', { type: 'checkbox' }),
        el('span', { text: 'Run every tool call without asking (tools set to deny stay refused)' }),
      ),
      this.error,
      el(
        'footer',
        { class: 'dialog-foot' },
        el('button', { type: 'button', class: 'quiet', testid: 'conversation-settings-close', text: 'Close', onclick: () => this.dialog.close() }),
        this.save,
      ),
    );
    this.form.addEventListener('submit', (event) => {
      event.preventDefault();
      this.submit();
    });
    this.dialog.replaceChildren(this.form);
  }

  async openSettings() {
    if (!this.target?.conversation) return;
    if (!this.info) await this.loadInfo();
    if (!this.info) return;
    this.fill();
    this.dialog.showModal();
  }

  fill() {
    const info = this.info;
    const owner = this.isOwner();
    const values = { title: info.title, ...info.settings };
    fillInputs(this.inputs, values, owner);
    this.save.hidden = !owner;
    this.note.textContent = owner
      ? `Your conversation with ${info.vpName}: changes apply from your next message.`
      : `Only its owner (${info.owner}) can change these settings.`;
    this.error.textContent = '';
  }

  /** Only what differs from the conversation as it is. */
  changes() {
    const info = this.info;
    const body = { settings: {} };
    const title = this.inputs.get('title').value.trim();
    if (title && title !== info.title) body.title = title;
    for (const [key, node] of this.inputs) {
      if (key === 'title') continue;
      const value = node.type === 'checkbox' ? node.checked : node.value.trim();
      if (value !== info.settings[key]) body.settings[key] = value;
    }
    if (!Object.keys(body.settings).length) delete body.settings;
    return body;
  }

  async submit() {
    if (!this.isOwner()) return;
    this.error.textContent = '';
    const body = this.changes();
    if (!Object.keys(body).length) {
      this.dialog.close();
      return;
    }
    this.save.disabled = true;
    try {
      const info = await call('PATCH', `${base(this.target)}/settings`, body);
      this.show(info);
      this.onSaved(info);
      this.dialog.close();
    } catch (err) {
      this.error.textContent = err.message;
    } finally {
      this.save.disabled = false;
    }
  }
}
