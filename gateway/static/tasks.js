// Team mode in the timeline: one card per task, and a label on each bubble
// that is a run of a task.
//
// A `task_changed` frame carries the whole task every time, so a card is
// simply drawn again from the newest one (the parts a person is using, an
// open Revise box or the evidence, keep their state). A card sits right
// under the message that started its task (the first attempt's messageId),
// or at the end of the timeline while that message is not shown. A reload
// draws the cards from GET /api/groups/{id}/tasks; a replay brings the
// changes after that.
//
// The runs of an attempt are ordinary VP turns: they stream as bubbles in
// the thread row of the attempt's message, side by side. A run names its
// turn (`turnId`), which is how its bubble is labelled "task · market" or
// "synthesis"; a stored reply names its run itself (`meta.task`).
//
// Everything the server wrote goes in as text, or through the Markdown
// renderer and sanitiser (markdown.js) for the runs' outputs.

import { api } from './api.js';
import { el, truncate } from './dom.js';
import { DraftLine, duration, evidenceNodes, skillName } from './taskparts.js';

const STATUS_TEXT = {
  planning: 'planning…',
  running: 'running',
  review: 'in review',
  accepted: 'accepted',
  abandoned: 'abandoned',
};
const RUN_TEXT = { pending: 'waiting', running: 'running', done: 'done', failed: 'failed', skipped: 'skipped' };
const OPEN = new Set(['planning', 'running', 'review']);
const TASK_TEXT_MAX = 240;

/** A short button of the card. */
function button(text, testid, kind, onclick) {
  return el('button', { type: 'button', class: `task-button ${kind}`.trim(), testid, text, onclick });
}

/** The run's name as its bubble shows it. */
function runName(run) {
  if (run.role === 'synthesis') return 'synthesis';
  if (run.role === 'single') return 'single';
  return run.id;
}

