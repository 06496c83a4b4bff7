// The members panel: who is in the group, who owns it, who is online; the
// owner invites by username, removes members and hands the group over, and
// anyone may leave. Changes go over HTTP; what others change arrives live
// (group_update and presence frames) through `update` and `presence`.
// "Invite link" (invites.js) shows for administrators, and for the owner
// when the server lets owners make links (GET /api/me says which).

import { api, request } from './api.js';
import { el } from './dom.js';
import { mayInvite, openInviteDialog } from './invites.js';

export class MembersPanel {
  /**
   * `me()` is the logged-in username; `onLeft(groupId)` runs after leaving.
   */
  constructor({ dialog, button, me, onLeft }) {
    this.dialog = dialog;
    this.button = button;
    this.me = me;
    this.onLeft = onLeft;
    this.group = null;
    this.online = new Map(); // groupId -> Set of usernames
    this.names = {}; // username -> display name, of the open group's members who set one
    this.build();
    button.addEventListener('click', () => this.open());
  }

  build() {
    this.list = el('ul', { class: 'member-list', testid: 'member-list' });
    this.error = el('p', { class: 'form-error', testid: 'members-error', role: 'alert' });
    this.inviteInput = el('input', {
      name: 'username',
      testid: 'invite-input',
      placeholder: 'username',
      'aria-label': 'Username to invite',
      maxlength: '200',
      autocomplete: 'off',
    });
    this.inviteForm = el(
      'form',
      { class: 'inline-field invite-form', testid: 'invite-form' },
      this.inviteInput,
      el('button', { type: 'submit', testid: 'invite-button', text: 'Invite' }),
    );
    this.inviteForm.addEventListener('submit', (event) => {
      event.preventDefault();
      this.invite();
    });
    this.leaveButton = el('button', {
      type: 'button',
      class: 'danger-quiet',
      testid: 'leave-group',
      text: 'Leave group',
      onclick: () => this.leave(),
    });
    this.hint = el('p', { class: 'panel-hint', testid: 'members-hint' });
    this.meInfo = null; // GET /api/me, read when the dialog opens
    this.linkButton = el('button', {
      type: 'button',
      class: 'quiet',
      testid: 'invite-link-button',
      text: 'Invite link…',
      hidden: true,
      onclick: () => openInviteDialog({ groupId: this.group.id, groupName: this.group.name }),
    });
    const form = el(
      'form',
      { method: 'dialog', class: 'group-dialog-form' },
      el('h2', { text: 'People' }),
      this.list,
      this.inviteForm,
      this.linkButton,
      this.hint,
      this.error,
      el(
        'footer',
        { class: 'dialog-foot' },
        this.leaveButton,
        el('button', { value: 'close', class: 'primary', testid: 'members-close', text: 'Done' }),
      ),
    );
    this.dialog.replaceChildren(form);
  }

  /** The group shown in the chat changed (selected, or changed by anyone). */
  update(group) {
    if (!group) {
      this.group = null;
      this.button.disabled = true;
      this.button.textContent = 'People';
      return;
    }
    if (this.group && this.group.id !== group.id && this.dialog.open) this.dialog.close();
    this.group = group;
    this.button.disabled = false;
    this.renderButton();
    if (this.dialog.open) this.render();
  }

  /** Who of the group's members is online (from `subscribed` or a `presence` frame). */
  presence(groupId, online) {
    this.online.set(groupId, new Set(online || []));
    if (this.group && this.group.id === groupId) {
      this.renderButton();
      if (this.dialog.open) this.render();
    }
  }

  isOwner() {
    return Boolean(this.group) && this.group.owner === this.me();
  }

  renderButton() {
    const online = this.online.get(this.group.id) || new Set();
    const count = (this.group.members || []).filter((m) => online.has(m)).length;
    this.button.textContent = `People · ${count} online`;
    this.button.dataset.online = String(count);
  }

  open() {
    if (!this.group) return;
    this.error.textContent = '';
    this.names = {};
    this.render();
    this.dialog.showModal();
    if (this.isOwner()) this.inviteInput.focus();
    this.loadNames(this.group.id);
    this.loadMe();
  }

  /** Who the caller is (role, whether owners make links): decides the "Invite link" button. */
  async loadMe() {
    try {
      this.meInfo = await api.me();
    } catch {
      this.meInfo = null;
    }
    if (this.dialog.open) this.render();
  }

  /** Display names (PATCH /api/me) beside usernames; the list works without them. */
  async loadNames(groupId) {
    try {
      const { names } = await request('GET', `/api/groups/${encodeURIComponent(groupId)}/display-names`);
      if (this.group?.id !== groupId) return;
      this.names = names || {};
      if (this.dialog.open) this.render();
    } catch {
      // Names are a courtesy: usernames stay.
    }
  }

  render() {
    const group = this.group;
    const owner = this.isOwner();
    const online = this.online.get(group.id) || new Set();
    const me = this.me();
    this.list.replaceChildren(
      ...(group.members || []).map((name) => {
        const isOwner = name === group.owner;
        const here = online.has(name);
        return el(
          'li',
          { class: 'member-row', testid: 'member', dataset: { user: name, online: String(here) } },
          el('span', {
            class: `online-dot${here ? ' on' : ''}`,
            testid: 'online-dot',
            title: here ? 'online' : 'offline',
            'aria-label': here ? 'online' : 'offline',
          }),
          el('span', {
            class: 'member-name',
            text: `${this.names[name] ? `${this.names[name]} · ${name}` : name}${name === me ? ' (you)' : ''}`,
          }),
          el('span', { class: `tag${isOwner ? ' owner' : ''}`, testid: 'member-role', text: isOwner ? 'owner' : 'member' }),
          owner && !isOwner
            ? el('button', {
                type: 'button',
                class: 'quiet',
                testid: 'make-owner',
                text: 'Make owner',
                onclick: () => this.transfer(name),
              })
            : null,
          owner && !isOwner
            ? el('button', {
                type: 'button',
                class: 'quiet danger-text',
                testid: 'remove-member',
                'aria-label': `Remove ${name}`,
                text: 'Remove',
                onclick: () => this.removeMember(name),
              })
            : null,
        );
      }),
    );
    this.inviteForm.hidden = !owner;
    this.linkButton.hidden = !mayInvite(this.meInfo, group);
    const others = (group.members || []).length > 1;
    this.leaveButton.disabled = owner && others;
    this.hint.textContent = owner
      ? others
        ? 'You own this group: make someone else the owner before you leave.'
        : 'You own this group. Invite people by their username.'
      : `${group.owner} owns this group and manages its members.`;
  }

  async run(call) {
    this.error.textContent = '';
    try {
      const updated = await call();
      if (updated && updated.id) this.update(updated);
      return true;
    } catch (err) {
      this.error.textContent = err.message;
      return false;
    }
  }

  async invite() {
    const username = this.inviteInput.value.trim();
    if (!username) return;
    if (await this.run(() => api.invite(this.group.id, username))) this.inviteInput.value = '';
  }

  removeMember(name) {
    if (!window.confirm(`Remove ${name} from “${this.group.name}”?`)) return;
    this.run(() => api.removeMember(this.group.id, name));
  }

  transfer(name) {
    if (!window.confirm(`Make ${name} the owner of “${this.group.name}”? You stay a member.`)) return;
    this.run(() => api.transferOwnership(this.group.id, name));
  }

  async leave() {
    const group = this.group;
    if (!window.confirm(`Leave “${group.name}”?`)) return;
    if (await this.run(() => api.leaveGroup(group.id))) {
      this.dialog.close();
      this.onLeft(group.id);
    }
  }
}
