// The settings panel: a form over the group's name, default VP and every
// field of its GroupSettings (protocol/settings.py). The owner saves changes
// with PATCH /api/groups/{id}/settings; everyone else sees them read-only.
// The server checks every bound again and names the field it refuses, which
// is shown beside that field. Changes made elsewhere arrive through `update`.

import { api } from './api.js';
import { el, fillInputs } from './dom.js';

// The bounds mirror GroupSettings; the server is the judge.
const NUMBERS = [
  { key: 'fanoutCap', label: 'VPs answering one message', min: 1, max: 16, step: 1 },
  { key: 'maxChainDepth', label: 'VP-to-VP hops after a message', min: 1, max: 16, step: 1 },
  { key: 'maxTurnsPerMessage', label: 'VP turns after a message', min: 1, max: 64, step: 1 },
  { key: 'maxPairExchanges', label: 'Exchanges between two VPs', min: 1, max: 16, step: 1 },
  { key: 'throttleHits', label: 'Hand-offs to one VP per window', min: 1, max: 32, step: 1 },
  { key: 'throttleWindowS', label: 'Throttle window (seconds)', min: 0.5, max: 60, step: 0.5 },
  { key: 'approvalTimeoutS', label: 'Tool approval question expires after (seconds)', min: 1, max: 3600, step: 1 },
];
// A person's message to a VP that is still answering (QueueMode).
const QUEUE_MODES = [
  { value: 'collect', text: 'Collect: merge them into one answer after a short pause' },
  { value: 'steer', text: 'Steer: the answer in progress takes them in' },
  { value: 'followup', text: 'Follow up: answer each after the current one' },
  { value: 'interrupt', text: 'Interrupt: stop the current answer, answer the new one' },
];
const QUEUE_NUMBERS = [
  { key: 'queueDebounceS', label: 'Collect: pause before answering (seconds)', min: 0, max: 30, step: 0.1 },
  { key: 'queueCap', label: 'Collect: messages kept in full', min: 1, max: 100, step: 1 },
];
// Per-group budgets (0: no limit); a refused turn names the budget it hit.
const BUDGET_NUMBERS = [
  { key: 'budgetTokensPerDay', label: 'Tokens a day (0: no limit)', min: 0, max: 10000000000, step: 1 },
  { key: 'budgetUsdPerDay', label: 'US dollars a day (0: no limit)', min: 0, max: 1000000, step: 0.01 },
  { key: 'budgetTokensPerMonth', label: 'Tokens a month (0: no limit)', min: 0, max: 1000000000000, step: 1 },
  { key: 'budgetUsdPerMonth', label: 'US dollars a month (0: no limit)', min: 0, max: 100000000, step: 0.01 },
  { key: 'budgetTokensPerMessage', label: 'Tokens per message (0: no limit)', min: 0, max: 10000000000, step: 1 },
  { key: 'budgetUsdPerMessage', label: 'US dollars per message (0: no limit)', min: 0, max: 1000000, step: 0.01 },
];
const SWITCHES = [
  { key: 'broadcastWhenUnmentioned', label: 'No mention means everyone answers' },
  { key: 'vpMentionsDispatch', label: 'A VP’s @mention hands the work on' },
  { key: 'autoApprove', label: 'Run every tool call without asking (tools set to deny stay refused)' },
  {
    key: 'teamMode',
    testid: 'setting-team-mode',
    label: 'Team mode: messages without @mentions may become tasks a team of VPs works on',
  },
];

export class SettingsPanel {
  constructor({ dialog, button, me, persona, onSaved }) {
    this.dialog = dialog;
    this.button = button;
    this.me = me;
    this.persona = persona;
    this.onSaved = onSaved;
    this.group = null;
    this.inputs = new Map();
    this.build();
    button.addEventListener('click', () => this.open());
  }

  field(key, label, input) {
    this.inputs.set(key, input);
    return el(
      'label',
      { class: 'field setting', dataset: { setting: key } },
      el('span', { text: label }),
      input,
      el('small', { class: 'field-error', testid: `error-${key}` }),
    );
  }

