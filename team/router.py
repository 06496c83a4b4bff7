"""The intent router: is a person's message plain chat, or an action on a task?

Before team mode does anything with a message, :func:`route` asks a model
one narrow question: which :class:`~protocol.tasks.TaskAction` fits this
message, given the group's active task (if any) and the last few messages.
The model answers with a small JSON object ``{action, reason, short_title}``
and never talks to the person; the router's prompt says so and the answer
is parsed, not shown.

Invariants of the returned :class:`~protocol.tasks.RouterDecision`:

- ``continue_task``, ``revise_task``, ``close_task`` and ``abandon_task``
  come back only when there is an active task, that is one still open; a
  closed task given as ``active`` counts as none. Without one, a model's
  ``continue``/``revise`` becomes ``new_task`` (the person does want work
  done) and ``close``/``abandon`` becomes ``simple_chat``;
- ``short_title`` has at most :data:`TITLE_CHARS` characters, and a
  ``new_task`` always has one (derived from the message when the model
  gave none);
- ``fallback`` is True exactly when the action is not the model's own
  choice: the provider failed, it timed out twice, or its answer was not a
  JSON object with a known action. The fallback action is ``continue_task``
  with an active task (an unfinished task is the likelier subject) and
  ``simple_chat`` without one (a plain reply is the safest thing to do);
- a fallback's ``reason`` is one of the short phrases ``FALLBACK_*`` below,
  never the text of the error: a decision is stored and shown to people,
  and an engine or Ray error can hold a traceback, host names and process
  ids. The error itself goes to the log.

The prompt asks for ``reason`` and ``short_title`` in the group's language,
so a Chinese group's task gets a Chinese title.

Only a timeout is retried, once: a provider that is down stays down for the
next second, so retrying it would only delay the reply.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from protocol.tasks import RouterDecision, Task, TaskAction, task_payload
from team.calls import Complete, ModelCall, Purpose, parse_json_object
from team.text import excerpt, language_name, one_line

__all__ = [
    "FALLBACK_BAD_ANSWER",
    "FALLBACK_TIMEOUT",
    "FALLBACK_UNKNOWN_ACTION",
    "FALLBACK_UNREACHABLE",
    "RECENT_CHARS",
    "RECENT_MESSAGES",
    "ROUTER_SKILL",
    "ROUTER_TIMEOUT_S",
    "TITLE_CHARS",
    "RecentMessage",
    "build_prompt",
    "route",
    "title_from",
]

log = logging.getLogger(__name__)

ROUTER_TIMEOUT_S = 20.0
# How much of the conversation the router sees: the newest messages, each cut.
RECENT_MESSAGES = 8
RECENT_CHARS = 500
TITLE_CHARS = 60
# The skill whose body is the router's guidance (a data-directory file or a
# group's learned skill of this name); it is never activated for a run.
ROUTER_SKILL = "intent-router"
GUIDANCE_CHARS = 4_000
# The router answers a JSON object of three short fields; this is ample.
ROUTER_MAX_TOKENS = 300

# A fallback decision's reason: what went wrong, classified, never the error's own text.
FALLBACK_UNREACHABLE = "the model could not be reached"
FALLBACK_TIMEOUT = "the model timed out twice"
FALLBACK_BAD_ANSWER = "the answer was not valid JSON"
FALLBACK_UNKNOWN_ACTION = "the answer named no known action"

# The actions that act on an existing task; each needs an open one.
_NEEDS_ACTIVE = frozenset(
    {
        TaskAction.CONTINUE_TASK,
        TaskAction.REVISE_TASK,
        TaskAction.CLOSE_TASK,
        TaskAction.ABANDON_TASK,
    }
)

SYSTEM = (
    "You are the intent router of a group chat with several AI VPs. Your only job is "
    "to decide how the newest message of a person is handled: as plain chat, or as an "
    "action on a task. Return compact JSON only. Never answer the person, never explain "
    "outside the JSON."
)

_ACTIONS = (
    "Actions:\n"
    "- simple_chat: ordinary conversation; the VPs reply as usual, no task is made.\n"
    "- new_task: the person asks for substantial work with a deliverable; start a new task.\n"
    "- continue_task: more of the same work on the active task (same goal, another attempt).\n"
    "- revise_task: the person wants changes to the active task's result.\n"
    "- close_task: the person says the active task is finished or accepts its result.\n"
    "- abandon_task: the person drops the active task."
)

_POLICY = (
    "Critical policy:\n"
    "- Greetings, small talk, opinions, quick questions and questions about a VP are "
    "simple_chat.\n"
    "- Only a request for substantial work or a deliverable (a plan, a design, a document, "
    "an analysis, code) is new_task.\n"
    "- With an active task: more of the same is continue_task, requested changes are "
    "revise_task, acceptance or 'it is done' is close_task, dropping it is abandon_task.\n"
    "- A request for different work while a task is active is new_task.\n"
    "- Never choose continue_task, revise_task, close_task or abandon_task when the "
    "active task is null.\n"
    "- When unsure, choose simple_chat."
)


@dataclass(frozen=True, slots=True)
class RecentMessage:
    """One message of the recent conversation the router sees.

    ``role`` is ``"user"`` (a person) or ``"assistant"`` (a VP); ``author``
    is the person's or the VP's name.
    """

    role: str
    author: str
    text: str


def _open(active: Task | None) -> Task | None:
    """The task the router may act on: ``active`` while it is open, else None."""
    return active if active is not None and active.open else None


def build_prompt(
    message: str,
    *,
    active: Task | None,
    recent: Sequence[RecentMessage],
    language: str = "en",
    guidance: str | None = None,
) -> str:
    """The router's user prompt, in the order the design fixes (the offline model parses it)."""
    task = _open(active)
    conversation = [
        {"role": m.role, "author": m.author, "text": excerpt(m.text, RECENT_CHARS)}
        for m in list(recent)[-RECENT_MESSAGES:]
    ]
    parts = ["Decide how to route the newest message of a person in this group chat."]
    if guidance and guidance.strip():
        parts.append("Intent router guidance:\n" + excerpt(guidance.strip(), GUIDANCE_CHARS))
    parts += [
        _ACTIONS,
        _POLICY,
        "Return JSON only with keys: action, reason, short_title.",
        f"Write reason and short_title in {language_name(language)}. short_title: at most "
        f"{TITLE_CHARS} characters; empty for simple_chat.",
        "Active task:\n" + json.dumps(task_payload(task) if task else None, ensure_ascii=False),
        "Recent conversation:\n" + json.dumps(conversation, ensure_ascii=False),
        "Current user message:\n" + message,
    ]
    return "\n\n".join(parts)


