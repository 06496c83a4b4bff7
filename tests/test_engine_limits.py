"""How a turn ends at its limits: a context it cannot fit, a window too small, a spent tool budget.

Overflow recovery runs in order (compaction, then shortening large tool
results, then a readable error that says what to do) and never loops, even
when the compaction's own summary call fails. A window that cannot hold the
prompt and the reserved output is refused before the model is called.
"""

from __future__ import annotations

import json
from pathlib import Path

from engine.errors import ErrorKind
from engine.events import NoticeKind, StopEvent, StopReason
from engine.messages import Conversation, Message, ToolCall
from engine.models import read_models
from engine.providers.scripted import Fail, Reply
from tests.engine_helpers import Recorder, scripted_engine

BIG = "x" * 8000  # about 2,000 tokens


def long_history(turns: int) -> Conversation:
    c = Conversation(id="h")
    for i in range(turns):
        c.messages.append(Message.user(f"question {i}"))
        c.messages.append(
            Message.assistant("", tool_calls=[ToolCall(id=f"t{i}", name="rethink", arguments={})])
        )
        c.messages.append(Message.tool_result(f"t{i}", BIG, name="rethink"))
        c.messages.append(Message.assistant(f"answer {i}"))
    return c


def kinds(rec: Recorder) -> list[NoticeKind]:
    return [n.kind for n in rec.of("notice")]


async def test_a_failed_summary_call_ends_the_overflow_in_a_readable_error() -> None:
    # The model says the prompt is too long; the summary call then times out
    # on every try; shortening the tool results is tried; the model still
    # says it is too long: the turn ends with what to do, not the bare chain.
    engine, provider, _ = scripted_engine(
        Fail(ErrorKind.CONTEXT_OVERFLOW, "prompt is too long", status=400),
        Fail(ErrorKind.TIMEOUT, "summary timed out"),
        Fail(ErrorKind.TIMEOUT, "summary timed out"),
        Fail(ErrorKind.CONTEXT_OVERFLOW, "prompt is too long", status=400),
        max_retries=1,
    )
    c, rec = long_history(4), Recorder()

    result = await engine.run_turn(c, Message.user("new question"), system="s", emit=rec)

    assert result.reason is StopReason.ERROR and result.error_kind == "context_overflow"
    assert result.error is not None
    assert "All models failed" not in result.error and "summary timed out" not in result.error
    assert "summarising older turns failed (timeout)" in result.error
    assert "Start a new conversation" in result.error
    assert kinds(rec) == [NoticeKind.ERROR, NoticeKind.TRUNCATE]
    (failed,) = [n for n in rec.of("notice") if n.kind is NoticeKind.ERROR]
    assert failed.detail == {"stage": "compaction", "reason": "timeout"}
    assert len(provider.requests) == 4  # no loop: one more call after the shortening
    assert len(rec.of("stop")) == 1 and isinstance(rec.events[-1], StopEvent)


async def test_a_failed_summary_call_then_shortened_results_can_still_answer() -> None:
    engine, _, _ = scripted_engine(
        Fail(ErrorKind.CONTEXT_OVERFLOW, "prompt is too long", status=400),
        Fail(ErrorKind.TIMEOUT, "summary timed out"),
        Reply("fits now"),
        max_retries=0,
    )
    c, rec = long_history(3), Recorder()

    result = await engine.run_turn(c, Message.user("new question"), system="s", emit=rec)

    assert result.reason is StopReason.END_TURN and result.text == "fits now"
    assert kinds(rec) == [NoticeKind.ERROR, NoticeKind.TRUNCATE]
    assert all(len(m.content) < len(BIG) for m in c.messages if m.role == "tool")


async def test_a_prompt_too_big_after_recovery_is_refused_before_the_model_is_called() -> None:
    # A 3,000-token window: the history does not fit, the summary fails and
    # the shortened results still leave more than the window holds.
    engine, provider, _ = scripted_engine(
        Fail(ErrorKind.TIMEOUT, "summary timed out"),
        max_retries=0,
        context_window=3000,
        max_output_tokens=1000,
    )
    c, rec = long_history(12), Recorder()

    result = await engine.run_turn(c, Message.user("new question"), system="s", emit=rec)

    assert result.reason is StopReason.ERROR and result.error_kind == "context_window"
    assert result.error is not None
    assert "offline:test's 3,000-token context window" in result.error
    assert "1,000 tokens reserved for the reply" in result.error
    assert "the model was not called" in result.error
    assert len(provider.requests) == 1  # the summary call only


async def test_a_window_smaller_than_the_reserved_output_is_refused_uncalled(
    tmp_path: Path,
) -> None:
    models = tmp_path / "models.json"
    models.write_text(json.dumps({"offline:tiny": {"context_window": 500, "max_output": 4096}}))
    engine, provider, _ = scripted_engine(
        Reply("never"), model="offline:tiny", models=read_models(models), max_output_tokens=4096
    )
    rec = Recorder()

    result = await engine.run_turn(Conversation(id="c"), Message.user("hi"), system="s", emit=rec)

    assert result.reason is StopReason.ERROR and result.error_kind == "context_window"
    assert result.error is not None
    assert result.error.startswith("offline:tiny has a 500-token context window")
    assert "4,096 tokens reserved for its reply" in result.error
    assert provider.requests == []  # the model was not called
    assert not rec.of("notice")  # no compaction was tried: it could not help


async def test_a_spent_tool_budget_without_an_answer_ends_error_max_turns() -> None:
    engine, _, _ = scripted_engine(
        Reply(tool_calls=[("rethink", {"reason": "a"})]),
        Reply(""),  # the final, tool-less call says nothing
        max_tool_iterations=1,
    )
    rec = Recorder()

    result = await engine.run_turn(Conversation(id="c"), Message.user("hi"), system="s", emit=rec)

    assert result.reason is StopReason.ERROR_MAX_TURNS and result.error_kind == "max_turns"
    assert result.error is not None and "tool budget (1 rounds" in result.error
    assert rec.of("stop")[0].reason is StopReason.ERROR_MAX_TURNS


async def test_a_spent_tool_budget_with_an_answer_is_a_success() -> None:
    engine, _, _ = scripted_engine(
        Reply(tool_calls=[("rethink", {"reason": "a"})]), Reply("done"), max_tool_iterations=1
    )

    result = await engine.run_turn(Conversation(id="c"), Message.user("hi"), system="s")

    assert result.reason is StopReason.END_TURN and result.text == "done"


async def test_an_announced_turn_opens_with_its_model_tools_and_session() -> None:
    engine, _, _ = scripted_engine(Reply("hello"))
    rec = Recorder()

    await engine.run_turn(
        Conversation(id="conv-1"), Message.user("hi"), system="s", emit=rec, announce=True
    )

    first = rec.events[0]
    assert first.type == "notice" and first.kind is NoticeKind.INIT
    assert first.detail["model"] == "offline:test"
    assert first.detail["session_id"] == "conv-1"
    assert "rethink" in first.detail["tools"]
