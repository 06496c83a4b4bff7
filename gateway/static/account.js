// The "Account" dialog, opened from the sidebar's foot: the person's display
// name, a password change, what their messages cost (GET /api/me/usage) and
// their sign-in sessions, each of which they may end (gateway/me_http.py),
// and their API tokens (apitokens.js).
//
// `mountAccount()` adds the button and the dialog; nothing else in the page
// needs to know of them. Ending a session closes that browser's connection
// (4401), which sends it back to the login view.

import { ApiError, request } from './api.js';
import { ApiTokens } from './apitokens.js';
import { el, formatTime } from './dom.js';

const enc = encodeURIComponent;

const accountApi = {
  me: () => request('GET', '/api/me'),
  rename: (displayName) => request('PATCH', '/api/me', { displayName }),
  password: (current, next) => request('POST', '/api/me/password', { current, new: next }),
  sessions: () => request('GET', '/api/me/sessions'),
  end: (id) => request('DELETE', `/api/me/sessions/${enc(id)}`),
  endOthers: () => request('DELETE', '/api/me/sessions'),
  usage: () => request('GET', '/api/me/usage'),
};

function usd(value) {
  return `$${Number(value || 0).toFixed(4)}`;
}

/** "Firefox on Linux"-ish: the most telling words of a user agent, kept short. */
function device(agent) {
  if (!agent) return 'Unknown client';
  const browser = /(Edg|Firefox|Chrome|Chromium|Safari|curl|python-httpx)[/ ]/.exec(agent);
  const system = /(Windows|Mac OS X|Android|iPhone|iPad|Linux)/.exec(agent);
  if (!browser && !system) return agent.slice(0, 60);
  return [browser ? browser[1].replace('Edg', 'Edge') : 'Browser', system ? `on ${system[1]}` : '']
    .join(' ')
    .trim();
}

function table(testid, head, rows) {
  return el(
    'table',
    { class: 'account-table', testid },
    el('thead', {}, el('tr', {}, ...head.map((h) => el('th', { text: h })))),
    el('tbody', {}, ...rows.map((cells) => el('tr', {}, ...cells.map((c) => el('td', { text: String(c) }))))),
  );
}

export class AccountDialog {
  constructor(dialog) {
    this.dialog = dialog;
    this.build();
  }

  build() {
    this.who = el('p', { class: 'panel-hint', testid: 'account-username' });
    this.nameInput = el('input', {
      name: 'displayName',
      testid: 'account-display-name',
      maxlength: '80',
      placeholder: 'How others see you',
      'aria-label': 'Display name',
    });
    this.nameStatus = el('p', { class: 'form-error', testid: 'account-name-status', role: 'status' });
    const nameForm = el(
      'form',
      { class: 'inline-field', testid: 'account-name-form' },
      this.nameInput,
      el('button', { type: 'submit', testid: 'account-name-save', text: 'Save' }),
    );
    nameForm.addEventListener('submit', (event) => {
      event.preventDefault();
      this.rename();
    });

    this.current = el('input', {
      type: 'password',
      name: 'current',
      testid: 'account-current-password',
      autocomplete: 'current-password',
      placeholder: 'Current password',
      'aria-label': 'Current password',
    });
    this.next = el('input', {
      type: 'password',
      name: 'new',
      testid: 'account-new-password',
      autocomplete: 'new-password',
      placeholder: 'New password',
      'aria-label': 'New password',
    });
    this.passwordStatus = el('p', { class: 'form-error', testid: 'account-password-status', role: 'status' });
    this.passwordForm = el(
      'form',
      { class: 'account-password', testid: 'account-password-form' },
      this.current,
      this.next,
      el('button', { type: 'submit', testid: 'account-password-save', text: 'Change password' }),
    );
    this.passwordForm.addEventListener('submit', (event) => {
      event.preventDefault();
      this.changePassword();
    });
    this.noPassword = el('p', {
      class: 'panel-hint',
      testid: 'account-no-password',
      text: 'You sign in through your organisation’s provider: there is no password to change here.',
    });

    this.usage = el('div', { class: 'account-usage', testid: 'account-usage' });
    this.sessions = el('ul', { class: 'account-sessions', testid: 'account-sessions' });
    this.sessionStatus = el('p', { class: 'form-error', testid: 'account-sessions-status', role: 'alert' });
    this.endOthers = el('button', {
      type: 'button',
      class: 'quiet danger-text',
      testid: 'account-end-others',
      text: 'End all others',
      onclick: () => this.endAllOthers(),
    });

    this.tokens = new ApiTokens();
    const form = el(
      'form',
      { method: 'dialog', class: 'group-dialog-form account-form' },
      el('h2', { text: 'Account' }),
      this.who,
      el('h3', { text: 'Display name' }),
      nameForm,
      this.nameStatus,
      el('h3', { text: 'Password' }),
      this.passwordForm,
      this.noPassword,
      this.passwordStatus,
      el('h3', { text: 'Usage, last 30 days' }),
      this.usage,
      el('h3', { text: 'Where you are signed in' }),
      this.sessions,
      this.endOthers,
      this.sessionStatus,
      el('h3', { text: 'API tokens' }),
      this.tokens.node,
      el(
        'footer',
        { class: 'dialog-foot' },
        el('span'),
        el('button', { value: 'close', class: 'primary', testid: 'account-close', text: 'Done' }),
      ),
    );
    this.dialog.replaceChildren(form);
  }

