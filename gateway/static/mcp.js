// The MCP servers VPs can use: their state and tools, from GET /api/mcp/servers.
//
// `renderMcpServers(container)` fills any element with the list: the admin
// panel's "MCP servers" tab (adminpanel.js), and, wired by `mountMcp()`, the
// settings panel's `#settings-extra` (rendered each time its dialog opens). Nothing here holds a secret: the listing
// carries only the names of a server's env variables or headers.
//
// Administrators (`canEdit` in the listing) also get a form to add a server
// (stdio: command, arguments, env; or streamable HTTP: URL, headers) and a
// button to remove one. In the settings panel each server has a box saying
// whether the group uses it; the panel saves the boxes as `mcpServers`.

import { request } from './api.js';
import { clear, el } from './dom.js';

const STATE_TEXT = {
  idle: 'not started',
  connecting: 'starting',
  ready: 'ready',
  failed: 'unavailable',
  closed: 'off',
};

async function fetchServers(connect) {
  const response = await fetch(`/api/mcp/servers${connect ? '?connect=true' : ''}`, {
    credentials: 'same-origin',
    headers: { Accept: 'application/json' },
  });
  if (!response.ok) throw new Error(`the MCP servers could not be listed (HTTP ${response.status})`);
  const data = await response.json();
  return { servers: Array.isArray(data.servers) ? data.servers : [], canEdit: Boolean(data.canEdit) };
}

/** Lines of `text` as an object: `KEY=value` (env) or `Name: value` (headers). */
function pairs(text, separator) {
  const out = {};
  for (const line of text.split('\n')) {
    const at = line.indexOf(separator);
    if (at > 0) out[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return out;
}

function addForm(container) {
  const input = (name, placeholder, tag = 'input') =>
    el(tag, { name, placeholder, testid: `mcp-add-${name}`, autocomplete: 'off', rows: '2' });
  const name = input('name', 'name (letters, digits, -)');
  const kind = el(
    'select',
    { name: 'kind', testid: 'mcp-add-kind' },
    el('option', { value: 'stdio', text: 'stdio (a local command)' }),
    el('option', { value: 'http', text: 'streamable HTTP (a URL)' }),
  );
  const command = input('command', 'command, e.g. npx or /usr/bin/python3');
  const args = input('args', 'arguments, one per line', 'textarea');
  const env = input('env', 'environment, KEY=value per line (kept secret)', 'textarea');
  const url = input('url', 'http://127.0.0.1:9000/mcp');
  const headers = input('headers', 'headers, Name: value per line (kept secret)', 'textarea');
  const error = el('p', { class: 'form-error', testid: 'mcp-add-error', role: 'alert' });
  const stdioPart = el('div', { class: 'mcp-add-stdio' }, command, args, env);
  const httpPart = el('div', { class: 'mcp-add-http', hidden: true }, url, headers);
  kind.addEventListener('change', () => {
    stdioPart.hidden = kind.value !== 'stdio';
    httpPart.hidden = kind.value === 'stdio';
  });
  const add = async () => {
    error.textContent = '';
    const body = { name: name.value.trim() };
    if (kind.value === 'stdio') {
      body.command = command.value.trim();
      body.args = args.value.split('\n').map((a) => a.trim()).filter(Boolean);
      body.env = pairs(env.value, '=');
    } else {
      body.url = url.value.trim();
      body.headers = pairs(headers.value, ':');
    }
    try {
      await request('POST', '/api/mcp/servers', body);
      await renderMcpServers(container, { connect: true });
    } catch (err) {
      error.textContent = err.message;
    }
  };
  // Not a <form>: in the settings panel this sits inside the settings form.
  const part = el(
    'div',
    { class: 'mcp-add', testid: 'mcp-add' },
    el('h4', { text: 'Add an MCP server' }),
    name,
    kind,
    stdioPart,
    httpPart,
    error,
    el('button', { type: 'button', testid: 'mcp-add-submit', text: 'Add server', onclick: add }),
  );
  part.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && event.target.tagName === 'INPUT') event.preventDefault();
  });
  return part;
}

