// The group dialog: its VPs (add, remove), its name, and deleting it.

import { api } from './api.js';
import { avatar, el } from './dom.js';

export class GroupDialog {
  /**
   * `personas()` lists every persona; `onChanged(group)` receives the group
   * after a change (or null after a delete, with the deleted id).
   */
  constructor({ dialog, personas, persona, onChanged, onDeleted }) {
    this.dialog = dialog;
    this.personas = personas;
    this.persona = persona;
    this.onChanged = onChanged;
    this.onDeleted = onDeleted;
    this.group = null;
    this.q = (id) => dialog.querySelector(`#${id}`);
    this.q('rename-button').addEventListener('click', () => this.rename());
    this.q('rename-input').addEventListener('keydown', (event) => {
      if (event.key === 'Enter') {
        event.preventDefault();
        this.rename();
      }
    });
    this.q('add-vp-button').addEventListener('click', () => this.addVp());
    this.q('delete-group').addEventListener('click', () => this.remove());
  }

  open(group) {
    this.group = group;
    this.q('rename-input').value = group.name;
    this.q('group-dialog-error').textContent = '';
    this.render();
    this.dialog.showModal();
  }

  render() {
    const group = this.group;
    const roster = group.roster || [];
    this.q('roster-list').replaceChildren(
      ...roster.map((id) => {
        const p = this.persona(id);
        return el(
          'li',
          { class: 'roster-row', dataset: { vp: id } },
          avatar(id, p.name, 'small'),
          el('span', { class: 'roster-name', text: p.name }),
          el('span', { class: 'roster-role', text: p.role || '' }),
          id === (group.defaultVpId ?? group.default_vp)
            ? el('span', { class: 'tag', text: 'default' })
            : null,
          el('button', {
            type: 'button',
            class: 'quiet',
            testid: 'remove-vp',
            dataset: { vp: id },
            'aria-label': `Remove ${p.name}`,
            text: 'Remove',
            disabled: roster.length <= 1,
            onclick: () => this.run(() => api.removeVp(group.id, id)),
          }),
        );
      }),
    );
    const others = this.personas().filter((p) => !roster.includes(p.id));
    this.q('add-vp-select').replaceChildren(
      ...others.map((p) => el('option', { value: p.id, text: `${p.name} · ${p.role || ''}` })),
    );
    this.q('add-vp-select').disabled = !others.length;
    this.q('add-vp-button').disabled = !others.length;
  }

  async run(call) {
    this.q('group-dialog-error').textContent = '';
    try {
      const updated = await call();
      // Servers answer a change with the group; fall back to a re-read if not.
      if (updated && updated.id) this.group = updated;
      this.render();
      await this.onChanged(this.group, !(updated && updated.id));
    } catch (err) {
      this.q('group-dialog-error').textContent = err.message;
    }
  }

  rename() {
    const name = this.q('rename-input').value.trim();
    if (!name || name === this.group.name) return;
    this.run(() => api.renameGroup(this.group.id, name));
  }

  addVp() {
    const vpId = this.q('add-vp-select').value;
    if (vpId) this.run(() => api.addVp(this.group.id, vpId));
  }

  async remove() {
    const group = this.group;
    if (!window.confirm(`Delete “${group.name}” and all its messages?`)) return;
    try {
      await api.deleteGroup(group.id);
      this.dialog.close();
      this.onDeleted(group.id);
    } catch (err) {
      this.q('group-dialog-error').textContent = err.message;
    }
  }

  /** Refresh the open dialog when the group changed elsewhere. */
  update(group) {
    if (this.dialog.open && this.group && this.group.id === group.id) {
      this.group = group;
      this.render();
    }
  }
}