class TaskCard {
  /**
   * `persona(id)` gives a VP's name; `toast(text, kind)` tells the user;
   * `focusTurn(turnId)` shows a run's bubble; `onTask(task)` takes the task
   * an action answered with.
   */
  constructor({ persona, toast, focusTurn, onTask }) {
    this.persona = persona;
    this.toast = toast;
    this.focusTurn = focusTurn;
    this.onTask = onTask;
    this.task = null;
    // Bumped by every update: an action's answer older than a frame is not applied.
    this.version = 0;
    this.anchored = false;
    this.title = el('span', { class: 'task-title', testid: 'task-title' });
    this.status = el('span', { class: 'task-badge', testid: 'task-status' });
    this.plan = el('div', { class: 'task-plan', testid: 'task-plan' });
    this.runs = el('ol', { class: 'task-runs', testid: 'task-runs' });
    this.note = el('p', { class: 'task-note', testid: 'task-note' });
    this.accept = button('Accept', 'task-accept', 'primary', () => this.verdict('accept'));
    this.revise = button('Revise…', 'task-revise', '', () => this.openRevise());
    this.revise.setAttribute('aria-expanded', 'false');
    this.abandon = button('Abandon', 'task-abandon', 'danger-quiet', () => this.verdict('abandon'));
    this.evidenceButton = button('Evidence', 'task-evidence', 'quiet', () => this.toggleEvidence());
    this.evidenceButton.setAttribute('aria-expanded', 'false');
    this.reviseText = el('textarea', {
      class: 'task-revise-text',
      testid: 'task-revise-text',
      rows: '2',
      maxlength: '20000',
      placeholder: 'What should change?',
      'aria-label': 'What should change',
    });
    this.reviseSend = el('button', { type: 'submit', class: 'primary', testid: 'task-revise-send', text: 'Send' });
    this.reviseForm = el(
      'form',
      { class: 'task-revise-form', testid: 'task-revise-form', hidden: true },
      this.reviseText,
      el(
        'div',
        { class: 'task-revise-foot' },
        el('button', { type: 'button', class: 'quiet', text: 'Cancel', onclick: () => this.closeRevise() }),
        this.reviseSend,
      ),
    );
    this.reviseForm.addEventListener('submit', (event) => {
      event.preventDefault();
      this.sendRevise();
    });
    this.reviseText.addEventListener('keydown', (event) => {
      if (event.key === 'Escape') this.closeRevise();
      else if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) this.reviseForm.requestSubmit();
    });
    this.evidence = el('div', { class: 'task-evidence', testid: 'task-evidence-body', hidden: true });
    this.draft = new DraftLine({ toast });
    this.error = el('p', { class: 'task-error', testid: 'task-error', role: 'alert' });
    this.root = el(
      'section',
      { class: 'task-card', testid: 'task-card', dataset: { taskId: '', status: '', anchor: '' } },
      el(
        'header',
        { class: 'task-head' },
        el('span', { class: 'task-kind', text: 'Task' }),
        this.title,
        this.status,
      ),
      this.plan,
      this.runs,
      this.note,
      el(
        'div',
        { class: 'task-actions', testid: 'task-actions' },
        this.accept,
        this.revise,
        this.abandon,
        this.evidenceButton,
      ),
      this.reviseForm,
      this.evidence,
      this.draft.root,
      this.error,
    );
  }

  /** Draw the card from `task` (the whole task, as every frame carries it). */
  update(task) {
    const before = this.task;
    this.task = task;
    this.version += 1;
    const status = task.status || 'planning';
    Object.assign(this.root.dataset, { taskId: task.id, status });
    this.title.textContent = task.title || truncate(task.goal || 'Task', 80);
    this.title.title = task.goal || '';
    this.status.textContent = STATUS_TEXT[status] ?? status;
    this.status.dataset.status = status;
    const attempts = task.attempts || [];
    const attempt = attempts[attempts.length - 1] || null;
    this.plan.replaceChildren(...this.planLine(attempt, attempts.length));
    const runs = attempt?.runs || [];
    this.runs.replaceChildren(...runs.map((run) => this.runRow(run, attempt)));
    this.runs.hidden = runs.length === 0;
    this.note.textContent = this.noteText(task, attempt);
    this.note.hidden = !this.note.textContent;
    const review = status === 'review';
    this.accept.hidden = !review;
    this.revise.hidden = !review;
    this.abandon.hidden = !OPEN.has(status);
    if (!review) this.closeRevise();
    if (task.draftId) this.draft.show(task.draftId);
    // Open evidence follows the task: each attempt that ends adds to it.
    if (!this.evidence.hidden && before && (before.status !== status || before.attempts?.length !== attempts.length)) {
      this.loadEvidence();
    }
  }

  planLine(attempt, count) {
    const parts = [];
    if (count > 1 && attempt) {
      parts.push(
        el('span', { class: 'task-attempt', testid: 'task-attempt', text: `Attempt ${attempt.index || count}` }),
      );
      if (attempt.request) parts.push(el('span', { class: 'task-request', text: truncate(attempt.request, 160) }));
    }
    const plan = attempt?.plan;
    if (!plan) {
      parts.push(el('span', { class: 'task-mode', testid: 'task-mode', text: 'planning who does what…' }));
      return parts;
    }
    const mode = plan.mode === 'team' ? 'team' : 'single';
    const who = mode === 'team' ? `${(plan.nodes || []).length} runs + synthesis` : `@${plan.vp || '?'}`;
    parts.push(
      el('span', { class: 'task-mode', testid: 'task-mode', dataset: { mode }, text: `${mode} · ${who}` }),
    );
    if (plan.strategy) parts.push(el('span', { class: 'task-strategy', testid: 'task-strategy', text: plan.strategy }));
    if (plan.fallback) parts.push(el('span', { class: 'tag', text: 'fallback plan' }));
    return parts;
  }

  runRow(run, attempt) {
    const final = attempt.finalRun === run.id;
    const status = run.status || 'pending';
    const name = run.turnId
      ? el('button', {
        type: 'button',
        class: 'task-run-id linkish',
        title: 'Show this run’s reply',
        text: runName(run),
        onclick: () => this.focusTurn(run.turnId),
      })
      : el('span', { class: 'task-run-id', text: runName(run) });
    const skills = (run.skills || []).filter((s) => s.name).map(skillName);
    // A single run does the attempt's request; a team's runs have a part each.
    const work = run.task || (run.role === 'single' ? attempt.request || '' : '');
    const took = status === 'done' || status === 'failed' ? duration(run.startedAt, run.finishedAt) : '';
    return el(
      'li',
      {
        class: `task-run${final ? ' final' : ''}`,
        testid: 'task-run',
        dataset: { runId: run.id, runStatus: status, role: run.role || '', final: final ? 'true' : 'false' },
      },
      el(
        'span',
        { class: 'task-run-status', testid: 'task-run-status', dataset: { status } },
        el('span', { class: 'task-run-dot', 'aria-hidden': 'true' }),
        RUN_TEXT[status] ?? status,
      ),
      name,
      el('span', { class: 'task-run-vp', title: this.persona(run.vp).name, text: `@${run.vp}` }),
      el('span', { class: 'task-run-task', title: work, text: truncate(work, TASK_TEXT_MAX) }),
      final ? el('span', { class: 'tag task-final', testid: 'task-run-final', text: 'final answer' }) : null,
      took ? el('span', { class: 'task-run-time', text: took }) : null,
      skills.length
        ? el('span', { class: 'task-run-skills', testid: 'task-run-skills', text: `skills: ${skills.join(', ')}` })
        : null,
      run.error ? el('span', { class: 'task-run-error', testid: 'task-run-error', text: run.error }) : null,
    );
  }

  noteText(task, attempt) {
    if (task.status === 'accepted') return `Accepted${task.acceptedBy ? ` by ${task.acceptedBy}` : ''}.`;
    if (task.status === 'abandoned') return 'Abandoned.';
    if (task.status === 'review' && attempt?.failed) {
      return 'This attempt did not produce an answer: revise it to try again, or abandon it.';
    }
    if (task.status === 'review') return 'Accept the answer, ask for changes, or abandon the task.';
    return '';
  }

  // -- the person's verdict -----------------------------------------------------
  async verdict(kind) {
    const task = this.task;
    if (!task) return;
    if (kind === 'abandon' && !window.confirm(`Abandon the task “${task.title}”?`)) return;
    this.error.textContent = '';
    const version = this.version;
    const buttons = [this.accept, this.revise, this.abandon];
    for (const b of buttons) b.disabled = true;
    try {
      const call = kind === 'accept' ? api.acceptTask : api.abandonTask;
      const answer = await call(task.groupId, task.id);
      // The task_changed frame usually came first; an older answer is not drawn over it.
      if (answer?.task && version === this.version) this.onTask(answer.task);
    } catch (err) {
      this.error.textContent = `Could not ${kind} the task: ${err.message}`;
    } finally {
      for (const b of buttons) b.disabled = false;
    }
  }

  openRevise() {
    this.reviseForm.hidden = false;
    this.revise.setAttribute('aria-expanded', 'true');
    this.reviseText.focus();
  }

  closeRevise() {
    this.reviseForm.hidden = true;
    this.revise.setAttribute('aria-expanded', 'false');
  }

  async sendRevise() {
    const task = this.task;
    const text = this.reviseText.value.trim();
    if (!task || !text) {
      this.reviseText.focus();
      return;
    }
    this.error.textContent = '';
    this.reviseSend.disabled = true;
    try {
      await api.reviseTask(task.groupId, task.id, text);
      this.reviseText.value = '';
      this.closeRevise();
    } catch (err) {
      this.error.textContent = `Could not send the revision: ${err.message}`;
    } finally {
      this.reviseSend.disabled = false;
    }
  }

  // -- evidence -------------------------------------------------------------------
  toggleEvidence() {
    const open = this.evidence.hidden;
    this.evidence.hidden = !open;
    this.evidenceButton.setAttribute('aria-expanded', String(open));
    this.evidenceButton.classList.toggle('open', open);
    if (open) this.loadEvidence();
  }

  async loadEvidence() {
    const task = this.task;
    if (!task) return;
    if (!this.evidence.firstChild) {
      this.evidence.append(el('p', { class: 'task-empty', text: 'Loading the evidence…' }));
    }
    this.evidence.dataset.state = 'loading';
    try {
      const answer = await api.task(task.groupId, task.id);
      if (this.task?.id !== task.id) return;
      this.evidence.replaceChildren(...evidenceNodes(answer?.evidence || [], this.persona));
      this.evidence.dataset.state = 'ready';
    } catch (err) {
      this.evidence.replaceChildren(
        el('p', { class: 'task-error', text: `Could not load the evidence: ${err.message}` }),
      );
      this.evidence.dataset.state = 'error';
    }
  }
}

