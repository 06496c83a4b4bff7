// The audit log, for administrators: the "Audit" tab of the admin panel (adminpanel.js).
//
// `renderAudit(container)` fills the tab: filters by who, what, target and a
// time span, the entries newest first with an "Older" button that follows the
// server's `next` cursor, and the same filters linked to the JSON-lines export
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
  'api_token_created',
  'api_token_revoked',
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
  'message_edited',
  'message_resent',
  'reply_version_chosen',
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

/** Fill `container` with the audit log's filters and entries, and load the newest page. */
export function renderAudit(container) {
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
  container.replaceChildren(
    el(
      'section',
      { class: 'audit-section', testid: 'audit-section', 'aria-label': 'Audit log' },
      form,
      error,
      el('div', { class: 'audit-scroll' }, table),
      empty,
      el('footer', { class: 'audit-foot' }, older, ' ', exportLink),
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
  return load(false);
}
