// Parts of a task card (tasks.js): the evidence of its attempts and the
// skill draft learned from it once accepted.
//
// Evidence is what each attempt did, as recorded when it ended: its plan's
// mode, every run with its VP, status, tools and output. Outputs are cut
// short here (the whole replies are the bubbles above) and rendered through
// the Markdown renderer and sanitiser; everything else goes in as text.

import { api } from './api.js';
import { el, formatTime, truncate } from './dom.js';
import { renderMarkdown } from './markdown.js';

const OUTPUT_MAX = 600;
const SKILL_PREVIEW_MAX = 4000;

/** "2.3 s" between two Unix times, or '' when one is missing. */
export function duration(start, end) {
  if (typeof start !== 'number' || typeof end !== 'number' || end < start) return '';
  const s = end - start;
  return s < 60 ? `${s.toFixed(1)} s` : `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

/** A skill as a run names it: a guidance made for that one run says so. */
export function skillName(skill) {
  const name = String(skill.name || '');
  if (skill.source === 'ephemeral' || name.startsWith('ephemeral:')) {
    return `${name.replace(/^ephemeral:/, '')} (guidance)`;
  }
  return name;
}

/** A cut output, rendered as sanitised Markdown. */
function outputNode(text, testid) {
  const source = String(text || '');
  const node = el('div', { class: 'task-output', testid });
  renderMarkdown(node, truncate(source, OUTPUT_MAX));
  if (source.length > OUTPUT_MAX) {
    node.append(el('p', { class: 'task-cut', text: `(cut: ${source.length} characters in all)` }));
  }
  return node;
}

function evidenceRun(run, item, persona) {
  const status = run.status || 'pending';
  const tags = [];
  if (item.finalRun === run.id) tags.push(el('span', { class: 'tag', text: 'final' }));
  if (item.acceptedRun === run.id) tags.push(el('span', { class: 'tag task-accepted', text: 'accepted' }));
  const tools = run.tools || [];
  const skills = (run.skills || []).filter((s) => s.name).map(skillName);
  return el(
    'div',
    { class: 'task-ev-run', testid: 'task-evidence-run', dataset: { runId: run.id, runStatus: status } },
    el(
      'div',
      { class: 'task-ev-run-head' },
      el('span', { class: 'task-run-id', text: run.id }),
      el('span', { class: 'task-run-vp', title: persona(run.vp).name, text: `@${run.vp}` }),
      el('span', { class: 'task-ev-status', dataset: { status }, text: status }),
      el('span', { class: 'task-run-time', text: duration(run.startedAt, run.finishedAt) }),
      ...tags,
    ),
    run.task ? el('div', { class: 'task-ev-line', text: truncate(run.task, 300) }) : null,
    skills.length ? el('div', { class: 'task-ev-line', text: `skills: ${skills.join(', ')}` }) : null,
    tools.length
      ? el(
        'ul',
        { class: 'task-ev-tools', testid: 'task-evidence-tools' },
        ...tools.map((t) =>
          el(
            'li',
            { dataset: { ok: t.ok === false ? 'false' : 'true' } },
            el('span', { class: 'task-ev-tool', text: t.tool }),
            ` ${t.ok === false ? '✕' : '✓'} `,
            t.summary ? truncate(t.summary, 160) : '',
          ),
        ),
      )
      : null,
    run.error ? el('div', { class: 'task-run-error', text: run.error }) : null,
    run.output ? outputNode(run.output, 'task-evidence-output') : null,
  );
}

/** A line of evidence with a small label before it. */
function labelled(label, text) {
  return el('div', { class: 'task-ev-line' }, el('span', { class: 'task-ev-label', text: `${label} ` }), text);
}

/** The evidence of every attempt of a task, as nodes for the card's evidence box. */
export function evidenceNodes(items, persona) {
  if (!items.length) {
    return [el('p', { class: 'task-empty', text: 'No evidence yet: it is recorded when an attempt ends.' })];
  }
  return items.map((item) => {
    const runs = item.runs || [];
    const shown = new Set(runs.map((r) => r.id));
    return el(
      'section',
      { class: 'task-ev', testid: 'task-evidence-attempt', dataset: { attempt: String(item.attempt) } },
      el(
        'h4',
        { class: 'task-ev-head' },
        `Attempt ${item.attempt} · ${item.mode}`,
        item.recordedAt ? el('time', { class: 'task-run-time', text: formatTime(item.recordedAt) }) : null,
      ),
      labelled('asked', truncate(item.request || '', 400)),
      (item.toolNames || []).length ? labelled('tools', item.toolNames.join(', ')) : null,
      ...runs.map((run) => evidenceRun(run, item, persona)),
      // The final output is a run's above; shown here only when that run is not.
      item.finalOutput && !shown.has(item.finalRun) ? outputNode(item.finalOutput, 'task-evidence-final') : null,
    );
  });
}

/**
 * The skill draft learned from an accepted task: its name and description,
 * what the safety check found, and Publish (unless it is blocked or out).
 */
export class DraftLine {
  constructor({ toast }) {
    this.toast = toast;
    this.id = null;
    this.draft = null;
    this.root = el('div', { class: 'task-draft', testid: 'task-draft', hidden: true });
  }

  /** Show the draft `draftId` (read once; a later id reads again). */
  async show(draftId) {
    if (this.id === draftId) return;
    this.id = draftId;
    this.root.hidden = false;
    this.root.dataset.draftId = draftId;
    this.draw(null);
    try {
      const drafts = await api.drafts();
      if (this.id !== draftId) return;
      this.draw(drafts.find((d) => d.id === draftId) || null);
    } catch (err) {
      if (this.id !== draftId) return;
      this.id = null; // the next change of the task tries again
      this.root.replaceChildren(
        el('span', { class: 'task-draft-label', text: 'Skill draft' }),
        el('span', { class: 'task-error', text: `could not be read: ${err.message}` }),
      );
    }
  }

  draw(draft) {
    this.draft = draft;
    const status = draft?.status || (draft ? 'draft' : 'loading');
    this.root.dataset.status = status;
    const parts = [el('span', { class: 'task-draft-label', text: 'Skill draft' })];
    if (!draft) {
      parts.push(el('span', { class: 'task-draft-desc', text: 'reading…' }));
      this.root.replaceChildren(...parts);
      return;
    }
    parts.push(
      el('strong', { class: 'task-draft-name', testid: 'task-draft-name', text: draft.name }),
      el('span', { class: 'task-draft-desc', text: draft.description || '' }),
    );
    if (draft.action && draft.action !== 'new') parts.push(el('span', { class: 'tag', text: draft.action }));
    if (status === 'published') {
      parts.push(el('span', { class: 'task-draft-state', testid: 'task-draft-status', text: 'published' }));
    } else if (status === 'blocked') {
      parts.push(el('span', { class: 'task-draft-state blocked', testid: 'task-draft-status', text: 'blocked' }));
    } else {
      parts.push(
        el('button', {
          type: 'button',
          class: 'task-button primary',
          testid: 'task-draft-publish',
          text: 'Publish',
          title: 'Make this skill available to every future task',
          onclick: (event) => this.publish(event.target),
        }),
      );
    }
    const problems = draft.safety?.problems || [];
    const extra = [];
    if (problems.length) {
      extra.push(
        el(
          'ul',
          { class: 'task-draft-problems', testid: 'task-draft-problems' },
          ...problems.map((p) => el('li', { text: p })),
        ),
      );
    }
    if (draft.changeReason) extra.push(el('div', { class: 'task-ev-line', text: draft.changeReason }));
    if (draft.content) {
      const body = el('div', { class: 'task-output' });
      renderMarkdown(body, truncate(draft.content, SKILL_PREVIEW_MAX));
      extra.push(el('details', { class: 'task-draft-content' }, el('summary', { text: 'The skill' }), body));
    }
    this.root.replaceChildren(el('div', { class: 'task-draft-line' }, ...parts), ...extra);
  }

  async publish(button) {
    const draft = this.draft;
    if (!draft) return;
    button.disabled = true;
    try {
      const answer = await api.publishDraft(draft.id);
      this.draw(answer?.draft || { ...draft, status: 'published' });
      this.toast(`The skill “${draft.name}” is published.`, 'info');
    } catch (err) {
      button.disabled = false;
      if (err.status === 409) {
        // Published meanwhile, or blocked: show the draft as it is now.
        this.id = null;
        this.show(draft.id);
      }
      this.toast(`Could not publish the skill: ${err.message}`);
    }
  }
}