export class TaskCards {
  /**
   * `timeline` is the chat timeline (timeline.js); `persona(id)` gives a VP's
   * name; `toast(text, kind)` tells the user.
   */
  constructor({ timeline, persona, toast }) {
    this.timeline = timeline;
    this.persona = persona;
    this.toast = toast;
    this.forget();
  }

  forget() {
    this.cards = new Map();
    // turnId -> {taskId, runId, role}: the bubbles that are runs of a task.
    this.runs = new Map();
  }

  /** The group's tasks, for a group being opened; [] when they cannot be read. */
  async fetch(groupId) {
    try {
      return await api.tasks(groupId);
    } catch (err) {
      if (err.status !== 401 && err.status !== 404) this.toast(`Could not load the tasks: ${err.message}`);
      return [];
    }
  }

  /** Draw the tasks of the group just opened (newest first, as listed); forgets earlier cards. */
  show(tasks) {
    this.forget();
    for (const task of [...(tasks || [])].reverse()) this.render(task);
  }

  /** A `task_changed` frame. */
  changed(frame) {
    if (frame.task && frame.task.id) this.render(frame.task);
  }

  render(task) {
    let card = this.cards.get(task.id);
    if (!card) {
      card = new TaskCard({
        persona: this.persona,
        toast: this.toast,
        focusTurn: (turnId) => this.focusTurn(turnId),
        onTask: (changed) => this.render(changed),
      });
      this.cards.set(task.id, card);
    }
    this.timeline.mutate(() => {
      card.update(task);
      this.place(card, task);
    });
    this.label(task);
  }

