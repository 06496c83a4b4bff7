// The admin panel's Groups tab: every group of the instance, its owner, size
// and last activity, found by name, member or id (gateway/admin_groups_http.py).
//
// An administrator hands a group over to one of its members, or deletes it.
// Deleting asks once more on the same button ("Really delete?"); the server
// stops the group's running turns first, then the group goes for everyone.

import { request } from './api.js';
import { el, formatTime } from './dom.js';

const enc = encodeURIComponent;
const SEARCH_DELAY_MS = 200;

const groupsApi = {
  list: (q) => request('GET', `/api/admin/groups${q ? `?q=${enc(q)}` : ''}`),
  owner: (id, username) => request('PUT', `/api/admin/groups/${enc(id)}/owner`, { username }),
  remove: (id) => request('DELETE', `/api/admin/groups/${enc(id)}`),
};

function groupRow(group, act) {
  const choose = el(
    'select',
    { testid: 'admin-group-new-owner', 'aria-label': `New owner of ${group.name}` },
    group.members.map((m) => {
      const option = el('option', { value: m, text: m });
      option.selected = m === group.owner;
      return option;
    }),
  );
  const handOver = el('button', {
    type: 'button',
    class: 'quiet',
    testid: 'admin-group-transfer',
    text: 'Hand over',
    onclick: () => act(() => groupsApi.owner(group.id, choose.value), group),
  });
  const remove = el('button', { type: 'button', class: 'danger-quiet', testid: 'admin-group-delete', text: 'Delete' });
  remove.addEventListener('click', () => {
    if (remove.dataset.confirm) {
      act(() => groupsApi.remove(group.id), group);
      return;
    }
    remove.dataset.confirm = 'on';
    remove.textContent = 'Really delete?';
  });
  remove.addEventListener('blur', () => {
    delete remove.dataset.confirm;
    remove.textContent = 'Delete';
  });
  return el(
    'tr',
    { testid: 'admin-group', dataset: { id: group.id } },
    el('td', {}, el('strong', { testid: 'admin-group-name', text: group.name }), el('div', { class: 'panel-hint', text: group.id })),
    el('td', { testid: 'admin-group-owner', text: group.owner ?? '—' }),
    el('td', { testid: 'admin-group-size', text: String(group.size), title: group.members.join(', ') }),
    el('td', { testid: 'admin-group-activity', text: formatTime(group.lastActivity) }),
    el('td', { class: 'admin-actions' }, choose, handOver, remove),
  );
}

/** Fill `container` with the Groups tab and load the list. */
export async function renderGroups(container) {
  const search = el('input', {
    type: 'search',
    placeholder: 'Find a group by name, member or id',
    'aria-label': 'Find a group',
    testid: 'admin-groups-search',
    autocomplete: 'off',
    maxlength: '200',
  });
  const status = el('p', { class: 'form-error', role: 'alert', testid: 'admin-groups-status' });
  const rows = el('tbody', { testid: 'admin-groups-rows' });
  const empty = el('p', { class: 'panel-hint', testid: 'admin-groups-empty', text: 'No group matches.', hidden: true });
  const table = el(
    'table',
    { class: 'admin-table' },
    el('thead', {}, el('tr', {}, ['Group', 'Owner', 'People', 'Last activity', ''].map((h) => el('th', { text: h })))),
    rows,
  );
  container.replaceChildren(el('div', { class: 'admin-toolbar' }, search), status, el('div', { class: 'admin-scroll' }, table), empty);
  let loads = 0;
  const refresh = async () => {
    loads += 1;
    const mine = loads;
    const listed = await groupsApi.list(search.value.trim());
    if (mine !== loads) return;
    rows.replaceChildren(...listed.groups.map((g) => groupRow(g, act)));
    empty.hidden = listed.groups.length > 0;
  };
  const act = async (run, group) => {
    status.textContent = '';
    try {
      await run();
      await refresh();
    } catch (err) {
      status.textContent = `${group.name}: ${err.message}`;
    }
  };
  let timer = null;
  search.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(() => refresh().catch((err) => { status.textContent = err.message; }), SEARCH_DELAY_MS);
  });
  await refresh();
}
