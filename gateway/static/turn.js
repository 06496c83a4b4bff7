// One VP's reply to one message: a labelled bubble that streams.
//
// A bubble is keyed by turnId. Its body is a sequence of segments in the
// order the engine produced them: text (deltas appended), thinking (a
// collapsible block), and tool chips (the call, then its result). A
// `result` payload ends it as complete, cancelled or error.

import { avatar, el, formatTime, hueOf, truncate } from './dom.js';
import { copyButton, MarkdownView } from './markdown.js';

const STATUS_LABEL = {
  waiting: 'waiting…',
  queued: 'queued…',
  thinking: 'thinking…',
  streaming: 'writing…',
  tool: 'using a tool…',
  cancelling: 'stopping…',
  idle: '',
  error: 'error',
};

/** What a message that found its VP busy became (agent_status `queue`). */
const QUEUE_NOTE = {
  queued: 'Queued: answered after the current reply.',
  steered: 'Steered: the reply in progress takes this message in.',
  merged: 'Merged: answered with the other messages sent meanwhile.',
  interrupted: 'Interrupted the reply in progress: answering this instead.',
};

const FINAL_STATES = new Set(['complete', 'cancelled', 'error']);

/** A one-line summary of a tool's arguments: `path: a.txt, limit: 20`. */
function shortArgs(input) {
  if (!input || typeof input !== 'object') return '';
  const parts = Object.entries(input).map(([key, value]) => {
    const shown = typeof value === 'string' ? value : JSON.stringify(value);
    return `${key}: ${truncate(shown.replace(/\s+/g, ' '), 40)}`;
  });
  return truncate(parts.join(', '), 80);
}

