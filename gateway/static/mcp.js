// The MCP servers VPs can use: their state and tools, from GET /api/mcp/servers.
//
// `renderMcpServers(container)` fills any element with the list. `mountMcp()`
// wires it where the page has room for it: the settings panel's
// `#settings-extra` (rendered each time its dialog opens) and the "Tools"
// dialog opened from the sidebar. Nothing here holds a secret: the listing
// carries no env or headers.

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
  return Array.isArray(data.servers) ? data.servers : [];
}

function serverItem(server) {
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
  if (server.target) lines.push(el('code', { class: 'mcp-target', text: server.target }));
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
  try {
    const servers = await fetchServers(connect);
    body = servers.length
      ? el('ul', { class: 'mcp-list', testid: 'mcp-list' }, servers.map(serverItem))
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
  container.append(el('h3', { class: 'section-title', text: 'MCP tools' }), body, refresh);
  container.removeAttribute('aria-busy');
}

/** Wire the list into the page: the settings panel, if any, and the Tools dialog. */
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
  const button = root.getElementById('tools-button');
  const dialog = root.getElementById('tools-dialog');
  const list = root.getElementById('tools-list');
  if (button && dialog && list) {
    button.addEventListener('click', () => {
      dialog.showModal();
      renderMcpServers(list);
    });
  }
}
