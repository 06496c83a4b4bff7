// The ask-user dialog: a VP's tool needs a decision from the person.
//
// Questions queue up; one is shown at a time. A question disappears when it
// is answered, when it expires, or when the turn that asked it ends.
//
// Open questions are also kept in sessionStorage: the stored history has no
// questions in it and a reload subscribes after them, so without this a
// reload would leave a VP waiting for an answer nobody can give.

import { avatar, el } from './dom.js';

const SAVED_KEY = 'yeaft.questions';

function loadSaved() {
  try {
    const list = JSON.parse(sessionStorage.getItem(SAVED_KEY) || '[]');
    return new Map(list.map((q) => [q.requestId, q]));
  } catch {
    return new Map();
  }
}

export class AskDialog {
  /**
   * `persona(id)` labels the asker; `onAnswer(question, answer)` sends the
   * reply; `onWaiting(count)` reports questions put off with "Later".
   */
  constructor({ dialog, persona, onAnswer, onWaiting }) {
    this.dialog = dialog;
    this.persona = persona;
    this.onAnswer = onAnswer;
    this.onWaiting = onWaiting || (() => {});
    this.queue = [];
    this.current = null;
    this.expiryTimer = null;
    this.saved = loadSaved();
    // Questions answered from this page, by request id: asked again if the
    // server refuses the answer (it did not fit), until their turn ends.
    this.sent = new Map();
    dialog.addEventListener('cancel', (event) => {
      // Escape only hides the question for now; it stays answerable.
      event.preventDefault();
      this.dismiss();
    });
  }

  /** An ask_user_question frame. */
  ask(question) {
    if (this.isExpired(question)) return;
    this.remember(question);
    if (this.current?.requestId === question.requestId) return;
    if (this.queue.some((q) => q.requestId === question.requestId)) return;
    this.queue.push(question);
    if (!this.current) this.next();
  }

  isExpired(question) {
    return typeof question.expiresAt === 'number' && question.expiresAt * 1000 <= Date.now();
  }

  /** Drop questions of a turn that has ended. */
  forgetTurn(turnId) {
    for (const [id, q] of this.sent) if (q.turnId === turnId) this.sent.delete(id);
    for (const q of this.saved.values()) if (q.turnId === turnId) this.forget(q);
    this.queue = this.queue.filter((q) => q.turnId !== turnId);
    if (this.current && this.current.turnId === turnId) this.next();
    else if (!this.current) this.onWaiting(this.queue.length);
  }

  remember(question) {
    this.saved.set(question.requestId, question);
    this.save();
  }

  forget(question) {
    if (this.saved.delete(question.requestId)) this.save();
  }

  save() {
    try {
      sessionStorage.setItem(SAVED_KEY, JSON.stringify([...this.saved.values()]));
    } catch {
      // Without storage the questions simply do not survive a reload.
    }
  }

  /** Ask again the saved questions of a group whose turns have not ended. */
  restore(groupId, endedTurns) {
    for (const question of [...this.saved.values()]) {
      if (question.groupId !== groupId) continue;
      if (this.isExpired(question) || endedTurns.has(question.turnId)) this.forget(question);
      else this.ask(question);
    }
  }

  /** Hide every question (the user left the group); saved ones come back later. */
  reset() {
    this.queue = [];
    this.current = null;
    clearTimeout(this.expiryTimer);
    if (this.dialog.open) this.dialog.close();
    this.onWaiting(0);
  }

  /** The server refused the answer to `requestId` (the question stays open): ask again. */
  refused(requestId) {
    const question = this.sent.get(requestId);
    if (!question) return;
    this.sent.delete(requestId);
    this.ask(question);
  }

  /** Show the questions put off with "Later" again. */
  reopen() {
    if (!this.current) this.next();
  }

  next() {
    clearTimeout(this.expiryTimer);
    if (this.current && this.isExpired(this.current)) this.forget(this.current);
    this.current = null;
    while (this.queue.length && this.isExpired(this.queue[0])) this.forget(this.queue.shift());
    const question = this.queue.shift();
    this.onWaiting(0);
    if (!question) {
      if (this.dialog.open) this.dialog.close();
      return;
    }
    this.current = question;
    this.render(question);
    if (!this.dialog.open) this.dialog.showModal();
    if (typeof question.expiresAt === 'number') {
      const ms = Math.max(0, question.expiresAt * 1000 - Date.now());
      // setTimeout cannot wait longer than about 24.8 days.
      this.expiryTimer = setTimeout(() => this.next(), Math.min(ms, 2 ** 31 - 1));
    }
  }

