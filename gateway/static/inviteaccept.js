// Following an invite link (/invite/<token>): a mode of the login page.
//
// The server answered the page only because the link was valid when it was
// asked for (gateway/invites_http.py); this module asks again what it is for
// (POST /api/invites/lookup) and then:
// - someone signed in joins the link's group (POST /api/invites/join);
// - anyone else sets a username, a display name and a password (POST
//   /api/invites/accept), or signs in with the identity provider, the link
//   carried through it (/api/auth/oidc/login?invite=), or logs in to an
//   account they have and joins;
// and lands in the group: every way ends by loading /#g=<group id>.

import { ApiError, api, request } from './api.js';
import { el } from './dom.js';

const PATH = '/invite/';
const $ = (id) => document.getElementById(id);

/** Where the app opens once the invite is used. */
function land(groupId) {
  window.location.replace(groupId ? `/#g=${encodeURIComponent(groupId)}` : '/');
}

function card(...children) {
  const view = $('login-view');
  for (const child of view.children) child.hidden = true;
  const node = el('section', { class: 'login-card invite-card', testid: 'invite-card' }, el('h1', { class: 'brand', text: 'Yeaft' }), ...children);
  view.append(node);
  $('app-view').hidden = true;
  view.hidden = false;
  return node;
}

function message(text) {
  card(
    el('p', { class: 'login-lede', testid: 'invite-message', role: 'alert', text }),
    el('a', { class: 'button primary wide', href: '/', text: 'Go to Yeaft' }),
  );
}

async function providers() {
  try {
    return await request('GET', '/api/auth/providers');
  } catch {
    return { oidc: null, password: true };
  }
}

function field(label, attrs) {
  const input = el('input', { required: true, ...attrs });
  return [el('label', { class: 'field' }, el('span', { text: label }), input), input];
}

/** The form of someone not signed in: a new account, or the one they have. */
function acceptForm(token, preview, offered) {
  const [userField, username] = field('Username', { name: 'username', testid: 'invite-username', autocomplete: 'username', maxlength: '40', autofocus: true });
  const [nameField, displayName] = field('Display name (optional)', { name: 'displayName', testid: 'invite-display-name', maxlength: '80', required: false });
  const [passField, password] = field('Password', { name: 'password', type: 'password', testid: 'invite-password', autocomplete: 'new-password' });
  const [againField, again] = field('Password again', { name: 'again', type: 'password', testid: 'invite-password-again', autocomplete: 'new-password' });
  const error = el('p', { class: 'form-error', testid: 'invite-accept-error', role: 'alert' });
  const submit = el('button', { type: 'submit', class: 'primary wide', testid: 'invite-submit', text: 'Create account and join' });
  const toggle = el('button', { type: 'button', class: 'quiet', testid: 'invite-have-account', text: 'I have an account: log in' });
  let haveAccount = false;
  const setMode = (have) => {
    haveAccount = have;
    nameField.hidden = have;
    againField.hidden = have;
    again.required = !have;
    password.autocomplete = have ? 'current-password' : 'new-password';
    submit.textContent = have ? (preview.groupId ? 'Log in and join' : 'Log in') : preview.groupId ? 'Create account and join' : 'Create account';
    toggle.textContent = have ? 'I am new here: create an account' : 'I have an account: log in';
    error.textContent = '';
  };
  toggle.addEventListener('click', () => setMode(!haveAccount));
  const form = el('form', { testid: 'invite-accept-form', novalidate: true }, userField, nameField, passField, againField, error, submit, el('p', { class: 'login-hint' }, toggle));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    error.textContent = '';
    if (!username.value.trim() || !password.value) {
      error.textContent = 'Enter a username and a password.';
      return;
    }
    if (!haveAccount && password.value !== again.value) {
      error.textContent = 'The two passwords differ.';
      return;
    }
    submit.disabled = true;
    try {
      if (haveAccount) {
        await api.login(username.value.trim(), password.value);
        if (preview.groupId) await request('POST', '/api/invites/join', { token });
        land(preview.groupId);
      } else {
        const done = await request('POST', '/api/invites/accept', {
          token,
          username: username.value.trim(),
          password: password.value,
          displayName: displayName.value.trim() || null,
        });
        land(done.groupId);
      }
    } catch (err) {
      error.textContent = err instanceof ApiError && err.status === 401 ? 'Wrong username or password.' : err.message;
      submit.disabled = false;
    }
  });
  setMode(false);
  const parts = [];
  if (offered.oidc) {
    parts.push(
      el('a', {
        class: 'button primary wide',
        testid: 'invite-oidc',
        href: `${offered.oidc.url}?invite=${encodeURIComponent(token)}`,
        text: `Sign in with ${offered.oidc.name}`,
      }),
    );
  }
  if (offered.password || !offered.oidc) parts.push(form);
  return parts;
}

async function follow(token) {
  let preview;
  try {
    preview = await request('POST', '/api/invites/lookup', { token });
  } catch (err) {
    message(err.message.charAt(0).toUpperCase() + err.message.slice(1) + '.');
    return;
  }
  let me = null;
  try {
    me = await api.me();
  } catch {
    me = null; // not signed in
  }
  const where = preview.groupName ? `to join “${preview.groupName}”` : 'to Yeaft';
  if (me) {
    if (!preview.groupId) {
      message(`You are signed in as ${me.username}: this link is for making a new account.`);
      return;
    }
    try {
      await request('POST', '/api/invites/join', { token });
      land(preview.groupId);
    } catch (err) {
      message(err.message);
    }
    return;
  }
  const offered = await providers();
  card(
    el('p', { class: 'login-lede', testid: 'invite-lede', text: `${preview.invitedBy} invited you ${where}.` }),
    ...acceptForm(token, preview, offered),
  );
}

/** On an invite link's page, take over from the login (and return true); elsewhere false. */
export function acceptingInvite() {
  const path = window.location.pathname;
  if (!path.startsWith(PATH)) return false;
  follow(decodeURIComponent(path.slice(PATH.length)));
  return true;
}