function pretty(value) {
  if (typeof value === 'string') return value;
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

function formatDuration(ms) {
  if (typeof ms !== 'number') return '';
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** `in 120 · out 48 tokens · $0.0012 · 1.2 s`, with what is known. */
export function usageLine({ stopped = false, durationMs, usage, costUsd, ts } = {}) {
  const parts = [];
  if (ts) parts.push(formatTime(ts));
  if (stopped) parts.push('stopped');
  const u = usage || {};
  if (u.input_tokens || u.output_tokens) {
    parts.push(`${u.input_tokens || 0} in · ${u.output_tokens || 0} out tokens`);
  }
  if (costUsd) parts.push(`$${Number(costUsd).toFixed(4)}`);
  const duration = formatDuration(durationMs);
  if (duration) parts.push(duration);
  return parts.join(' · ');
}

/** A tool call as a compact chip: click to see the arguments and the result. */
class ToolChip {
  constructor({ id, name, input }) {
    this.id = id;
    this.detail = el(
      'div',
      { class: 'tool-detail' },
      el('div', { class: 'tool-label', text: 'arguments' }),
      el('pre', { class: 'tool-input', text: pretty(input ?? {}) }),
    );
    this.mark = el('span', { class: 'tool-mark', 'aria-hidden': 'true', text: '…' });
    this.toggle = el(
      'button',
      {
        type: 'button',
        class: 'tool-head',
        'aria-expanded': 'false',
        onclick: () => this.setOpen(!this.root.classList.contains('open')),
      },
      el('span', { class: 'tool-icon', 'aria-hidden': 'true', text: '⚙' }),
      el('span', { class: 'tool-name', text: name }),
      el('span', { class: 'tool-args', text: shortArgs(input) }),
      this.mark,
    );
    this.root = el(
      'div',
      { class: 'tool', testid: 'tool-chip', dataset: { tool: name, state: 'running' } },
      this.toggle,
      this.detail,
    );
  }

  setOpen(open) {
    this.root.classList.toggle('open', open);
    this.toggle.setAttribute('aria-expanded', String(open));
  }

  /** Part of the call's output while it runs (a remote agent's stream), shown open. */
  appendOutput(text) {
    if (!this.output) {
      this.output = el('pre', { class: 'tool-output', testid: 'tool-output' });
      this.detail.append(el('div', { class: 'tool-label', text: 'output' }), this.output);
      this.setOpen(true);
    }
    this.output.textContent = truncate(this.output.textContent + text, 20_000);
  }

  setResult({ content, is_error: isError }) {
    const text = Array.isArray(content)
      ? content.map((part) => (typeof part === 'string' ? part : part?.text ?? pretty(part))).join('')
      : pretty(content ?? '');
    this.root.dataset.state = isError ? 'error' : 'ok';
    this.mark.textContent = isError ? '✕' : '✓';
    this.detail.append(
      el('div', { class: 'tool-label', text: isError ? 'error' : 'result' }),
      el('pre', { class: 'tool-result', testid: 'tool-result', text: truncate(text, 20_000) }),
    );
    if (isError) this.toggle.title = truncate(text, 300);
  }
}

export class TurnBubble {
  /**
   * `persona` is {name, role} (or a stand-in for an unknown id); `onCancel`
   * is called with the vpId when the bubble's stop button is pressed.
   */
  constructor({ vpId, turnId, persona, onCancel, onRegenerate, joinedLate = false }) {
    this.vpId = vpId;
    this.turnId = turnId;
    // The stored reply's id (from the result or the history): what
    // regenerate names. Null until the turn has stored a reply.
    this.messageId = null;
    this.onRegenerate = onRegenerate || null;
    this.usage = null;
    // Shown from the middle (the page was opened while the VP was writing):
    // the start is missing until the stored reply replaces the text.
    this.joinedLate = joinedLate;
    this.segments = [];
    this.tools = new Map();
    this.cancelButton = el('button', {
      type: 'button',
      class: 'bubble-cancel',
      testid: 'cancel-vp',
      dataset: { vp: vpId },
      title: `Stop ${persona.name}`,
      text: 'Stop',
      onclick: () => {
        this.setStatus('cancelling');
        this.cancelButton.disabled = true;
        onCancel(vpId);
      },
    });
    this.statusEl = el('span', { class: 'bubble-status', testid: 'bubble-status' });
    // Which run of a task this turn is (see markTask); empty for plain chat.
    this.taskLabel = el('span', { class: 'bubble-task', testid: 'task-label', hidden: true });
    this.body = el('div', { class: 'bubble-body', testid: 'bubble-body' });
    this.footer = el('div', { class: 'bubble-footer', testid: 'bubble-footer' });
    this.actions = el('div', { class: 'msg-actions', testid: 'bubble-actions' });
    const head = el(
      'header',
      { class: 'bubble-head' },
      avatar(vpId, persona.name),
      el(
        'div',
        { class: 'bubble-who' },
        el('span', { class: 'bubble-name', text: persona.name }),
        el('span', { class: 'bubble-role', text: persona.role || '' }),
      ),
      this.taskLabel,
      this.statusEl,
      this.cancelButton,
    );
    this.root = el(
      'article',
      {
        class: 'bubble',
        testid: 'vp-bubble',
        dataset: { vp: vpId, turn: turnId, state: 'streaming', status: 'waiting' },
      },
      head,
      this.body,
      el('div', { class: 'bubble-bottom' }, this.footer, this.actions),
    );
    this.root.style.setProperty('--hue', String(hueOf(vpId)));
    this.setStatus('waiting');
    if (joinedLate) {
      this.lateNote = el('div', {
        class: 'bubble-note',
        testid: 'joined-late',
        text: 'Joined mid-reply: the whole reply appears when it ends.',
      });
      this.body.append(this.lateNote);
    }
  }

  /**
   * Label the bubble as one run of a task (`meta.task` of a stored reply, or
   * a run of a `task_changed` frame): "task · market", "synthesis", "task".
   */
  markTask({ taskId, runId, role }) {
    if (!taskId || !runId) return;
    let text = 'task';
    if (role === 'synthesis') text = 'synthesis';
    else if (role === 'node') text = `task · ${runId}`;
    this.taskLabel.textContent = text;
    this.taskLabel.title =
      role === 'synthesis' ? 'The answer written from every run of the team' : `Run ${runId} of a task`;
    this.taskLabel.hidden = false;
    Object.assign(this.root.dataset, { taskId, runId, taskRole: role || '' });
    this.showActions(); // a task's reply is asked again with Revise on its card, not Regenerate
  }

  get final() {
    return FINAL_STATES.has(this.root.dataset.state);
  }

  setStatus(status) {
    if (this.final) return;
    // A stop request is pending: later status updates must not hide that.
    if (this.root.dataset.status === 'cancelling' && status !== 'error') return;
    this.root.dataset.status = status;
    this.statusEl.textContent = STATUS_LABEL[status] ?? status;
  }

  lastSegment(kind) {
    const last = this.segments[this.segments.length - 1];
    return last && last.kind === kind ? last : null;
  }

  appendText(text) {
    if (!text) return;
    let seg = this.lastSegment('text');
    if (!seg) {
      const node = el('div', { class: 'bubble-text', testid: 'bubble-text' });
      seg = { kind: 'text', text: '', node, view: new MarkdownView(node) };
      this.segments.push(seg);
      this.body.append(seg.node);
    }
    seg.text += text;
    // Rendered once per animation frame at most (markdown.js), and at once
    // when the bubble ends.
    seg.view.set(seg.text);
    if (this.final) seg.view.flush();
  }

  appendThinking(text) {
    if (!text) return;
    let seg = this.lastSegment('thinking');
    if (!seg) {
      const content = el('div', { class: 'thinking-text' });
      const node = el(
        'details',
        { class: 'thinking', testid: 'thinking' },
        el('summary', { text: 'Thinking' }),
        content,
      );
      seg = { kind: 'thinking', text: '', node, content };
      this.segments.push(seg);
      this.body.append(node);
    }
    seg.text += text;
    seg.content.textContent = seg.text;
  }

  addToolUse(block) {
    const chip = new ToolChip(block);
    this.tools.set(block.id, chip);
    let row = this.lastSegment('tools');
    if (!row) {
      row = { kind: 'tools', node: el('div', { class: 'tool-row' }) };
      this.segments.push(row);
      this.body.append(row.node);
    }
    row.node.append(chip.root);
  }

  addToolResult(block) {
    let chip = this.tools.get(block.tool_use_id);
    if (!chip) {
      // A result whose call was not seen (joined mid-turn): show it alone.
      this.addToolUse({ id: block.tool_use_id, name: 'earlier call', input: {} });
      chip = this.tools.get(block.tool_use_id);
    }
    chip.setResult(block);
  }

  /** A notice inside the turn (a compaction, a retry, an engine error), or a tool's output. */
  addSystem(data) {
    // A turn's start (model, tools, session) is for programs, not for reading.
    if (data.subtype === 'init') return;
    if (data.subtype === 'tool_output') {
      this.tools.get(data.detail?.tool_use_id)?.appendOutput(data.message || '');
      return;
    }
    // A model call that is retried or handed to a fallback model starts its
    // reply over: what it had streamed is dropped, as the server drops it.
    if (data.detail && data.detail.discard_partial) this.dropPartial();
    const kind = data.subtype === 'error' ? 'error' : 'notice';
    this.body.append(
      el('div', {
        class: `bubble-note ${kind}`,
        testid: 'bubble-note',
        text: data.message || data.subtype || 'notice',
      }),
    );
  }

  /** Remove the text and thinking streamed since the last tool call or note. */
  dropPartial() {
    while (this.segments.length) {
      const last = this.segments[this.segments.length - 1];
      if (last.kind !== 'text' && last.kind !== 'thinking') break;
      this.segments.pop();
      last.node.remove();
    }
  }

  /** Apply one `data` payload of a yeaft_output frame. */
  apply(data) {
    if (!data || typeof data !== 'object') return;
    const blocks = data.message && Array.isArray(data.message.content) ? data.message.content : [];
    if (data.type === 'assistant') {
      for (const block of blocks) {
        if (block.type === 'text') this.appendText(block.text);
        else if (block.type === 'thinking') this.appendThinking(block.thinking);
        else if (block.type === 'tool_use') this.addToolUse(block);
      }
      if (!this.final && blocks.some((b) => b.type === 'text')) this.setStatus('streaming');
    } else if (data.type === 'user') {
      for (const block of blocks) {
        if (block.type === 'tool_result') this.addToolResult(block);
        else if (block.type === 'text') this.appendText(block.text);
      }
    } else if (data.type === 'result') {
      this.finish(data);
    } else if (data.type === 'system') {
      this.addSystem(data);
    }
  }

  /** End the bubble from a `result` payload. */
  finish(result) {
    if (this.final) return;
    let state = 'complete';
    if (result.stop_reason === 'aborted') state = 'cancelled';
    else if (result.is_error) state = 'error';
    this.end(state);
    this.showUsage({
      ts: Date.now() / 1000,
      stopped: state === 'cancelled',
      durationMs: result.duration_ms,
      usage: result.usage,
      costUsd: result.total_cost_usd,
    });
    this.setMessageId(result.message_id);
    if (state === 'error') {
      const reason = result.error || result.subtype || 'the turn failed';
      this.body.append(el('div', { class: 'bubble-note error', testid: 'bubble-error', text: reason }));
    }
    if (state === 'complete' && this.segments.length === 0 && !this.body.firstChild) {
      // The VP chose to stay silent (its skip token): say so quietly.
      this.root.classList.add('silent');
      this.body.append(el('div', { class: 'bubble-note silent-note', text: 'nothing to add' }));
    }
  }

  /** Say what became of the turn's message when the VP was busy (agent_status `queue`). */
  queueNote(how) {
    const text = QUEUE_NOTE[how];
    if (!text) return;
    this.body.querySelector('.queue-note')?.remove();
    if (how === 'steered' || how === 'merged') this.root.classList.add('silent');
    this.body.append(el('div', { class: 'bubble-note queue-note', testid: 'queue-note', text }));
  }

  /** Replace the text with the stored reply, keeping thinking and tool chips. */
  replaceText(text) {
    this.lateNote?.remove();
    for (const seg of this.segments.filter((s) => s.kind === 'text')) seg.node.remove();
    this.segments = this.segments.filter((s) => s.kind !== 'text');
    this.body.querySelector('.silent-note')?.remove();
    this.root.classList.remove('silent');
    this.appendText(text);
    this.joinedLate = false;
    this.lateNote = null;
  }

  /** The stored reply could not be fetched: say what the bubble shows. */
  lateFetchFailed() {
    if (this.lateNote) {
      this.lateNote.textContent = 'The start of this reply was missed: reload to see it whole.';
    }
  }

  /**
   * The footer line of a turn: time, tokens and cost. The same for a turn
   * seen live (its result) and one read back from the history (the stored
   * reply's meta), so a reload shows what the live view showed.
   */
  showUsage({ stopped = false, durationMs, usage, costUsd, ts } = {}) {
    this.footer.textContent = usageLine({ stopped, durationMs, usage, costUsd, ts });
    const u = usage || {};
    this.root.dataset.tokensIn = String(u.input_tokens || 0);
    this.root.dataset.tokensOut = String(u.output_tokens || 0);
    this.root.dataset.cost = String(costUsd || 0);
  }

  /** The whole text of the reply, as written (Markdown source). */
  get text() {
    return this.segments
      .filter((s) => s.kind === 'text')
      .map((s) => s.text)
      .join('\n\n');
  }

  /** Remember the stored reply's id (regenerate needs it). */
  setMessageId(messageId) {
    if (!messageId) return;
    this.messageId = messageId;
    this.root.dataset.messageId = messageId;
    this.showActions();
  }

  /** Mark this reply as replaced by a regenerated one (it stays, dimmed). */
  markSuperseded() {
    this.root.classList.add('superseded');
    this.root.dataset.superseded = 'true';
  }

  /** Copy (any ended reply) and Regenerate (a stored reply that is not a task's). */
  showActions() {
    if (!this.final) return;
    const copy = copyButton(() => this.text, {
      className: 'msg-action',
      testid: 'copy-message',
      title: 'Copy the reply as Markdown',
    });
    const regenerate =
      this.messageId && this.onRegenerate && !this.root.dataset.taskId
        ? el('button', {
            type: 'button',
            class: 'msg-action',
            testid: 'regenerate',
            title: `Ask this VP to answer the same message again`,
            text: 'Regenerate',
            onclick: (event) => {
              event.target.disabled = true;
              this.onRegenerate(this);
            },
          })
        : null;
    this.actions.replaceChildren(copy, ...(regenerate ? [regenerate] : []));
  }

  /** Mark the bubble final without a result payload (history, lost turns). */
  end(state) {
    if (this.lateNote) {
      // The page is about to fetch the stored reply (see app.js).
      this.lateNote.textContent = 'Loading the whole reply…';
      this.body.append(this.lateNote);
    }
    this.root.dataset.state = state;
    this.root.dataset.status = 'idle';
    for (const seg of this.segments) seg.view?.flush();
    this.showActions();
    this.statusEl.textContent = state === 'cancelled' ? 'stopped' : state === 'error' ? 'failed' : '';
    this.cancelButton.remove();
  }
}

