// The admin panel: one dialog with a tab per part of running the instance.
//
// `mountAdminPanel()` adds an "Admin" button to the sidebar's foot (hidden)
// and, whenever someone signs in, asks GET /api/me for their role: the button
// shows for an administrator only, so nobody else sees a panel whose every
// route would answer 403. Each tab is drawn by its own module the first time
// it is shown, and drawn afresh when shown again:
//
//   People       admin_people.js   list, search, disable, re-enable, roles,
//                                  lockouts, sign out everywhere, invite
//   Groups       admin_groups.js   list, search, hand over, delete
//   Usage        adminusage.js     tokens and US dollars by person, group, VP,
//                                  model and day, with a chart (loaded on demand)
//   MCP servers  mcp.js            the servers, their tools, add and remove
//   Audit        audit.js          the audit log, its filters and export

import { request } from './api.js';
import { el } from './dom.js';
import { renderAudit } from './audit.js';
import { renderGroups } from './admin_groups.js';
import { renderMcpServers } from './mcp.js';
import { renderPeople } from './admin_people.js';

export const ADMIN_TABS = [
  { id: 'people', label: 'People', render: renderPeople },
  { id: 'groups', label: 'Groups', render: renderGroups },
  // Loaded when first shown: only administrators need its chart library.
  { id: 'usage', label: 'Usage', render: async (c) => (await import('./adminusage.js')).mountUsage(c) },
  { id: 'mcp', label: 'MCP servers', render: (c) => renderMcpServers(c) },
  { id: 'audit', label: 'Audit', render: renderAudit },
];

class AdminPanel {
  constructor() {
    this.tabs = new Map();
    this.tablist = el('div', { class: 'admin-tabs', role: 'tablist', testid: 'admin-tabs' });
    this.body = el('div', { class: 'admin-body' });
    for (const tab of ADMIN_TABS) {
      const button = el('button', {
        type: 'button',
        role: 'tab',
        class: 'admin-tab',
        id: `admin-tab-${tab.id}`,
        testid: `admin-tab-${tab.id}`,
        'aria-selected': 'false',
        'aria-controls': `admin-pane-${tab.id}`,
        text: tab.label,
        onclick: () => this.show(tab.id),
      });
      const pane = el('div', {
        role: 'tabpanel',
        class: 'admin-pane',
        id: `admin-pane-${tab.id}`,
        testid: `admin-pane-${tab.id}`,
        'aria-labelledby': `admin-tab-${tab.id}`,
        hidden: true,
      });
      this.tablist.append(button);
      this.body.append(pane);
      this.tabs.set(tab.id, { ...tab, button, pane });
    }
    this.dialog = el(
      'dialog',
      { class: 'group-dialog admin-dialog', id: 'admin-panel', testid: 'admin-panel', 'aria-label': 'Administration' },
      el('header', { class: 'admin-head' }, el('h2', { text: 'Administration' }), this.tablist),
      this.body,
      el(
        'footer',
        { class: 'dialog-foot' },
        el('span'),
        el('button', { type: 'button', class: 'primary', testid: 'admin-close', text: 'Done', onclick: () => this.dialog.close() }),
      ),
    );
  }

  open(tabId = 'people') {
    if (!this.dialog.open) this.dialog.showModal();
    return this.show(tabId);
  }

  async show(tabId) {
    for (const [id, tab] of this.tabs) {
      const on = id === tabId;
      tab.button.setAttribute('aria-selected', String(on));
      tab.pane.hidden = !on;
    }
    const tab = this.tabs.get(tabId);
    try {
      await tab.render(tab.pane);
    } catch (err) {
      tab.pane.replaceChildren(el('p', { class: 'form-error', role: 'alert', text: err.message || String(err) }));
    }
  }
}

/** May the person signed in now use the panel? */
async function isAdmin() {
  try {
    return (await request('GET', '/api/me')).role === 'admin';
  } catch {
    return false;
  }
}

/** Add the "Admin" button and the panel; the button shows for administrators only. */
export function mountAdminPanel(root = document) {
  const logout = root.getElementById('logout');
  const me = root.querySelector('[data-testid="me"]');
  if (!logout || !me) return null;
  const panel = new AdminPanel();
  root.body.append(panel.dialog);
  const button = el('button', {
    type: 'button',
    class: 'quiet',
    id: 'admin-button',
    testid: 'admin-button',
    'aria-haspopup': 'dialog',
    text: 'Admin',
    hidden: true,
    onclick: () => panel.open(),
  });
  logout.before(button);
  // Who is signed in shows in `me`: ask again whenever it changes.
  const check = async () => {
    button.hidden = true;
    if (panel.dialog.open) panel.dialog.close();
    if (me.textContent.trim()) button.hidden = !(await isAdmin());
  };
  new MutationObserver(check).observe(me, { childList: true, characterData: true, subtree: true });
  check();
  return panel;
}
