// The admin panel's People tab: every account, found by name, and what an
// administrator does to one (gateway/admin_http.py).
//
// Each row shows a person's name, role and state (active, disabled, locked
// out) with the actions that apply: make admin / make member, disable /
// re-enable, lift a lockout, sign out everywhere. Disabling signs the person
// out at once on every gateway; nobody disables themselves (the button is not
// offered on one's own row, and the server refuses it too). The search box
// asks the server (`?q=`) as one types.
//
// "Invite someone…" beside the search box opens the invite dialog
// (invites.js) with no group: a link for a new account, or for a group
// chosen in the dialog.

import { request } from './api.js';
import { el, formatTime } from './dom.js';
import { openInviteDialog } from './invites.js';

const enc = encodeURIComponent;
const SEARCH_DELAY_MS = 200;

const peopleApi = {
  list: (q) => request('GET', `/api/admin/users${q ? `?q=${enc(q)}` : ''}`),
  role: (name, role) => request('PUT', `/api/admin/users/${enc(name)}/role`, { role }),
  disabled: (name, disabled) => request('PUT', `/api/admin/users/${enc(name)}/disabled`, { disabled }),
  signOut: (name) => request('DELETE', `/api/admin/users/${enc(name)}/sessions`),
  unlock: (name) => request('DELETE', `/api/admin/lockouts/${enc(name)}`),
  me: () => request('GET', '/api/me'),
};

function state(person) {
  if (person.disabled) {
    const by = person.disabledBy ? ` by ${person.disabledBy}` : '';
    return `disabled ${formatTime(person.disabledAt)}${by}`;
  }
  if (person.lockedUntil) return `locked out until ${formatTime(person.lockedUntil)}`;
  return 'active';
}

function personRow(person, me, act) {
  const button = (testid, text, run, cls = 'quiet') =>
    el('button', { type: 'button', class: cls, testid, text, onclick: () => act(run, person) });
  const admin = person.role === 'admin';
  const actions = [
    button(
      'admin-person-role',
      admin ? 'Make member' : 'Make admin',
      () => peopleApi.role(person.username, admin ? 'member' : 'admin'),
    ),
  ];
  if (person.username !== me) {
    actions.push(
      person.disabled
        ? button('admin-person-enable', 'Re-enable', () => peopleApi.disabled(person.username, false))
        : button('admin-person-disable', 'Disable', () => peopleApi.disabled(person.username, true), 'danger-quiet'),
    );
  }
  if (person.lockedUntil) {
    actions.push(button('admin-person-unlock', 'Lift lockout', () => peopleApi.unlock(person.username)));
  }
  actions.push(button('admin-person-signout', 'Sign out everywhere', () => peopleApi.signOut(person.username)));
  const shown = person.displayName && person.displayName !== person.username ? person.displayName : '';
  return el(
    'tr',
    {
      testid: 'admin-person',
      dataset: { username: person.username, disabled: String(person.disabled), role: person.role },
      class: person.disabled ? 'admin-row-off' : '',
    },
    el(
      'td',
      {},
      el('strong', { testid: 'admin-person-name', text: person.username }),
      shown ? el('span', { class: 'panel-hint admin-display', text: ` ${shown}` }) : '',
      person.provider ? el('span', { class: 'admin-badge', text: 'provider' }) : '',
    ),
    el('td', { testid: 'admin-person-role-text', text: person.role }),
    el('td', { testid: 'admin-person-state', text: state(person) }),
    el('td', { class: 'admin-actions' }, actions),
  );
}

/** Fill `container` with the People tab and load the list. */
export async function renderPeople(container) {
  const search = el('input', {
    type: 'search',
    placeholder: 'Find a person by name',
    'aria-label': 'Find a person',
    testid: 'admin-people-search',
    autocomplete: 'off',
    maxlength: '200',
  });
  const invite = el('button', {
    type: 'button',
    class: 'admin-invite',
    testid: 'admin-invite',
    text: 'Invite someone…',
    onclick: () => openInviteDialog(),
  });
  const status = el('p', { class: 'form-error', role: 'alert', testid: 'admin-people-status' });
  const rows = el('tbody', { testid: 'admin-people-rows' });
  const empty = el('p', { class: 'panel-hint', testid: 'admin-people-empty', text: 'Nobody matches.', hidden: true });
  const table = el(
    'table',
    { class: 'admin-table' },
    el('thead', {}, el('tr', {}, ['Person', 'Role', 'State', ''].map((h) => el('th', { text: h })))),
    rows,
  );
  container.replaceChildren(
    el('div', { class: 'admin-toolbar' }, search, invite),
    status,
    el('div', { class: 'admin-scroll' }, table),
    empty,
  );
  let me = '';
  let loads = 0;
  const refresh = async () => {
    loads += 1;
    const mine = loads;
    const listed = await peopleApi.list(search.value.trim());
    if (mine !== loads) return; // a later search answered first
    rows.replaceChildren(...listed.people.map((p) => personRow(p, me, act)));
    empty.hidden = listed.people.length > 0;
  };
  const act = async (run, person) => {
    status.textContent = '';
    try {
      await run();
      await refresh();
    } catch (err) {
      status.textContent = `${person.username}: ${err.message}`;
    }
  };
  let timer = null;
  search.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(() => refresh().catch((err) => { status.textContent = err.message; }), SEARCH_DELAY_MS);
  });
  me = (await peopleApi.me()).username;
  await refresh();
}
