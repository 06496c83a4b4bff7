// Invite links: the "make an invite" dialog (expiry, uses, optional group),
// which shows the link made with a Copy button. `openInviteDialog` is the
// one entry: the members dialog calls it for its group, and an admin panel
// may call it without one (then the group is chosen in the dialog, or none:
// a link for a new account only). The rules of who may make a link are the
// server's (gateway/invites.py); a refusal shows in the dialog.
//
// The link's secret is shown once, here: the server keeps only its hash.

import { ApiError, request } from './api.js';
import { el } from './dom.js';

const EXPIRIES = [
  ['1 hour', 3600],
  ['1 day', 86400],
  ['7 days', 7 * 86400],
  ['30 days', 30 * 86400],
];
const DEFAULT_EXPIRY = 7 * 86400;
const MAX_USES = 1000;

let built = null;

/** May `me` (GET /api/me) make a link to `group`? Administrators always; its owner when allowed. */
export function mayInvite(me, group) {
  if (!me || !group) return false;
  return me.role === 'admin' || (Boolean(me.ownerInvites) && group.owner === me.username);
}

function build() {
  const expiry = el(
    'select',
    { name: 'expiresIn', testid: 'invite-expiry' },
    EXPIRIES.map(([label, seconds]) =>
      el('option', { value: String(seconds), text: label, selected: seconds === DEFAULT_EXPIRY }),
    ),
  );
  const uses = el('input', {
    name: 'maxUses',
    type: 'number',
    min: '1',
    max: String(MAX_USES),
    value: '1',
    required: true,
    testid: 'invite-uses',
  });
  const group = el('select', { name: 'groupId', testid: 'invite-group' });
  const groupField = el('label', { class: 'field' }, el('span', { text: 'Group' }), group);
  const fixedGroup = el('p', { class: 'panel-hint', testid: 'invite-fixed-group' });
  const error = el('p', { class: 'form-error', testid: 'invite-error', role: 'alert' });
  const make = el('button', { type: 'submit', class: 'primary', testid: 'invite-make', text: 'Make link' });
  const link = el('input', { readonly: true, class: 'invite-link', testid: 'invite-link', 'aria-label': 'Invite link' });
  const copy = el('button', { type: 'button', testid: 'invite-copy', text: 'Copy' });
  const copied = el('span', { class: 'panel-hint', testid: 'invite-copied', role: 'status' });
  const result = el(
    'div',
    { class: 'invite-result', testid: 'invite-result', hidden: true },
    el('p', { class: 'panel-hint', text: 'Send this link to the person you invite. It is shown only now.' }),
    el('div', { class: 'inline-field' }, link, copy),
    copied,
  );
  const form = el(
    'form',
    { class: 'group-dialog-form invite-form-dialog', testid: 'invite-make-form' },
    el('h2', { text: 'Make an invite link' }),
    fixedGroup,
    groupField,
    el('label', { class: 'field' }, el('span', { text: 'Expires after' }), expiry),
    el('label', { class: 'field' }, el('span', { text: 'Uses' }), uses),
    error,
    result,
    el(
      'footer',
      { class: 'dialog-foot' },
      el('button', { type: 'button', testid: 'invite-close', text: 'Done', onclick: () => dialog.close() }),
      make,
    ),
  );
  const dialog = el(
    'dialog',
    { class: 'group-dialog invite-dialog', testid: 'invite-dialog', 'aria-label': 'Make an invite link' },
    form,
  );
  document.body.append(dialog);
  const state = { groupId: null };

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    error.textContent = '';
    copied.textContent = '';
    const body = { expiresIn: Number(expiry.value), maxUses: Number(uses.value) };
    const groupId = state.groupId || group.value || null;
    make.disabled = true;
    try {
      // A group's own route serves its owner and administrators alike; a
      // link without a group is the administrators' route.
      const made = groupId
        ? await request('POST', `/api/groups/${encodeURIComponent(groupId)}/invites`, body)
        : await request('POST', '/api/admin/invites', body);
      link.value = made.url;
      result.hidden = false;
      link.focus();
      link.select();
    } catch (err) {
      error.textContent = err instanceof ApiError ? err.message : String(err);
    } finally {
      make.disabled = false;
    }
  });
  copy.addEventListener('click', async () => {
    link.select();
    try {
      await navigator.clipboard.writeText(link.value);
    } catch {
      // Without clipboard access (an insecure origin): the selection copies.
      document.execCommand('copy');
    }
    copied.textContent = 'Copied.';
  });

  return { dialog, group, groupField, fixedGroup, result, link, error, copied, uses, expiry, state };
}

/** The caller's groups, for the group picker (an administrator may pick any of theirs). */
async function fillGroups(select) {
  select.replaceChildren(el('option', { value: '', text: 'None: a new account only' }));
  try {
    const { groups } = await request('GET', '/api/groups');
    for (const g of groups || []) select.append(el('option', { value: g.id, text: g.name }));
  } catch {
    // The link without a group still works.
  }
}

/**
 * Open the "make an invite" dialog. With `groupId` (and its `groupName`) the
 * link joins that group; without, the dialog offers the caller's groups and
 * "none".
 */
export async function openInviteDialog({ groupId = null, groupName = '' } = {}) {
  if (!built) built = build();
  const parts = built;
  parts.state.groupId = groupId;
  parts.error.textContent = '';
  parts.copied.textContent = '';
  parts.result.hidden = true;
  parts.link.value = '';
  parts.uses.value = '1';
  parts.expiry.value = String(DEFAULT_EXPIRY);
  parts.groupField.hidden = Boolean(groupId);
  parts.fixedGroup.hidden = !groupId;
  parts.fixedGroup.textContent = groupId ? `The link joins “${groupName || groupId}”.` : '';
  if (!groupId) await fillGroups(parts.group);
  parts.dialog.showModal();
  return parts.dialog;
}