async def route(
    complete: Complete,
    message: str,
    *,
    active: Task | None,
    recent: Sequence[RecentMessage],
    language: str = "en",
    guidance: str | None = None,
    timeout_s: float = ROUTER_TIMEOUT_S,
) -> RouterDecision:
    """Decide what ``message`` is: plain chat or an action on a task (see the module docstring).

    Never raises for a model's failure: every failure becomes a fallback
    decision whose ``reason`` is a ``FALLBACK_*`` phrase saying what went wrong.
    """
    task = _open(active)
    call = ModelCall(
        purpose=Purpose.ROUTER,
        system=SYSTEM,
        prompt=build_prompt(
            message, active=task, recent=recent, language=language, guidance=guidance
        ),
        max_tokens=ROUTER_MAX_TOKENS,
        timeout_s=timeout_s,
        language=language,
    )
    text: str | None = None
    for attempt in (1, 2):
        try:
            text = await asyncio.wait_for(complete(call), timeout_s)
            break
        except TimeoutError:
            log.info("router call timed out (attempt %s of 2)", attempt)
        except Exception as exc:  # any provider failure: no retry, see the module docstring
            log.warning("router call failed: %r", exc)
            return _fallback(task, FALLBACK_UNREACHABLE)
    if text is None:
        return _fallback(task, FALLBACK_TIMEOUT)
    return _decide(text, message, task)


def _fallback(task: Task | None, why: str) -> RouterDecision:
    action = TaskAction.CONTINUE_TASK if task is not None else TaskAction.SIMPLE_CHAT
    title = task.title if task is not None else ""
    return RouterDecision(
        action=action, reason=why, short_title=excerpt(title, TITLE_CHARS), fallback=True
    )


def _decide(text: str, message: str, task: Task | None) -> RouterDecision:
    """The decision in the model's answer ``text``, made to keep the invariants."""
    raw = parse_json_object(text)
    if raw is None:
        log.info("router answer was not a JSON object: %.200r", text)
        return _fallback(task, FALLBACK_BAD_ANSWER)
    action = _action(raw.get("action"))
    if action is None:
        log.info("router answer named an unknown action: %.200r", raw.get("action"))
        return _fallback(task, FALLBACK_UNKNOWN_ACTION)
    reason = _text(raw.get("reason"))
    if action in _NEEDS_ACTIVE and task is None:
        wanted = action
        keeps_work = action in (TaskAction.CONTINUE_TASK, TaskAction.REVISE_TASK)
        action = TaskAction.NEW_TASK if keeps_work else TaskAction.SIMPLE_CHAT
        reason = f"{reason} ({wanted.value} without an active task: {action.value})".strip()
    title = excerpt(_text(raw.get("short_title")), TITLE_CHARS)
    if not title and action is TaskAction.NEW_TASK:
        title = title_from(message)
    return RouterDecision(action=action, reason=reason, short_title=title)


def _action(value: Any) -> TaskAction | None:
    if not isinstance(value, str):
        return None
    try:
        return TaskAction(value.strip().lower())
    except ValueError:
        return None


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def title_from(message: str) -> str:
    """A short title for a task made from ``message``: its first words, one line."""
    return one_line(message, TITLE_CHARS) or "Task"