  async open() {
    for (const status of [this.nameStatus, this.passwordStatus, this.sessionStatus]) status.textContent = '';
    this.tokens.reset();
    this.dialog.showModal();
    await Promise.all([this.loadMe(), this.loadUsage(), this.loadSessions(), this.tokens.load()]);
  }

  async loadMe() {
    const me = await accountApi.me();
    this.who.textContent = `Signed in as ${me.username}`;
    this.nameInput.value = me.displayName || '';
    this.passwordForm.hidden = !me.hasPassword;
    this.noPassword.hidden = Boolean(me.hasPassword);
  }

  async loadUsage() {
    try {
      const usage = await accountApi.usage();
      const total = el('p', {
        class: 'panel-hint',
        testid: 'account-usage-total',
        text: `${usage.tokens} tokens, ${usd(usage.usd)} spent answering your messages in the last 30 days.`,
      });
      const days = table(
        'account-usage-days',
        ['Day', 'Tokens', 'USD'],
        usage.byDay.map((d) => [d.day, d.tokens, usd(d.usd)]),
      );
      const groups = table(
        'account-usage-groups',
        ['Group', 'Tokens', 'USD'],
        usage.byGroup.map((g) => [g.name, g.tokens, usd(g.usd)]),
      );
      this.usage.replaceChildren(total, ...(usage.byDay.length ? [days, groups] : []));
    } catch (err) {
      this.usage.replaceChildren(el('p', { class: 'form-error', text: err.message }));
    }
  }

  async loadSessions() {
    const { sessions } = await accountApi.sessions();
    this.sessions.replaceChildren(...sessions.map((s) => this.sessionRow(s)));
    this.endOthers.disabled = !sessions.some((s) => !s.current);
  }

  sessionRow(session) {
    const how = session.how === 'oidc' ? 'provider sign-in' : 'password';
    return el(
      'li',
      { class: 'account-session', testid: 'account-session', dataset: { id: session.id, current: String(session.current) } },
      el(
        'span',
        { class: 'account-session-what' },
        el('strong', { text: device(session.userAgent) }),
        session.current ? el('span', { class: 'tag', testid: 'account-session-current', text: 'this browser' }) : null,
        el('span', {
          class: 'panel-hint',
          text: `${session.address} · ${how} · since ${formatTime(session.created)} · seen ${formatTime(session.lastSeen)}`,
        }),
      ),
      session.current
        ? null
        : el('button', {
            type: 'button',
            class: 'quiet danger-text',
            testid: 'account-session-end',
            text: 'End',
            'aria-label': `End the session of ${device(session.userAgent)}`,
            onclick: () => this.end(session.id),
          }),
    );
  }

  async rename() {
    this.nameStatus.textContent = '';
    try {
      const me = await accountApi.rename(this.nameInput.value);
      this.nameInput.value = me.displayName || '';
      this.nameStatus.textContent = me.displayName ? 'Saved.' : 'Display name removed.';
    } catch (err) {
      this.nameStatus.textContent = err.message;
    }
  }

  async changePassword() {
    this.passwordStatus.textContent = '';
    try {
      const done = await accountApi.password(this.current.value, this.next.value);
      this.current.value = '';
      this.next.value = '';
      const others = done.endedSessions === 1 ? '1 other session was' : `${done.endedSessions} other sessions were`;
      this.passwordStatus.textContent = `Password changed; ${others} ended.`;
      await this.loadSessions();
    } catch (err) {
      this.passwordStatus.textContent = err instanceof ApiError ? err.message : String(err);
    }
  }

  async end(id) {
    this.sessionStatus.textContent = '';
    try {
      await accountApi.end(id);
    } catch (err) {
      this.sessionStatus.textContent = err.message;
    }
    await this.loadSessions();
  }

  async endAllOthers() {
    this.sessionStatus.textContent = '';
    try {
      await accountApi.endOthers();
    } catch (err) {
      this.sessionStatus.textContent = err.message;
    }
    await this.loadSessions();
  }
}

/** Add the "Account" button to the sidebar's foot and the dialog it opens. */
export function mountAccount() {
  const dialog = el('dialog', {
    class: 'group-dialog account-dialog',
    id: 'account-dialog',
    testid: 'account-dialog',
    'aria-label': 'Your account',
  });
  document.body.append(dialog);
  const account = new AccountDialog(dialog);
  const button = el('button', {
    type: 'button',
    class: 'quiet',
    id: 'account-button',
    testid: 'account-button',
    'aria-haspopup': 'dialog',
    text: 'Account',
    onclick: () => account.open().catch((err) => {
      account.sessionStatus.textContent = err.message;
    }),
  });
  document.getElementById('logout').before(button);
  return account;
}
