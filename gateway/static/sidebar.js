// The sidebar: the user's groups and the form that creates one.

import { avatar, el, formatTime, truncate } from './dom.js';

// Pre-selected in the roster picker: a small, varied team.
const DEFAULT_ROSTER = ['steve', 'linus', 'martin'];

export class Sidebar {
  /**
   * `onSelect(groupId)` opens a group; `onCreate(name, roster)` creates one
   * and resolves to the new group (or throws an ApiError).
   */
  constructor({ list, form, onSelect, onCreate }) {
    this.list = list;
    this.form = form;
    this.onSelect = onSelect;
    this.onCreate = onCreate;
    this.personas = [];
    this.nameInput = form.querySelector('[data-testid="new-group-name"]');
    this.picker = form.querySelector('[data-testid="roster-picker"]');
    this.error = form.querySelector('[data-testid="new-group-error"]');
    this.submit = form.querySelector('[data-testid="new-group-submit"]');
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      this.create();
    });
    this.picker.addEventListener('change', () => this.validate());
    this.nameInput.addEventListener('input', () => this.validate());
  }

  setPersonas(personas) {
    // Sorted by name, as every persona picker is.
    this.personas = [...personas].sort((a, b) => a.name.localeCompare(b.name));
    this.picker.replaceChildren(
      ...this.personas.map((p) =>
        el(
          'label',
          { class: 'roster-option', testid: 'roster-option', dataset: { vp: p.id } },
          el('input', {
            type: 'checkbox',
            name: 'roster',
            value: p.id,
            checked: DEFAULT_ROSTER.includes(p.id),
          }),
          avatar(p.id, p.name, 'small'),
          el(
            'span',
            { class: 'roster-text' },
            el('span', { class: 'roster-name', text: p.name }),
            el('span', { class: 'roster-role', text: p.role || '' }),
          ),
        ),
      ),
    );
    this.validate();
  }

  selectedRoster() {
    return [...this.picker.querySelectorAll('input[name="roster"]:checked')].map((i) => i.value);
  }

  validate() {
    const ok = this.nameInput.value.trim() && this.selectedRoster().length > 0;
    this.submit.disabled = !ok;
    return ok;
  }

  async create() {
    if (!this.validate()) return;
    this.error.textContent = '';
    this.submit.disabled = true;
    try {
      await this.onCreate(this.nameInput.value.trim(), this.selectedRoster());
      this.nameInput.value = '';
      this.form.closest('details')?.removeAttribute('open');
    } catch (err) {
      this.error.textContent = err.message;
    } finally {
      this.validate();
    }
  }

  /**
   * Render the group list; `personaName(id)` labels the roster line and the
   * last message's author; `summaries` (group id → {unread, lastMessage})
   * adds each group's last message and unread count when known.
   */
  render(groups, activeId, personaName, summaries = new Map()) {
    if (!groups.length) {
      this.list.replaceChildren(
        el('li', { class: 'group-empty', text: 'No groups yet: create one below.' }),
      );
      return;
    }
    this.list.replaceChildren(
      ...groups.map((group) =>
        el(
          'li',
          {},
          el(
            'button',
            {
              type: 'button',
              class: 'group-item',
              testid: 'group-item',
              dataset: { groupId: group.id },
              'aria-current': group.id === activeId ? 'true' : 'false',
              onclick: () => this.onSelect(group.id),
            },
            el(
              'span',
              { class: 'group-line' },
              el('span', { class: 'group-name', text: group.name }),
              mentionBadge(summaries.get(group.id)),
              unreadBadge(summaries.get(group.id)),
            ),
            lastLine(summaries.get(group.id), personaName) ||
              el('span', {
                class: 'group-roster',
                text: (group.roster || []).map(personaName).join(', ') || 'no VPs',
              }),
          ),
        ),
      ),
    );
  }
}

/** The unread count of a group, or nothing when all is read. */
function unreadBadge(summary) {
  const unread = summary?.unread || 0;
  if (!unread) return null;
  return el('span', {
    class: 'unread',
    testid: 'unread',
    'aria-label': `${unread} unread`,
    text: unread > 999 ? '999+' : String(unread),
  });
}

/** "@2" when unread messages of a group mention the user, or nothing. */
function mentionBadge(summary) {
  const mentions = summary?.mentions || 0;
  if (!mentions) return null;
  return el('span', {
    class: 'mention-badge',
    testid: 'mention-badge',
    'aria-label': `${mentions} unread mention${mentions === 1 ? '' : 's'}`,
    text: `@${mentions > 999 ? '999+' : mentions}`,
  });
}

/** "Linus: the last thing said" with its time, or null when the group is empty. */
function lastLine(summary, personaName) {
  const last = summary?.lastMessage;
  if (!last) return null;
  const who = last.role === 'assistant' ? personaName(last.author) : last.author;
  const text = truncate(last.text.replace(/\s+/g, ' '), 80);
  return el(
    'span',
    { class: 'group-last', testid: 'group-last' },
    el('span', { class: 'group-last-text', text: `${who}: ${text}` }),
    el('time', { class: 'group-last-time', text: formatTime(last.ts) }),
  );
}

// -- narrow screens: the sidebar is a drawer over the chat ----------------------
const byId = (id) => document.getElementById(id);

export function openSidebar() {
  document.body.classList.add('sidebar-open');
  byId('scrim').hidden = false;
}

export function closeSidebar() {
  document.body.classList.remove('sidebar-open');
  byId('scrim').hidden = true;
}

/** Wire the drawer's open and close buttons and its scrim. */
export function mountDrawer() {
  byId('open-sidebar').addEventListener('click', openSidebar);
  byId('close-sidebar').addEventListener('click', closeSidebar);
  byId('scrim').addEventListener('click', closeSidebar);
}
