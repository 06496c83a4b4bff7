// The "API tokens" part of the Account dialog (account.js): named tokens a
// person makes for a program (a desktop MCP client, a script, another agent
// platform), listed with when they expire and were last used, each revocable
// (gateway/api_tokens.py). A new token is shown once, with a Copy button:
// the server keeps only its session, never the token.

import { request } from './api.js';
import { el, formatTime } from './dom.js';
import { copyButton } from './markdown.js';

const enc = encodeURIComponent;

const tokensApi = {
  list: () => request('GET', '/api/me/tokens'),
  make: (name, days) => request('POST', '/api/me/tokens', { name, days }),
  revoke: (id) => request('DELETE', `/api/me/tokens/${enc(id)}`),
};

const LIFETIMES = [
  [7, '7 days'],
  [30, '30 days'],
  [90, '90 days'],
  [365, '1 year'],
];

export class ApiTokens {
  constructor() {
    this.list = el('ul', { class: 'account-sessions', testid: 'api-tokens' });
    this.status = el('p', { class: 'form-error', testid: 'api-token-status', role: 'status' });
    this.fresh = el('div', { class: 'api-token-fresh', testid: 'api-token-fresh', hidden: true });
    this.name = el('input', {
      name: 'tokenName',
      testid: 'api-token-name',
      maxlength: '80',
      required: true,
      placeholder: 'What will use it, e.g. Desktop MCP client',
      'aria-label': 'Token name',
    });
    this.days = el(
      'select',
      { testid: 'api-token-days', 'aria-label': 'Valid for' },
      ...LIFETIMES.map(([days, label]) => el('option', { value: String(days), text: label, selected: days === 90 })),
    );
    const form = el(
      'form',
      { class: 'inline-field', testid: 'api-token-form' },
      this.name,
      this.days,
      el('button', { type: 'submit', testid: 'api-token-make', text: 'Make token' }),
    );
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      this.make();
    });
    this.node = el(
      'div',
      { class: 'api-tokens' },
      el('p', {
        class: 'panel-hint',
        text: 'For programs that act as you: a desktop MCP client (/mcp), an AG-UI or A2A client, a script. A token is shown once.',
      }),
      this.list,
      form,
      this.fresh,
      this.status,
    );
  }

  reset() {
    this.status.textContent = '';
    this.fresh.hidden = true;
    this.fresh.replaceChildren();
  }

  async load() {
    const { tokens } = await tokensApi.list();
    this.list.replaceChildren(
      ...(tokens.length
        ? tokens.map((t) => this.row(t))
        : [el('li', { class: 'panel-hint', testid: 'api-tokens-none', text: 'No API tokens.' })]),
    );
  }

  row(token) {
    const used = token.lastUsed > token.created + 1 ? `used ${formatTime(token.lastUsed)}` : 'not used yet';
    return el(
      'li',
      { class: 'account-session', testid: 'api-token', dataset: { id: token.id } },
      el(
        'span',
        { class: 'account-session-what' },
        el('strong', { text: token.name }),
        el('span', {
          class: 'panel-hint',
          text: `made ${formatTime(token.created)} · expires ${formatTime(token.expires)} · ${used}`,
        }),
      ),
      el('button', {
        type: 'button',
        class: 'quiet danger-text',
        testid: 'api-token-revoke',
        text: 'Revoke',
        'aria-label': `Revoke the token ${token.name}`,
        onclick: () => this.revoke(token.id),
      }),
    );
  }

  async make() {
    this.reset();
    try {
      const made = await tokensApi.make(this.name.value, Number(this.days.value));
      this.name.value = '';
      const value = el('code', { class: 'api-token-value', testid: 'api-token-value', text: made.token });
      this.fresh.replaceChildren(
        el('p', { text: `“${made.name}”: copy it now, it will not be shown again.` }),
        value,
        copyButton(() => made.token, { className: 'quiet', testid: 'api-token-copy', title: 'Copy the token' }),
      );
      this.fresh.hidden = false;
      await this.load();
    } catch (err) {
      this.status.textContent = err.message;
    }
  }

  async revoke(id) {
    this.reset();
    try {
      await tokensApi.revoke(id);
    } catch (err) {
      this.status.textContent = err.message;
    }
    await this.load();
  }
}
