// Logging in and out: the login view, its form and the logout button.

import { api } from './api.js';

const $ = (id) => document.getElementById(id);

/** Show the login view (with `message` under the form) instead of the app. */
export function showLogin(message = '') {
  $('app-view').hidden = true;
  $('login-view').hidden = false;
  $('login-view').querySelector('[data-testid="login-error"]').textContent = message;
  $('login-view').querySelector('[data-testid="login-username"]').focus();
}

/**
 * Offer the sign-in provider the server names (GET /api/auth/providers): a
 * "Sign in with ..." link above the password form, or instead of it.
 */
async function offerProviders() {
  let providers;
  try {
    providers = await fetch('/api/auth/providers', { headers: { Accept: 'application/json' } }).then((r) =>
      r.ok ? r.json() : null,
    );
  } catch {
    return; // the password form still works
  }
  if (!providers || !providers.oidc) return;
  const form = $('login-view').querySelector('form');
  const link = form.querySelector('[data-testid="login-oidc"]');
  link.href = providers.oidc.url;
  link.textContent = `Sign in with ${providers.oidc.name}`;
  link.hidden = false;
  if (!providers.password) {
    for (const part of form.querySelectorAll('.field, [data-testid="login-submit"], .login-hint')) {
      part.hidden = true;
    }
  }
}

/**
 * Wire the form and the logout button: `onLogin(username)` enters the app
 * (and may throw an ApiError, shown under the form); `onLogout()` leaves it.
 */
export function mountLogin({ onLogin, onLogout }) {
  offerProviders();
  $('login-view')
    .querySelector('form')
    .addEventListener('submit', async (event) => {
      event.preventDefault();
      const form = event.currentTarget;
      const error = form.querySelector('[data-testid="login-error"]');
      const button = form.querySelector('[data-testid="login-submit"]');
      const username = form.username.value.trim();
      const password = form.password.value;
      if (!username || !password) {
        error.textContent = 'Enter your username and password.';
        return;
      }
      error.textContent = '';
      button.disabled = true;
      try {
        const session = await api.login(username, password);
        form.password.value = '';
        await onLogin(session?.username || username);
      } catch (err) {
        error.textContent = err.status === 401 ? 'Wrong username or password.' : err.message;
      } finally {
        button.disabled = false;
      }
    });

  $('logout').addEventListener('click', async () => {
    try {
      await api.logout();
    } catch {
      // Logging out of a session that is already gone is still logging out.
    }
    onLogout();
  });
}
