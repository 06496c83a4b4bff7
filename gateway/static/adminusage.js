// The admin panel's usage view: who spent what, from GET /api/admin/usage.
//
// `mountUsage(container)` renders into `container` a date range (the last
// 30 days by default), the totals, a per-day chart (uPlot, vendored under
// vendor/uplot/) of tokens and US dollars, and four tables: the same rows
// summed by person, by group, by VP and by model. Its stylesheets are added
// to the page once. Every value is the server's text, shown as text.

import { request } from './api.js';
import { el } from './dom.js';
import uPlot from './vendor/uplot/uPlot.esm.js';

const STYLES = ['/static/vendor/uplot/uPlot.min.css', '/static/adminusage.css'];
const DEFAULT_DAYS = 30;
const DAY_MS = 86_400_000;
const GROUPINGS = [
  { key: 'user', title: 'By person', label: (r) => r.user },
  { key: 'groupId', title: 'By group', label: (r) => r.groupName || r.groupId },
  { key: 'vp', title: 'By VP', label: (r) => r.vp },
  { key: 'model', title: 'By model', label: (r) => r.model },
];

function addStyles() {
  for (const href of STYLES) {
    if (document.querySelector(`link[href="${href}"]`)) continue;
    document.head.append(el('link', { rel: 'stylesheet', href }));
  }
}

const isoDay = (ms) => new Date(ms).toISOString().slice(0, 10);
const usd = (v) => `$${Number(v).toFixed(4)}`;
const count = (v) => Number(v).toLocaleString('en');

/** The rows summed by `grouping`, the most tokens first. */
export function sumBy(rows, grouping) {
  const sums = new Map();
  for (const row of rows) {
    const key = row[grouping.key];
    const sum = sums.get(key) || { label: grouping.label(row), inputTokens: 0, outputTokens: 0, usd: 0 };
    sum.inputTokens += row.inputTokens;
    sum.outputTokens += row.outputTokens;
    sum.usd += row.usd;
    sums.set(key, sum);
  }
  const total = (s) => s.inputTokens + s.outputTokens;
  return [...sums.values()].sort((a, b) => total(b) - total(a) || a.label.localeCompare(b.label));
}

/** Tokens and dollars per day of `from`..`to`, days without usage as 0 (the chart's data). */
export function perDay(rows, from, to) {
  const days = [];
  for (let t = Date.parse(`${from}T00:00:00Z`); t <= Date.parse(`${to}T00:00:00Z`); t += DAY_MS) days.push(t);
  const index = new Map(days.map((t, i) => [isoDay(t), i]));
  const tokens = days.map(() => 0);
  const dollars = days.map(() => 0);
  for (const row of rows) {
    const i = index.get(row.day);
    if (i === undefined) continue;
    tokens[i] += row.inputTokens + row.outputTokens;
    dollars[i] += row.usd;
  }
  return [days.map((t) => t / 1000), tokens, dollars];
}

function table(grouping, rows) {
  const sums = sumBy(rows, grouping);
  return el(
    'section',
    { class: 'usage-table', testid: `usage-by-${grouping.key}` },
    el('h3', { text: grouping.title }),
    el(
      'table',
      {},
      el(
        'thead',
        {},
        el('tr', {}, ...['', 'Input tokens', 'Output tokens', 'US dollars'].map((t) => el('th', { text: t }))),
      ),
      el(
        'tbody',
        {},
        ...sums.map((s) =>
          el(
            'tr',
            {},
            el('td', { text: s.label }),
            el('td', { class: 'num', text: count(s.inputTokens) }),
            el('td', { class: 'num', text: count(s.outputTokens) }),
            el('td', { class: 'num', text: usd(s.usd) }),
          ),
        ),
      ),
    ),
  );
}

function chart(node, report) {
  const data = perDay(report.rows, report.from, report.to);
  const width = Math.max(320, Math.min(node.clientWidth || 720, 960));
  return new uPlot(
    {
      width,
      height: 220,
      scales: { x: { time: true }, usd: { auto: true } },
      series: [
        {},
        { label: 'Tokens', stroke: '#3a63d8', fill: 'rgba(58, 99, 216, 0.12)', value: (u, v) => (v == null ? '' : count(v)) },
        { label: 'US dollars', stroke: '#2f8f55', scale: 'usd', value: (u, v) => (v == null ? '' : usd(v)) },
      ],
      axes: [{}, { label: 'tokens' }, { side: 1, scale: 'usd', label: 'USD', grid: { show: false } }],
    },
    data,
    node,
  );
}

/** Render the usage view into `container` (an admin's page); returns its handle. */
export function mountUsage(container) {
  addStyles();
  const today = Date.now();
  const from = el('input', { type: 'date', name: 'from', testid: 'usage-from', value: isoDay(today - (DEFAULT_DAYS - 1) * DAY_MS) });
  const to = el('input', { type: 'date', name: 'to', testid: 'usage-to', value: isoDay(today) });
  const error = el('p', { class: 'form-error', testid: 'usage-error', role: 'alert' });
  const totals = el('p', { class: 'usage-totals', testid: 'usage-totals' });
  const plot = el('div', { class: 'usage-chart', testid: 'usage-chart' });
  const tables = el('div', { class: 'usage-tables' });
  const form = el(
    'form',
    { class: 'usage-range', testid: 'usage-range' },
    el('label', {}, 'From ', from),
    el('label', {}, 'To ', to),
    el('button', { type: 'submit', class: 'primary', testid: 'usage-show', text: 'Show' }),
  );
  const root = el('div', { class: 'admin-usage', testid: 'admin-usage' }, form, error, totals, plot, tables);
  container.append(root);
  let shown = null;

  async function load() {
    error.textContent = '';
    root.dataset.state = 'loading';
    let report;
    try {
      const query = new URLSearchParams({ from: from.value, to: to.value });
      report = await request('GET', `/api/admin/usage?${query}`);
    } catch (err) {
      error.textContent = err.message;
      root.dataset.state = 'error';
      return;
    }
    const t = report.totals;
    totals.textContent =
      `${report.from} to ${report.to}: ${count(t.inputTokens)} input tokens, ` +
      `${count(t.outputTokens)} output tokens, ${usd(t.usd)}`;
    shown?.destroy();
    plot.replaceChildren();
    shown = chart(plot, report);
    tables.replaceChildren(...GROUPINGS.map((g) => table(g, report.rows)));
    root.dataset.state = 'ready';
  }

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    load();
  });
  const done = load();
  return { root, reload: load, ready: done };
}
