"""The intent router: each decision, its fallbacks, and what its prompt shows the model."""

from __future__ import annotations

import asyncio
import json

import pytest

from protocol.tasks import Attempt, Task, TaskAction, TaskStatus
from team.calls import CallFailed, ModelCall, Purpose
from team.router import (
    FALLBACK_BAD_ANSWER,
    FALLBACK_TIMEOUT,
    FALLBACK_UNKNOWN_ACTION,
    FALLBACK_UNREACHABLE,
    RECENT_CHARS,
    TITLE_CHARS,
    RecentMessage,
    build_prompt,
    route,
)

# What a provider error raised through Ray can look like: none of it may reach a decision.
RAY_ERROR = (
    "ray::VPActor.complete() (pid=48213, ip=10.0.3.17, actor_id=af31c0d2)\n"
    "Traceback (most recent call last):\n"
    '  File "/srv/app/engine/providers/openai.py", line 211, in stream\n'
    "httpx.ConnectError: [Errno 111] Connection refused to llm-7.internal:8443"
)


class Script:
    """A Complete that answers from a list: text, an exception to raise, or 'hang'."""

    def __init__(self, *steps: str | BaseException) -> None:
        self.steps = list(steps)
        self.calls: list[ModelCall] = []

    async def __call__(self, call: ModelCall) -> str:
        self.calls.append(call)
        step = self.steps.pop(0)
        if isinstance(step, BaseException):
            raise step
        if step == "hang":
            await asyncio.Event().wait()  # never set: only the router's timeout ends it
        return step


def answer(action: str, reason: str = "because", title: str = "") -> str:
    return json.dumps({"action": action, "reason": reason, "short_title": title})


def task(status: TaskStatus = TaskStatus.REVIEW) -> Task:
    return Task(
        id="t1",
        group_id="g1",
        title="Launch plan",
        goal="Plan the spring launch",
        status=status,
        created_by="ann",
        created_at=1.0,
        updated_at=2.0,
        attempts=[
            Attempt(
                index=1,
                request="plan the launch",
                message_id="m1",
                action=TaskAction.NEW_TASK,
                started_at=1.0,
            )
        ],
    )


@pytest.mark.parametrize("action", [a.value for a in TaskAction])
async def test_each_action_with_an_active_task_is_taken_as_given(action: str) -> None:
    complete = Script(answer(action, title="Launch plan"))
    decision = await route(complete, "hello", active=task(), recent=[])
    assert decision.action == action and not decision.fallback
    assert decision.reason == "because"
    assert complete.calls[0].purpose is Purpose.ROUTER


async def test_new_task_without_a_title_gets_one_from_the_message() -> None:
    message = "Please write a detailed competitive analysis of our three main rivals in Europe"
    decision = await route(Script(answer("new_task")), message, active=None, recent=[])
    assert decision.action is TaskAction.NEW_TASK
    assert decision.short_title and len(decision.short_title) <= TITLE_CHARS
    assert decision.short_title.startswith("Please write a detailed")


async def test_a_long_title_is_cut() -> None:
    complete = Script(answer("new_task", title="x" * 200))
    decision = await route(complete, "write it", active=None, recent=[])
    assert len(decision.short_title) == TITLE_CHARS


@pytest.mark.parametrize(
    ("given", "becomes"),
    [
        ("continue_task", TaskAction.NEW_TASK),
        ("revise_task", TaskAction.NEW_TASK),
        ("close_task", TaskAction.SIMPLE_CHAT),
        ("abandon_task", TaskAction.SIMPLE_CHAT),
    ],
)
async def test_a_task_action_without_an_active_task_is_mapped(
    given: str, becomes: TaskAction
) -> None:
    decision = await route(Script(answer(given)), "more please", active=None, recent=[])
    assert decision.action is becomes and not decision.fallback
    assert given in decision.reason


async def test_a_closed_task_is_not_an_active_one() -> None:
    complete = Script(answer("continue_task"))
    decision = await route(complete, "go on", active=task(TaskStatus.ACCEPTED), recent=[])
    assert decision.action is TaskAction.NEW_TASK
    assert "Active task:\nnull" in complete.calls[0].prompt


async def test_provider_error_falls_back_at_once_to_continue_with_an_active_task() -> None:
    complete = Script(CallFailed("no key"), answer("new_task"))
    decision = await route(complete, "hi", active=task(), recent=[])
    assert decision.action is TaskAction.CONTINUE_TASK and decision.fallback
    assert decision.reason == FALLBACK_UNREACHABLE
    assert len(complete.calls) == 1  # an unavailable provider is not retried


async def test_provider_error_falls_back_to_simple_chat_without_a_task() -> None:
    complete = Script(RuntimeError("boom"))
    decision = await route(complete, "write a plan", active=None, recent=[])
    assert decision.action is TaskAction.SIMPLE_CHAT and decision.fallback
    assert len(complete.calls) == 1