  dismiss() {
    // Put the question back at the end so it comes round again.
    if (this.current) this.queue.push(this.current);
    this.current = null;
    clearTimeout(this.expiryTimer);
    if (this.dialog.open) this.dialog.close();
    this.onWaiting(this.queue.length);
  }

  answer(value) {
    const question = this.current;
    if (!question) return;
    this.sent.set(question.requestId, question);
    this.onAnswer(question, value);
    this.forget(question);
    this.next();
  }

  render(question) {
    const who = this.persona(question.vpId || 'system');
    const choices = Array.isArray(question.choices) ? question.choices : [];
    const head = el(
      'header',
      { class: 'ask-head' },
      avatar(question.vpId || 'system', who.name),
      el('span', { class: 'ask-who', text: `${who.name} asks` }),
    );
    const prompt = el('p', { class: 'ask-prompt', testid: 'ask-prompt', text: question.prompt });
    // An approval question names the tool call it would let through.
    const tool = question.tool
      ? el(
          'div',
          { class: 'ask-tool', testid: 'ask-tool' },
          el('code', { class: 'ask-tool-name', testid: 'ask-tool-name', text: question.tool.name }),
          el('pre', { class: 'ask-tool-args', testid: 'ask-tool-args', text: question.tool.arguments }),
        )
      : '';
    let controls;
    if (choices.length && question.multiSelect) {
      controls = this.multiChoice(choices, question.allowOther);
    } else if (choices.length) {
      controls = el(
        'div',
        { class: 'ask-one' },
        el(
          'div',
          { class: 'ask-choices' },
          ...choices.map((choice) =>
            el('button', {
              type: 'button',
              class: 'ask-choice',
              testid: 'ask-choice',
              text: choice,
              onclick: () => this.answer(choice),
            }),
          ),
        ),
        // Free words beside the buttons only when the question allows them.
        question.allowOther ? this.freeText('Or your own answer') : '',
      );
    } else {
      controls = this.freeText('Your answer');
    }
    const later = el('button', {
      type: 'button',
      class: 'ask-later quiet',
      text: 'Later',
      onclick: () => this.dismiss(),
    });
    const foot = el('footer', { class: 'ask-foot' }, later);
    this.dialog.replaceChildren(head, prompt, tool, controls, foot);
  }

  freeText(label) {
    const input = el('textarea', {
      class: 'ask-input',
      testid: 'ask-input',
      rows: '3',
      'aria-label': label,
      placeholder: label,
    });
    const form = el(
      'form',
      {
        class: 'ask-form',
        onsubmit: (event) => {
          event.preventDefault();
          if (input.value.trim()) this.answer(input.value.trim());
        },
      },
      input,
      el('button', { type: 'submit', class: 'primary', testid: 'ask-submit', text: 'Answer' }),
    );
    input.addEventListener('keydown', (event) => {
      if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
    queueMicrotask(() => input.focus());
    return form;
  }

  /**
   * Checkboxes for a multi-select question, answered with the list of the
   * ticked choices (and the person's own words, when the question allows
   * them); Answer stays disabled until there is something to send.
   */
  multiChoice(choices, allowOther) {
    const boxes = choices.map((choice) =>
      el('input', { type: 'checkbox', value: choice, testid: 'ask-check' }),
    );
    const other = allowOther
      ? el('input', {
          type: 'text',
          class: 'ask-other',
          testid: 'ask-other',
          'aria-label': 'Your own answer',
          placeholder: 'Your own answer',
        })
      : null;
    const submit = el('button', {
      type: 'submit',
      class: 'primary',
      testid: 'ask-submit',
      text: 'Answer',
    });
    const picked = () => {
      const list = boxes.filter((box) => box.checked).map((box) => box.value);
      const own = other ? other.value.trim() : '';
      return own ? [...list, own] : list;
    };
    const refresh = () => {
      submit.disabled = picked().length === 0;
    };
    for (const box of boxes) box.addEventListener('change', refresh);
    if (other) other.addEventListener('input', refresh);
    refresh();
    return el(
      'form',
      {
        class: 'ask-form',
        onsubmit: (event) => {
          event.preventDefault();
          const list = picked();
          if (list.length) this.answer(list);
        },
      },
      el(
        'fieldset',
        { class: 'ask-choices ask-checks', testid: 'ask-checks' },
        el('legend', { class: 'quiet', text: 'Pick one or more' }),
        ...boxes.map((box, i) =>
          el('label', { class: 'ask-check' }, box, el('span', { text: choices[i] })),
        ),
      ),
      other || '',
      submit,
    );
  }
}
