// Markdown in messages: marked parses, DOMPurify sanitises, highlight.js
// colours code. The libraries are vendored ES modules (vendor/README.md).
//
// Every message is untrusted. Raw HTML in it is escaped (shown as text),
// and the HTML marked produces goes through
// DOMPurify into a DocumentFragment (never through innerHTML on a live
// node), with scripts, event-handler attributes, forms, frames and styles
// removed. Links open in a new tab with rel="noopener noreferrer". Code
// blocks are highlighted by highlight.js, whose output escapes the code it
// is given, and get a copy button.
//
// Streaming: a reply grows by small deltas. Re-rendering the whole text on
// every delta would cost O(n) per delta, O(n^2) per reply, and repaint
// many times per frame; `MarkdownView` instead re-renders at most once per
// animation frame (and at most every LONG_TEXT_INTERVAL_MS once the text is
// long), so the cost is bounded by the frame rate, not by the delta count.

import DOMPurify from './vendor/dompurify/purify.es.mjs';
import hljs from './vendor/highlight/highlight.min.js';
import { marked } from './vendor/marked/marked.esm.js';

const LONG_TEXT = 20_000;
const LONG_TEXT_INTERVAL_MS = 250;
const HIGHLIGHT_MAX = 50_000;

marked.setOptions({ gfm: true, breaks: true, async: false });

const escapeHtml = (text) =>
  text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

// Raw HTML in a message is shown as the text it is, never as markup (people
// paste tags when they talk about code); DOMPurify below is a second fence.
marked.use({
  renderer: {
    html(token) {
      const text = escapeHtml(token.text);
      return token.block ? `<p>${text.trim().replace(/\n/g, '<br>')}</p>\n` : text;
    },
  },
});

const PURIFY = {
  RETURN_DOM_FRAGMENT: true,
  FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'iframe', 'object', 'embed', 'svg', 'math'],
  FORBID_ATTR: ['style', 'id', 'name'],
  ALLOW_DATA_ATTR: false,
};

// Links: a new tab, no opener, no referrer. Applied to every sanitised tree.
DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A' && node.hasAttribute('href')) {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer');
  }
});

/** `text` as a sanitised DocumentFragment of Markdown. */
export function markdownFragment(text) {
  const html = marked.parse(String(text ?? ''));
  return DOMPurify.sanitize(html, PURIFY);
}

// How long a Copy button says "Copied".
const COPIED_MS = 1500;

/**
 * A Copy button: puts `getText()` on the clipboard and says so on the button
 * ("Copied", or "Copy failed") for a moment. While it says so the button
 * carries `data-copied`, which keeps a hover-only actions row in view, and
 * the words are announced to screen readers.
 */
export function copyButton(getText, { className = 'code-copy', testid = 'code-copy', title } = {}) {
  const button = document.createElement('button');
  button.type = 'button';
  button.className = className;
  button.dataset.testid = testid;
  if (title) button.title = title;
  button.setAttribute('aria-live', 'polite');
  button.textContent = 'Copy';
  let timer = null;
  button.addEventListener('click', async () => {
    const ok = await copyText(getText());
    button.textContent = ok ? 'Copied' : 'Copy failed';
    button.dataset.copied = ok ? 'true' : 'false';
    clearTimeout(timer);
    timer = setTimeout(() => {
      button.textContent = 'Copy';
      delete button.dataset.copied;
    }, COPIED_MS);
  });
  return button;
}

/** Put `text` on the clipboard; false when the browser refused. */
export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    // Without the async clipboard (plain http, old browsers): a hidden textarea.
    const area = document.createElement('textarea');
    area.value = text;
    area.setAttribute('readonly', '');
    area.style.position = 'fixed';
    area.style.opacity = '0';
    document.body.append(area);
    area.select();
    let ok = false;
    try {
      ok = document.execCommand('copy');
    } catch {
      ok = false;
    }
    area.remove();
    return ok;
  }
}

/** Highlight each code block of `root` and give it a header with its language and a copy button. */
function decorateCode(root) {
  for (const code of root.querySelectorAll('pre > code')) {
    const pre = code.parentElement;
    // marked ends every block with a newline the code did not have.
    const source = code.textContent.replace(/\n$/, '');
    const lang = (code.className.match(/language-([\w+#-]+)/) || [])[1] || '';
    if (source.length <= HIGHLIGHT_MAX) {
      if (lang && hljs.getLanguage(lang)) {
        code.innerHTML = hljs.highlight(source, { language: lang, ignoreIllegals: true }).value;
      } else {
        code.innerHTML = hljs.highlightAuto(source).value;
      }
      code.classList.add('hljs');
    } else {
      code.textContent = source;
    }
    const head = document.createElement('div');
    head.className = 'code-head';
    const label = document.createElement('span');
    label.className = 'code-lang';
    label.textContent = lang || 'code';
    head.append(label, copyButton(() => source));
    const box = document.createElement('div');
    box.className = 'code-block';
    box.dataset.testid = 'code-block';
    pre.replaceWith(box);
    box.append(head, pre);
  }
  for (const table of root.querySelectorAll('table')) {
    // Wide tables scroll inside the bubble instead of stretching it.
    const wrap = document.createElement('div');
    wrap.className = 'table-wrap';
    table.replaceWith(wrap);
    wrap.append(table);
  }
}

/** Render `text` as Markdown into `node`, replacing what it held. */
export function renderMarkdown(node, text) {
  const fragment = markdownFragment(text);
  decorateCode(fragment);
  // The newlines between marked's blocks would end up in textContent.
  for (const edge of [fragment.firstChild, fragment.lastChild]) {
    if (edge && edge.nodeType === Node.TEXT_NODE && !edge.textContent.trim()) edge.remove();
  }
  node.replaceChildren(fragment);
  node.classList.add('markdown');
}

/**
 * A node whose Markdown text grows (a streaming reply). `set(text)` records
 * the text and schedules a render; `flush()` renders now.
 */
export class MarkdownView {
  constructor(node) {
    this.node = node;
    this.text = '';
    this.rendered = null;
    this.frame = 0;
    this.timer = 0;
    this.lastRender = 0;
  }

  set(text) {
    this.text = text;
    if (this.frame || this.timer) return;
    const since = performance.now() - this.lastRender;
    const wait = text.length > LONG_TEXT ? LONG_TEXT_INTERVAL_MS - since : 0;
    if (wait > 0) {
      this.timer = setTimeout(() => {
        this.timer = 0;
        this.schedule();
      }, wait);
    } else {
      this.schedule();
    }
  }

  schedule() {
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
    });
  }

  flush() {
    cancelAnimationFrame(this.frame);
    clearTimeout(this.timer);
    this.frame = 0;
    this.timer = 0;
    this.render();
  }

  render() {
    if (this.rendered === this.text) return;
    this.rendered = this.text;
    this.lastRender = performance.now();
    renderMarkdown(this.node, this.text);
  }
}