  build() {
    const name = el('input', { name: 'name', testid: 'setting-name', maxlength: '120', required: true });
    const language = el(
      'select',
      { name: 'language', testid: 'setting-language' },
      el('option', { value: 'en', text: 'English' }),
      el('option', { value: 'zh', text: '中文 (Chinese)' }),
    );
    this.defaultVp = el('select', { name: 'defaultVpId', testid: 'setting-defaultVpId' });
    const model = el('input', {
      name: 'model',
      testid: 'setting-model',
      placeholder: 'server default (e.g. openai:gpt-4o-mini)',
      maxlength: '200',
      autocomplete: 'off',
    });
    const switches = SWITCHES.map(({ key, label, testid }) => {
      const box = el('input', { type: 'checkbox', name: key, testid: testid || `setting-${key}` });
      this.inputs.set(key, box);
      return el('label', { class: 'switch', dataset: { setting: key } }, box, el('span', { text: label }));
    });
    const queueMode = el(
      'select',
      { name: 'queueMode', testid: 'setting-queueMode' },
      ...QUEUE_MODES.map((mode) => el('option', mode)),
    );
    const field = ({ key, label, min, max, step }) =>
      this.field(
        key,
        label,
        el('input', { type: 'number', name: key, testid: `setting-${key}`, min, max, step }),
      );
    const budgets = BUDGET_NUMBERS.map(field);
    const numbers = [...NUMBERS, ...QUEUE_NUMBERS].map(({ key, label, min, max, step }) =>
      this.field(
        key,
        `${label} (${min}–${max})`,
        el('input', { type: 'number', name: key, testid: `setting-${key}`, min, max, step }),
      ),
    );
    this.note = el('p', { class: 'panel-hint', testid: 'settings-note' });
    this.error = el('p', { class: 'form-error', testid: 'settings-error', role: 'alert' });
    this.save = el('button', { type: 'submit', class: 'primary', testid: 'settings-save', text: 'Save' });
    this.form = el(
      'form',
      { class: 'group-dialog-form settings-form', testid: 'settings-form', novalidate: true },
      el('h2', { text: 'Group settings' }),
      this.note,
      this.field('name', 'Name', name),
      this.field('language', 'Language the VPs answer in', language),
      this.field('defaultVpId', 'Default VP (answers when nobody is mentioned)', this.defaultVp),
      ...switches,
      this.field('model', 'Model for every VP of the group', model),
      this.field('queueMode', 'Messages sent while a VP is answering', queueMode),
      el('details', { class: 'limits', testid: 'settings-limits' }, el('summary', { text: 'Loop-guard and queue limits' }), ...numbers),
      el('details', { class: 'limits budgets', testid: 'settings-budgets' }, el('summary', { text: 'Budgets' }), ...budgets),
      // Reserved for more of the group's settings (its MCP servers).
      el('div', { id: 'settings-extra', class: 'settings-extra', testid: 'settings-extra' }),
      this.error,
      el(
        'footer',
        { class: 'dialog-foot' },
        el('button', {
          type: 'button',
          class: 'quiet',
          testid: 'settings-close',
          text: 'Close',
          onclick: () => this.dialog.close(),
        }),
        this.save,
      ),
    );
    this.form.addEventListener('submit', (event) => {
      event.preventDefault();
      this.submit();
    });
    this.dialog.replaceChildren(this.form);
  }

  update(group) {
    if (!group) {
      this.group = null;
      this.button.disabled = true;
      return;
    }
    const other = this.group && this.group.id !== group.id;
    this.group = group;
    this.button.disabled = false;
    // A form being edited is refreshed only when it shows another group.
    if (this.dialog.open && other) this.dialog.close();
    else if (this.dialog.open && !this.isOwner()) this.fill();
  }

  isOwner() {
    return Boolean(this.group) && this.group.owner === this.me();
  }

  open() {
    if (!this.group) return;
    this.fill();
    this.dialog.showModal();
  }

  fill() {
    const group = this.group;
    const settings = group.settings || {};
    const owner = this.isOwner();
    this.defaultVp.replaceChildren(
      ...(group.roster || []).map((id) => el('option', { value: id, text: this.persona(id).name })),
    );
    const values = { name: group.name, defaultVpId: group.defaultVpId || '', ...settings };
    fillInputs(this.inputs, values, owner);
    this.save.hidden = !owner;
    // The MCP list (mcp.js) offers a box per server, checked as the group chooses.
    this.form.dataset.mcpServers = JSON.stringify(settings.mcpServers || ['*']);
    this.form.dataset.owner = owner ? 'yes' : '';
    this.note.textContent = owner
      ? 'You own this group: changes apply from the next message, and everyone sees a notice.'
      : `Only the owner (${group.owner}) can change these settings.`;
    this.clearErrors();
  }

  clearErrors() {
    this.error.textContent = '';
    for (const node of this.form.querySelectorAll('.field-error')) node.textContent = '';
  }

  /** Only what differs from the group as it is, so a save never undoes another change. */
  changes() {
    const group = this.group;
    const body = { settings: {} };
    const name = this.inputs.get('name').value.trim();
    if (name !== group.name) body.name = name;
    const vp = this.inputs.get('defaultVpId').value;
    if (vp && vp !== group.defaultVpId) body.defaultVpId = vp;
    const current = group.settings || {};
    for (const [key, input] of this.inputs) {
      if (key === 'name' || key === 'defaultVpId') continue;
      let value;
      if (input.type === 'checkbox') value = input.checked;
      else if (input.type === 'number') value = input.value === '' ? null : Number(input.value);
      else value = input.value.trim();
      if (value !== null && value !== current[key]) body.settings[key] = value;
    }
    const servers = this.chosenServers();
    if (servers && JSON.stringify(servers) !== JSON.stringify(current.mcpServers || ['*'])) {
      body.settings.mcpServers = servers;
    }
    if (!Object.keys(body.settings).length) delete body.settings;
    return body;
  }

  /** The group's MCP servers as the boxes mcp.js put in the form say; null when there are none. */
  chosenServers() {
    const boxes = [...this.form.querySelectorAll('input[data-mcp-use]')];
    if (!boxes.length) return null;
    const chosen = boxes.filter((b) => b.checked).map((b) => b.dataset.mcpUse);
    return chosen.length === boxes.length ? ['*'] : chosen;
  }

  async submit() {
    if (!this.isOwner()) return;
    this.clearErrors();
    const body = this.changes();
    if (!Object.keys(body).length) {
      this.dialog.close();
      return;
    }
    this.save.disabled = true;
    try {
      const group = await api.updateSettings(this.group.id, body);
      this.group = group;
      this.onSaved(group);
      this.dialog.close();
    } catch (err) {
      const key = (err.field || '').split('.').pop();
      const slot = key && this.form.querySelector(`[data-testid="error-${CSS.escape(key)}"]`);
      if (slot) slot.textContent = err.message;
      this.error.textContent = err.message;
    } finally {
      this.save.disabled = false;
    }
  }
}