@pytest.mark.parametrize("error", [CallFailed(RAY_ERROR), RuntimeError(RAY_ERROR)])
async def test_an_engine_error_never_reaches_the_decision(error: Exception) -> None:
    for active in (None, task()):
        decision = await route(Script(error), "write a plan", active=active, recent=[])
        assert decision.fallback and decision.reason == FALLBACK_UNREACHABLE
        shown = decision.model_dump_json()
        for secret in ("pid=", "10.0.3.17", "Traceback", "llm-7.internal", "Errno"):
            assert secret not in shown


async def test_one_timeout_is_retried() -> None:
    complete = Script("hang", answer("close_task"))
    decision = await route(complete, "done", active=task(), recent=[], timeout_s=0.01)
    assert decision.action is TaskAction.CLOSE_TASK and not decision.fallback
    assert len(complete.calls) == 2


async def test_a_timeout_raised_by_the_model_counts_as_a_timeout() -> None:
    complete = Script(TimeoutError(), answer("simple_chat"))
    decision = await route(complete, "hey", active=None, recent=[])
    assert decision.action is TaskAction.SIMPLE_CHAT and not decision.fallback


async def test_two_timeouts_fall_back() -> None:
    complete = Script("hang", "hang", answer("new_task"))
    decision = await route(complete, "go on", active=task(), recent=[], timeout_s=0.01)
    assert decision.action is TaskAction.CONTINUE_TASK and decision.fallback
    assert decision.reason == FALLBACK_TIMEOUT
    assert len(complete.calls) == 2
    complete = Script(TimeoutError(), TimeoutError())
    decision = await route(complete, "go on", active=None, recent=[])
    assert decision.action is TaskAction.SIMPLE_CHAT and decision.fallback


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("I think you should chat", FALLBACK_BAD_ANSWER),
        ("{not json", FALLBACK_BAD_ANSWER),
        ("[1, 2]", FALLBACK_BAD_ANSWER),
        ('{"action": "dance"}', FALLBACK_UNKNOWN_ACTION),
        ('{"action": "' + "x" * 5_000 + '"}', FALLBACK_UNKNOWN_ACTION),
        ("{}", FALLBACK_UNKNOWN_ACTION),
    ],
)
async def test_an_unusable_answer_falls_back(text: str, why: str) -> None:
    decision = await route(Script(text), "hi", active=None, recent=[])
    assert decision.action is TaskAction.SIMPLE_CHAT and decision.fallback
    assert decision.reason == why
    decision = await route(Script(text), "hi", active=task(), recent=[])
    assert decision.action is TaskAction.CONTINUE_TASK and decision.fallback
    assert decision.reason == why


async def test_a_fenced_answer_amid_prose_is_read() -> None:
    text = "Sure:\n```json\n" + answer("NEW_TASK", title="Launch") + "\n```"
    decision = await route(Script(text), "plan it", active=None, recent=[])
    assert decision.action is TaskAction.NEW_TASK and decision.short_title == "Launch"


async def test_the_prompt_shows_the_last_eight_messages_and_the_active_task() -> None:
    recent = [
        RecentMessage("user" if i % 2 else "assistant", f"a{i}", f"message number {i}")
        for i in range(12)
    ]
    recent.append(RecentMessage("user", "ann", "y" * 2000))
    complete = Script(answer("continue_task"))
    await route(complete, "and the budget?", active=task(), recent=recent, guidance="Prefer tasks.")
    prompt = complete.calls[0].prompt
    shown = json.loads(prompt.split("Recent conversation:\n")[1].split("\n\n")[0])
    assert [m["author"] for m in shown] == [f"a{i}" for i in range(5, 12)] + ["ann"]
    assert len(shown[-1]["text"]) <= RECENT_CHARS
    active = json.loads(prompt.split("Active task:\n")[1].split("\n\n")[0])
    assert active["id"] == "t1" and active["title"] == "Launch plan"
    assert active["lastRequest"] == "plan the launch"
    assert prompt.endswith("Current user message:\nand the budget?")
    assert "Intent router guidance:\nPrefer tasks." in prompt
    assert "Return JSON only with keys: action, reason, short_title." in prompt


def test_the_prompt_keeps_the_seed_order() -> None:
    prompt = build_prompt("hi", active=None, recent=[], guidance="G")
    order = [
        "Decide how to route",
        "Intent router guidance:",
        "Actions:",
        "Critical policy:",
        "Return JSON only with keys",
        "Active task:\nnull",
        "Recent conversation:\n[]",
        "Current user message:\nhi",
    ]
    positions = [prompt.index(heading) for heading in order]
    assert positions == sorted(positions)
    assert "Intent router guidance" not in build_prompt("hi", active=None, recent=[])


@pytest.mark.parametrize(("language", "name"), [("en", "English"), ("zh", "Chinese")])
async def test_the_prompt_asks_for_reason_and_title_in_the_groups_language(
    language: str, name: str
) -> None:
    complete = Script(answer("new_task", "要做一份计划", "发布计划"))
    decision = await route(
        complete, "帮我写一份发布计划", active=None, recent=[], language=language
    )
    call = complete.calls[0]
    assert f"Write reason and short_title in {name}." in call.prompt
    assert call.language == language
    assert decision.short_title == "发布计划" and decision.reason == "要做一份计划"