function serverItem(server, { container, canEdit, choice }) {
  const tools = server.tools || [];
  const head = el(
    'div',
    { class: 'mcp-server-head' },
    el('strong', { class: 'mcp-server-name', text: server.name }),
    el('span', { class: 'mcp-transport', text: server.transport }),
    el('span', {
      class: 'mcp-state',
      dataset: { state: server.state },
      testid: 'mcp-state',
      text: STATE_TEXT[server.state] || server.state,
    }),
  );
  const lines = [head];
  if (choice) {
    const box = el('input', { type: 'checkbox', testid: 'mcp-use', dataset: { mcpUse: server.name } });
    box.checked = choice.servers.includes('*') || choice.servers.includes(server.name);
    box.disabled = !choice.owner;
    head.prepend(box);
  }
  if (canEdit) {
    const failed = el('p', { class: 'form-error', role: 'alert' });
    const remove = async () => {
      try {
        await request('DELETE', `/api/mcp/servers/${encodeURIComponent(server.name)}`);
        await renderMcpServers(container);
      } catch (err) {
        failed.textContent = err.message;
      }
    };
    const button = el('button', { type: 'button', class: 'quiet', testid: 'mcp-remove', text: 'Remove' });
    button.addEventListener('click', remove);
    head.append(button);
    lines.push(failed);
  }
  if (server.target) lines.push(el('code', { class: 'mcp-target', text: server.target }));
  if (server.secretKeys && server.secretKeys.length) {
    lines.push(el('small', { class: 'mcp-secrets', text: `secret: ${server.secretKeys.join(', ')}` }));
  }
  if (server.error) lines.push(el('p', { class: 'mcp-error', testid: 'mcp-error', text: server.error }));
  if (tools.length) {
    lines.push(
      el(
        'details',
        { class: 'mcp-tools' },
        el('summary', { text: `${tools.length} tool${tools.length === 1 ? '' : 's'}` }),
        el(
          'ul',
          {},
          tools.map((tool) =>
            el(
              'li',
              { testid: 'mcp-tool' },
              el('code', { text: tool.name }),
              tool.description ? ` — ${tool.description}` : '',
            ),
          ),
        ),
      ),
    );
  }
  return el('li', { class: 'mcp-server', testid: 'mcp-server', dataset: { name: server.name } }, lines);
}

/** Render the MCP servers into `container`; `connect` starts the ones not started yet. */
export async function renderMcpServers(container, { connect = false } = {}) {
  container.setAttribute('aria-busy', 'true');
  let body;
  let canEdit = false;
  // In the settings panel, the group's own choice of servers (see settings.js).
  const form = container.closest('form');
  const choice = form && form.dataset.mcpServers
    ? { servers: JSON.parse(form.dataset.mcpServers), owner: Boolean(form.dataset.owner) }
    : null;
  try {
    const listed = await fetchServers(connect);
    const servers = listed.servers;
    canEdit = listed.canEdit;
    const item = (server) => serverItem(server, { container, canEdit, choice });
    body = servers.length
      ? el('ul', { class: 'mcp-list', testid: 'mcp-list' }, servers.map(item))
      : el('p', {
          class: 'mcp-empty',
          testid: 'mcp-empty',
          text: 'No MCP servers are configured (mcp.json in the data directory).',
        });
  } catch (err) {
    body = el('p', { class: 'form-error', text: err.message });
  }
  const refresh = el('button', {
    type: 'button',
    class: 'quiet',
    testid: 'mcp-refresh',
    text: 'Start and list tools',
    onclick: () => renderMcpServers(container, { connect: true }),
  });
  clear(container);
  const title = el('h3', { class: 'section-title', text: 'MCP tools' });
  const hint = choice
    ? el('p', { class: 'panel-hint', text: 'Checked servers are used by this group’s VPs.' })
    : '';
  container.append(title, hint, body, refresh, canEdit ? addForm(container) : '');
  container.removeAttribute('aria-busy');
  followStarting(container);
}

const FOLLOW_MS = 1000;
const FOLLOW_TIMES = 90;

/** While a listed server is starting (on a VP host), keep its state and error up to date. */
async function followStarting(container, times = FOLLOW_TIMES) {
  const starting = () => container.querySelector('.mcp-state[data-state="connecting"]');
  if (container.dataset.following || !starting()) return;
  container.dataset.following = 'on';
  try {
    for (let i = 0; i < times && container.isConnected && starting(); i += 1) {
      await new Promise((resolve) => setTimeout(resolve, FOLLOW_MS));
      let listed;
      try {
        listed = await fetchServers(false);
      } catch {
        return;
      }
      for (const server of listed.servers) updateState(container, server);
    }
  } finally {
    delete container.dataset.following;
  }
}

/** Show `server`'s state and error in its item of `container`, leaving the rest as it is. */
function updateState(container, server) {
  const item = [...container.querySelectorAll('.mcp-server')].find(
    (node) => node.dataset.name === server.name,
  );
  if (!item) return;
  const state = item.querySelector('.mcp-state');
  state.dataset.state = server.state;
  state.textContent = STATE_TEXT[server.state] || server.state;
  let error = item.querySelector('.mcp-error');
  if (server.error && !error) {
    error = el('p', { class: 'mcp-error', testid: 'mcp-error' });
    item.querySelector('.mcp-server-head').after(error);
  }
  if (error) {
    if (server.error) error.textContent = server.error;
    else error.remove();
  }
}

/** Wire the list into the settings panel (when the page has one). */
export function mountMcp(root = document) {
  // The settings panel may build its element after this runs: wire it when it appears.
  const wireExtra = () => {
    const extra = root.getElementById('settings-extra');
    if (!extra || extra.dataset.mcp) return Boolean(extra);
    extra.dataset.mcp = 'on';
    const dialog = extra.closest('dialog');
    if (dialog) {
      new MutationObserver(() => dialog.open && renderMcpServers(extra)).observe(dialog, {
        attributes: true,
        attributeFilter: ['open'],
      });
      if (dialog.open) renderMcpServers(extra);
    } else {
      renderMcpServers(extra);
    }
    return true;
  };
  if (!wireExtra()) {
    const watch = new MutationObserver(() => wireExtra() && watch.disconnect());
    watch.observe(root.body || root, { childList: true, subtree: true });
  }
}