  /** Put a card right under the message that started its task, or at the end until it is shown. */
  place(card, task) {
    if (card.anchored && card.root.isConnected) return;
    const id = task.attempts?.[0]?.messageId || '';
    card.root.dataset.anchor = id;
    const list = this.timeline.list;
    const message = id ? list.querySelector(`:scope > [data-message-id="${CSS.escape(id)}"]`) : null;
    if (message) {
      message.after(card.root);
      card.anchored = true;
    } else if (!card.root.isConnected) {
      card.anchored = false;
      list.append(card.root);
    }
  }

  /** Earlier messages were loaded: cards whose message is now shown move under it. */
  reanchor() {
    for (const card of this.cards.values()) {
      if (!card.anchored && card.task) this.place(card, card.task);
    }
  }

  /** Label the bubbles of the task's runs (and remember them for bubbles still to come). */
  label(task) {
    for (const attempt of task.attempts || []) {
      for (const run of attempt.runs || []) {
        if (!run.turnId) continue;
        const info = { taskId: task.id, runId: run.id, role: run.role, attempt: attempt.index };
        this.runs.set(run.turnId, info);
        this.timeline.turns.get(run.turnId)?.markTask(info);
      }
    }
  }

  /** A new bubble: label it if it is a known run. */
  labelBubble(bubble) {
    const info = this.runs.get(bubble.turnId);
    if (info) bubble.markTask(info);
  }

  focusTurn(turnId) {
    const bubble = this.timeline.turns.get(turnId);
    if (!bubble) {
      this.toast('That reply is not on screen.', 'info');
      return;
    }
    bubble.root.scrollIntoView({ block: 'center', behavior: 'smooth' });
    bubble.root.classList.remove('flash');
    void bubble.root.offsetWidth; // restart the animation
    bubble.root.classList.add('flash');
  }
}
