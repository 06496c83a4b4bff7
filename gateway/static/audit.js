// The audit log, for administrators: a dialog opened from the sidebar's "Audit log" button.
//
// `mountAudit()` adds the button (hidden) beside "Log out" and, each time
// someone signs in, asks GET /api/me for their role: the button shows only
// for an administrator, so nobody else sees a button that would answer 403. The dialog filters by who, what, target and a time span,
// shows the entries newest first with an "Older" button that follows the
// server's `next` cursor, and links the same filters to the JSON-lines export
// (GET /api/admin/audit.jsonl, a download that rides on the session cookie).
// Every value is the server's text, shown as text (dom.js never sets HTML).

import { ApiError, request } from './api.js';
import { clear, el } from './dom.js';

// The values of store.audit.AuditAction (a test checks they are the same).
export const AUDIT_ACTIONS = [
  'sign_in',
  'sign_in_failed',
  'lockout_lifted',
  'password_changed',
  'sessions_ended',
  'user_added',
  'mcp_server_added',
  'mcp_server_removed',
  'group_created',
  'group_settings_changed',
  'group_deleted',
  'vp_added',
  'vp_removed',
  'member_added',
  'member_removed',
  'member_left',
  'role_changed',
  'invite_created',
  'invite_revoked',
  'invite_redeemed',
  'quota_changed',
  'account_disabled',
  'account_enabled',
  'display_name_changed',
];

const PAGE = 50;

/** The filters of `form` as query parameters (empty ones left out). */
function filters(form) {
  const params = new URLSearchParams();
  for (const name of ['actor', 'action', 'target']) {
    const value = form.elements[name].value.trim();
    if (value) params.set(name, value);
  }
  for (const name of ['since', 'until']) {
    const value = form.elements[name].value;
    if (value) params.set(name, String(new Date(value).getTime() / 1000));
  }
  return params;
}

function row(entry) {
  const when = new Date(entry.at * 1000);
  const detail = Object.keys(entry.detail || {}).length ? JSON.stringify(entry.detail) : '';
  return el(
    'tr',
    { testid: 'audit-entry', dataset: { id: entry.id, action: entry.action } },
    el('td', { text: when.toLocaleString(), title: when.toISOString() }),
    el('td', { testid: 'audit-actor', text: entry.actor ?? '—' }),
    el('td', { testid: 'audit-action', text: entry.action }),
    el('td', { testid: 'audit-target', text: entry.target ?? '' }),
    el('td', { testid: 'audit-address', text: entry.address ?? 'command line' }),
    el('td', { class: 'audit-detail', text: detail }),
  );
}

function buildDialog() {
  const input = (name, placeholder) =>
    el('input', { name, placeholder, testid: `audit-${name}`, autocomplete: 'off' });
  const when = (name, label) =>
    el('label', { class: 'audit-when' }, label, el('input', { name, type: 'datetime-local', testid: `audit-${name}` }));
  const action = el(
    'select',
    { name: 'action', testid: 'audit-action-filter' },
    el('option', { value: '', text: 'any action' }),
    AUDIT_ACTIONS.map((a) => el('option', { value: a, text: a.replaceAll('_', ' ') })),
  );
  const form = el(
    'form',
    { class: 'audit-filters', testid: 'audit-filters' },
    input('actor', 'who (username)'),
    action,
    input('target', 'target (group id, user, server)'),
    when('since', 'from'),
    when('until', 'to'),
    el('button', { type: 'submit', class: 'primary', testid: 'audit-apply', text: 'Show' }),
  );
  const body = el('tbody', { testid: 'audit-rows' });
  const table = el(
    'table',
    { class: 'audit-table' },
    el('thead', {}, el('tr', {}, ['When', 'Who', 'Action', 'Target', 'From', 'Detail'].map((h) => el('th', { text: h })))),
    body,
  );
  const error = el('p', { class: 'form-error', testid: 'audit-error', role: 'alert' });
  const empty = el('p', { class: 'panel-hint', testid: 'audit-empty', text: 'Nothing recorded matches.', hidden: true });
  const older = el('button', { type: 'button', testid: 'audit-older', text: 'Older', hidden: true });
  const exportLink = el('a', { href: '/api/admin/audit.jsonl', download: 'yeaft-audit.jsonl', testid: 'audit-export', text: 'Export JSON lines' });
  const dialog = el(
    'dialog',
    { class: 'group-dialog audit-dialog', id: 'audit-dialog', testid: 'audit-dialog', 'aria-label': 'Audit log' },
    el('h2', { text: 'Audit log' }),
    form,
    error,
    el('div', { class: 'audit-scroll' }, table),
    empty,
    el(
      'footer',
      { class: 'dialog-foot' },
      el('span', { class: 'audit-foot-left' }, older, ' ', exportLink),
      el('button', { type: 'button', class: 'primary', testid: 'audit-close', text: 'Done', onclick: () => dialog.close() }),
    ),
  );
  let next = null;
  const load = async (more) => {
    error.textContent = '';
    const params = filters(form);
    exportLink.href = `/api/admin/audit.jsonl${params.size ? `?${params}` : ''}`;
    params.set('limit', String(PAGE));
    if (more && next) params.set('before', next);
    if (!more) clear(body);
    try {
      const page = await request('GET', `/api/admin/audit?${params}`);
      body.append(...page.entries.map(row));
      next = page.next;
    } catch (err) {
      error.textContent = err instanceof ApiError ? err.message : String(err);
      next = null;
    }
    older.hidden = !next;
    empty.hidden = body.childElementCount > 0;
  };
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    load(false);
  });
  older.addEventListener('click', () => load(true));
  return { dialog, open: () => { dialog.showModal(); load(false); } };
}

/** May the person signed in now read the audit log? */
async function allowed() {
  try {
    return (await request('GET', '/api/me')).role === 'admin';
  } catch {
    return false;
  }
}

/** Add the "Audit log" button and dialog; the button shows for administrators only. */
export function mountAudit(root = document) {
  const logout = root.getElementById('logout');
  const me = root.getElementById('me') || root.querySelector('[data-testid="me"]');
  if (!logout || !me) return;
  const { dialog, open } = buildDialog();
  root.body.append(dialog);
  const button = el('button', {
    type: 'button',
    class: 'quiet',
    id: 'audit-button',
    testid: 'audit-button',
    'aria-haspopup': 'dialog',
    text: 'Audit log',
    hidden: true,
    onclick: open,
  });
  logout.before(button);
  // Who is signed in shows in `me`: ask again whenever it changes.
  const check = async () => {
    button.hidden = true;
    if (me.textContent.trim()) button.hidden = !(await allowed());
  };
  new MutationObserver(check).observe(me, { childList: true, characterData: true, subtree: true });
  check();
}
