// Small DOM helpers shared by every view.
//
// Everything the server sends is untrusted text, so nothing here ever assigns
// innerHTML: elements are built with createElement and text goes in through
// text nodes. The tiny markdown subset (code fences, `code`, **bold**) is
// parsed into elements the same way.

/**
 * Build an element. `attrs` keys: `class`, `text`, `testid`, `dataset`,
 * `on<event>` handlers, and plain attributes (true sets an empty attribute,
 * false/null/undefined leaves it out). Children may be nodes or strings
 * (strings become text nodes).
 */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key === 'text') node.textContent = value;
    else if (key === 'testid') node.dataset.testid = value;
    else if (key === 'dataset') Object.assign(node.dataset, value);
    else if (key.startsWith('on') && typeof value === 'function') {
      node.addEventListener(key.slice(2), value);
    } else node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

/** Remove every child of `node`. */
/**
 * Show `values` in a form's `inputs` (a Map of key to input; a box is checked
 * by truthiness, any other input shows the value or nothing), editable only
 * when `editable`.
 */
export function fillInputs(inputs, values, editable) {
  for (const [key, input] of inputs) {
    if (input.type === 'checkbox') input.checked = Boolean(values[key]);
    else input.value = values[key] ?? '';
    input.disabled = !editable;
  }
}

export function clear(node) {
  while (node.firstChild) node.firstChild.remove();
}

/** Up to two letters for an avatar: "Linus" → "Li", "Grace Hopper" → "GH". */
export function initials(name) {
  const words = String(name || '?').trim().split(/\s+/).filter(Boolean);
  if (words.length >= 2) return (words[0][0] + words[1][0]).toUpperCase();
  const word = words[0] || '?';
  return word[0].toUpperCase() + (word[1] || '').toLowerCase();
}

/** A stable hue per VP id, so a VP keeps its colour across reloads. */
export function hueOf(id) {
  let hash = 0;
  for (const ch of String(id)) hash = (hash * 31 + ch.codePointAt(0)) >>> 0;
  return hash % 360;
}

/** An avatar disc with initials, coloured by id. */
export function avatar(id, name, extraClass = '') {
  const node = el('span', {
    class: `avatar ${extraClass}`.trim(),
    'aria-hidden': 'true',
    text: initials(name || id),
  });
  node.style.setProperty('--hue', String(hueOf(id)));
  return node;
}

/** "14:05" for today, "3 Mar 14:05" otherwise; `ts` is Unix seconds. */
export function formatTime(ts) {
  if (!ts) return '';
  const date = new Date(ts * 1000);
  const now = new Date();
  const time = date.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  if (date.toDateString() === now.toDateString()) return time;
  return `${date.toLocaleDateString([], { day: 'numeric', month: 'short' })} ${time}`;
}

/** Shorten `text` to `max` characters with an ellipsis. */
export function truncate(text, max) {
  const s = String(text ?? '');
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

/** A random id usable as a clientMessageId (the protocol allows [A-Za-z0-9_-]). */
export function newId(prefix = 'c') {
  const uuid = globalThis.crypto?.randomUUID
    ? crypto.randomUUID()
    : `${Date.now().toString(16)}-${Math.random().toString(16).slice(2)}`;
  return `${prefix}_${uuid.replaceAll('-', '')}`;
}

const FENCE = /```[^\n`]*\n?([\s\S]*?)(?:```|$)/g;
const INLINE = /(`[^`\n]+`|\*\*[^*\n]+\*\*)/g;

function appendInline(parent, text) {
  for (const part of text.split(INLINE)) {
    if (!part) continue;
    if (part.length > 2 && part.startsWith('`') && part.endsWith('`')) {
      parent.append(el('code', { text: part.slice(1, -1) }));
    } else if (part.length > 4 && part.startsWith('**') && part.endsWith('**')) {
      parent.append(el('strong', { text: part.slice(2, -2) }));
    } else {
      parent.append(document.createTextNode(part));
    }
  }
}

/**
 * Render `text` into `parent` with a safe markdown subset: fenced code
 * blocks (an unclosed fence runs to the end, which is what a reply still
 * streaming looks like), inline `code` and **bold**. Line breaks are kept
 * by CSS (white-space: pre-wrap).
 */
export function renderRich(parent, text) {
  clear(parent);
  let last = 0;
  for (const match of text.matchAll(FENCE)) {
    // The block is a box of its own, so the line breaks around the fence
    // would only add blank lines above and below it.
    appendInline(parent, text.slice(last, match.index).replace(/\n{1,2}$/, ''));
    parent.append(el('pre', {}, el('code', { text: match[1].replace(/\n$/, '') })));
    last = match.index + match[0].length;
    if (text[last] === '\n') last += 1;
  }
  appendInline(parent, text.slice(last));
}

/** A short notice in the corner (`kind` error or info) that goes after 6 s. */
export function toast(message, kind = 'error') {
  const node = el('div', { class: `toast ${kind}`, testid: 'toast', role: 'alert', text: message });
  document.getElementById('toasts').append(node);
  setTimeout(() => node.remove(), 6000);
}
