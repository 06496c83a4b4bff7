"""The query loop: every rule of the engine, on the scripted offline model."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from engine.call_context import CallContext
from engine.errors import ErrorKind
from engine.events import NoticeKind, StopEvent, StopReason, TextDelta
from engine.messages import Conversation, Message, ToolCall, message_tokens
from engine.pricing import Price, PriceTable
from engine.providers.base import ModelStop
from engine.providers.scripted import Fail, Reply, ScriptedModel
from engine.tools.registry import Tool, ToolContext, ToolRegistry
from tests.engine_helpers import Recorder, scripted_engine


def conv() -> Conversation:
    return Conversation(id="c1")


async def test_plain_turn_streams_text_usage_and_one_stop() -> None:
    engine, provider, _ = scripted_engine("hello there world")
    rec, c = Recorder(), conv()
    result = await engine.run_turn(c, Message.user("hi"), system="sys", emit=rec)
    assert result.reason is StopReason.END_TURN
    assert result.text == "hello there world"
    assert rec.kinds == ["text_delta"] * 3 + ["usage", "stop"]
    assert [m.role for m in c.messages] == ["user", "assistant"]
    assert provider.requests[0].system == "sys"
    provider.assert_complete()


async def test_tool_loop_runs_tool_and_streams_again() -> None:
    engine, provider, _ = scripted_engine(
        Reply(tool_calls=[("rethink", {"reason": "check"})]), Reply("final")
    )
    rec, c = Recorder(), conv()
    result = await engine.run_turn(c, Message.user("q"), system="s", emit=rec)
    assert result.reason is StopReason.END_TURN and provider.calls == 2
    assert rec.kinds.index("tool_call") < rec.kinds.index("tool_result")
    assert [m.role for m in c.messages] == ["user", "assistant", "tool", "assistant"]
    # The second request carries the tool result back to the model.
    assert provider.requests[1].messages[-1].role == "tool"
    assert {t.name for t in provider.requests[0].tools} >= {"rethink", "finish", "ask_user"}
    provider.assert_complete()


async def test_max_tokens_continues_at_most_three_times() -> None:
    engine, provider, _ = scripted_engine(
        *[Reply(f"part{i}", stop=ModelStop.MAX_TOKENS) for i in range(5)]
    )
    rec, c = Recorder(), conv()
    result = await engine.run_turn(c, Message.user("long"), system="s", emit=rec)
    assert provider.calls == 4  # the first call and three continuations
    assert result.reason is StopReason.MAX_TOKENS
    assert result.text == "part0part1part2part3"
    assert len([n for n in rec.of("notice") if n.kind is NoticeKind.CONTINUE]) == 3


async def test_continuation_then_end_turn_joins_text() -> None:
    engine, provider, _ = scripted_engine(Reply("a", stop=ModelStop.MAX_TOKENS), Reply("b"))
    result = await engine.run_turn(conv(), Message.user("x"), system="s")
    assert (result.reason, result.text, provider.calls) == (StopReason.END_TURN, "ab", 2)
    provider.assert_complete()


async def test_tool_budget_then_one_final_call_without_tools() -> None:
    always_tool = [Reply(tool_calls=[("rethink", {"reason": str(i)})]) for i in range(2)]
    engine, provider, _ = scripted_engine(
        *always_tool,
        Reply("answer", tool_calls=[("rethink", {"reason": "x"})]),
        max_tool_iterations=2,
    )
    c = conv()
    result = await engine.run_turn(c, Message.user("x"), system="s")
    assert provider.calls == 3
    final = provider.requests[2]
    assert final.tools == []
    assert "tool budget" in final.system
    assert result.reason is StopReason.END_TURN and result.text == "answer"
    # A tool call in the final answer is dropped, never left dangling.
    assert c.messages[-1].tool_calls == []
    provider.assert_complete()


async def test_the_final_call_speaks_the_turns_language() -> None:
    engine, provider, _ = scripted_engine(
        Reply(tool_calls=[("rethink", {"reason": "a"})]), Reply("答案"), max_tool_iterations=1
    )
    await engine.run_turn(conv(), Message.user("x"), system="s", context=CallContext(language="zh"))
    final = provider.requests[1]
    assert final.tools == [] and "工具调用次数已经用完" in final.system
    assert "tool budget" not in final.system
    provider.assert_complete()


async def test_preamble_messages_reach_every_call_and_not_the_transcript() -> None:
    engine, provider, _ = scripted_engine(
        Reply(tool_calls=[("rethink", {"reason": "a"})]), Reply("done")
    )
    c = conv()
    skill = Message.user("skill: be brief")
    await engine.run_turn(c, Message.user("x"), system="s", preamble=[skill])
    assert [r.messages[0].content for r in provider.requests] == ["skill: be brief"] * 2
    assert all(m.content != "skill: be brief" for m in c.messages)
    provider.assert_complete()


async def test_retry_honours_retry_after() -> None:
    engine, provider, sleep = scripted_engine(
        Fail(ErrorKind.RATE_LIMIT, status=429, retry_after=7.0), Reply("ok")
    )
    rec = Recorder()
    result = await engine.run_turn(conv(), Message.user("x"), system="s", emit=rec)
    assert result.reason is StopReason.END_TURN and provider.calls == 2
    assert sleep.delays == [7.0]
    assert [n.kind for n in rec.of("notice")] == [NoticeKind.RETRY]
    provider.assert_complete()


async def test_retry_backoff_is_exponential_and_bounded() -> None:
    fails = [Fail(ErrorKind.OVERLOADED, status=529) for _ in range(4)]
    engine, provider, sleep = scripted_engine(*fails, Reply("never"))
    result = await engine.run_turn(conv(), Message.user("x"), system="s")
    # rand() is 0.5, so jitter is zero: 1, 2, 4 seconds, then give up.
    assert sleep.delays == [1.0, 2.0, 4.0]
    assert provider.calls == 4
    assert result.reason is StopReason.ERROR and result.error_kind == "overloaded"


async def test_jitter_spreads_delays() -> None:
    from engine.caller import RetryPolicy

    policy = RetryPolicy(base_delay=1.0, jitter=0.25)
    assert policy.delay(1, None, 0.0) == pytest.approx(0.75)
    assert policy.delay(1, None, 1.0) == pytest.approx(1.25)
    assert policy.delay(10, None, 0.5) == pytest.approx(30.0)
    assert policy.delay(1, 500.0, 0.5) is None  # too long to wait: fail over instead


async def test_no_retry_once_a_tool_call_was_emitted() -> None:
    engine, provider, sleep = scripted_engine(
        Fail(ErrorKind.RATE_LIMIT, after_tool_call=True), Reply("never")
    )
    result = await engine.run_turn(conv(), Message.user("x"), system="s")
    assert provider.calls == 1 and sleep.delays == []
    assert result.reason is StopReason.ERROR


async def test_fallback_chain_records_attempts() -> None:
    backup = ScriptedModel(["from backup"])
    engine, provider, _ = scripted_engine(
        Fail(ErrorKind.AUTH, "bad key", status=401),
        providers={"backup": backup},
        fallbacks=["backup:b1"],
    )
    rec = Recorder()
    result = await engine.run_turn(conv(), Message.user("x"), system="s", emit=rec)
    assert result.text == "from backup" and result.model == "backup:b1"
    assert result.attempts == [
        {
            "provider": "offline",
            "model": "test",
            "reason": "auth",
            "status": 401,
            "message": "bad key",
        }
    ]
    fb = [n for n in rec.of("notice") if n.kind is NoticeKind.FALLBACK]
    assert fb and fb[0].detail["to"] == "backup:b1"
    provider.assert_complete()
    backup.assert_complete()


async def test_all_models_failed_lists_every_attempt() -> None:
    backup = ScriptedModel([Fail(ErrorKind.MODEL_NOT_FOUND, "no such", status=404)])
    engine, provider, _ = scripted_engine(
        Fail(ErrorKind.BILLING, "pay up", status=402),
        providers={"backup": backup},
        fallbacks=["backup:b1"],
    )
    rec = Recorder()
    result = await engine.run_turn(conv(), Message.user("x"), system="s", emit=rec)
    assert result.reason is StopReason.ERROR
    assert result.error is not None and "All models failed (2)" in result.error
    assert (
        "offline:test: billing 402" in result.error and "backup:b1: model_not_found" in result.error
    )
    stop = rec.of("stop")[0]
    assert [a["provider"] for a in stop.attempts] == ["offline", "backup"]
    provider.assert_complete()
    backup.assert_complete()


@pytest.mark.parametrize("kind", [ErrorKind.ABORTED, ErrorKind.CONTEXT_OVERFLOW])
async def test_abort_and_overflow_never_fail_over(kind: ErrorKind) -> None:
    backup = ScriptedModel(["should not be used"])
    engine, _, _ = scripted_engine(
        Fail(kind), providers={"backup": backup}, fallbacks=["backup:b1"], max_compactions=0
    )
    result = await engine.run_turn(conv(), Message.user("x"), system="s")
    assert backup.calls == 0
    assert result.reason is StopReason.ERROR and result.error_kind == kind.value


def history(turns: int) -> Conversation:
    c = Conversation(id="h")
    for i in range(turns):
        c.messages.append(Message.user(f"question {i}"))
        c.messages.append(
            Message.assistant(
                "", tool_calls=[ToolCall(id=f"t{i}", name="rethink", arguments={"reason": "r"})]
            )
        )
        c.messages.append(Message.tool_result(f"t{i}", f"result {i}", name="rethink"))
        c.messages.append(Message.assistant(f"answer {i}"))
    return c


async def test_context_overflow_compacts_keeps_recent_turns_and_retries() -> None:
    engine, provider, _ = scripted_engine(
        Fail(ErrorKind.CONTEXT_OVERFLOW, "prompt is too long", status=400),
        Reply("SUMMARY of turns 0-2"),
        Reply("fits now"),
    )
    c, rec = history(5), Recorder()
    result = await engine.run_turn(c, Message.user("new question"), system="s", emit=rec)
    assert result.reason is StopReason.END_TURN and result.text == "fits now"
    assert c.summary == "SUMMARY of turns 0-2" and c.compactions == 1
    # The last three turns (3, 4 and the new one) are kept verbatim, pairs intact.
    assert c.messages[0].content == "question 3"
    assert [m.role for m in c.messages[:4]] == ["user", "assistant", "tool", "assistant"]
    summary_request = provider.requests[1]
    assert summary_request.tools == [] and "question 0" in summary_request.messages[0].content
    assert "question 4" not in summary_request.messages[0].content
    assert "SUMMARY of turns 0-2" in provider.requests[2].system
    assert [n.kind for n in rec.of("notice")] == [NoticeKind.COMPACT]
    provider.assert_complete()


async def test_overflow_compacts_at_most_three_times_then_fails_clearly() -> None:
    steps = []
    for _ in range(3):
        steps += [Fail(ErrorKind.CONTEXT_OVERFLOW, status=400), Reply("summary")]
    steps.append(Fail(ErrorKind.CONTEXT_OVERFLOW, status=400))
    engine, provider, _ = scripted_engine(*steps)
    c = history(8)
    result = await engine.run_turn(c, Message.user("q"), system="s")
    assert c.compactions == 3 and provider.calls == 7
    assert result.reason is StopReason.ERROR and result.error_kind == "context_overflow"
    assert result.error is not None and "context window" in result.error
    provider.assert_complete()


async def test_oversized_tool_results_keep_head_and_tail() -> None:
    class P(BaseModel):
        pass

    async def big(_: P, __: ToolContext) -> str:
        return "HEAD" + "x" * 200_000 + "TAIL"

    engine, provider, _ = scripted_engine(Reply(tool_calls=[("big", {})]), Reply("done"))
    engine.tools.register(Tool("big", "big output", P, big))
    c = conv()
    await engine.run_turn(c, Message.user("x"), system="s")
    stored = c.messages[2].content
    assert stored.startswith("HEAD") and stored.endswith("TAIL")
    assert len(stored) <= engine.tool_result_max_chars and "omitted" in stored
    provider.assert_complete()


async def test_orphans_repaired_before_every_request() -> None:
    engine, provider, _ = scripted_engine("ok")
    c = conv()
    c.messages = [
        Message.user("a"),
        Message.assistant("", tool_calls=[ToolCall(id="lost", name="rethink")]),
        Message.user("b"),
        Message.tool_result("stray", "orphan"),
        Message.assistant("reply"),
    ]
    rec = Recorder()
    await engine.run_turn(c, Message.user("c"), system="s", emit=rec)
    sent = provider.requests[0].messages
    assert [m.role for m in sent] == ["user", "assistant", "tool", "user", "assistant", "user"]
    assert sent[2].tool_call_id == "lost" and sent[2].is_error
    assert all(m.tool_call_id != "stray" for m in sent)
    assert rec.of("notice")[0].kind is NoticeKind.REPAIR
    provider.assert_complete()


async def test_abort_mid_stream_keeps_partial_text_and_ends_aborted() -> None:
    abort = asyncio.Event()
    engine, _, _ = scripted_engine("one two three four five six")
    # A slow token rate so the abort lands between deltas.
    engine.model = "offline:test?tps=50"
    rec = Recorder()

    async def emit(event: object) -> None:
        await rec(event)  # type: ignore[arg-type]
        if isinstance(event, TextDelta) and len(rec.of("text_delta")) == 2:
            abort.set()

    c = conv()
    result = await engine.run_turn(c, Message.user("x"), system="s", emit=emit, abort=abort)
    assert result.reason is StopReason.ABORTED
    assert rec.kinds[-1] == "stop" and len(rec.of("stop")) == 1
    assert c.messages[-1].content == "one two" and c.messages[-1].meta["incomplete"]


async def test_abort_during_tool_leaves_consistent_history() -> None:
    started, abort = asyncio.Event(), asyncio.Event()

    class P(BaseModel):
        pass

    async def hang(_: P, __: ToolContext) -> str:
        started.set()
        await asyncio.Event().wait()
        return "never"

    engine, _, _ = scripted_engine(Reply(tool_calls=[("hang", {})]))
    engine.tools.register(Tool("hang", "waits forever", P, hang))
    c = conv()
    task = asyncio.create_task(engine.run_turn(c, Message.user("x"), system="s", abort=abort))
    await started.wait()
    abort.set()
    result = await task
    assert result.reason is StopReason.ABORTED
    assert [m.role for m in c.messages] == ["user", "assistant", "tool"]
    assert c.messages[2].is_error  # the synthetic result for the interrupted call


async def test_an_abort_that_comes_while_the_stop_goes_out_is_too_late() -> None:
    abort = asyncio.Event()
    engine, _, _ = scripted_engine("all done")
    rec = Recorder()

    async def emit(event: object) -> None:
        await rec(event)  # type: ignore[arg-type]
        if isinstance(event, StopEvent):
            # The abort comes while the caller is still taking the stop event.
            abort.set()
            for _ in range(10):
                await asyncio.sleep(0)

    result = await engine.run_turn(conv(), Message.user("x"), system="s", emit=emit, abort=abort)
    assert result.reason is StopReason.END_TURN
    assert [s.reason for s in rec.of("stop")] == [StopReason.END_TURN]


async def test_an_abort_whose_cancel_is_swallowed_still_stops_the_turn() -> None:
    """Code the turn awaits may eat the cancel (asyncio.wait_for before 3.12 does)."""
    abort = asyncio.Event()
    engine, provider, _ = scripted_engine(
        Reply(tool_calls=[("rethink", {"reason": "check"})]), Reply("never asked for")
    )
    rec, swallowed = Recorder(), []

    async def emit(event: object) -> None:
        await rec(event)  # type: ignore[arg-type]
        if rec.kinds == ["tool_call"]:
            abort.set()
            for _ in range(10):
                try:
                    await asyncio.sleep(0)
                except asyncio.CancelledError:
                    swallowed.append(True)

    result = await engine.run_turn(conv(), Message.user("x"), system="s", emit=emit, abort=abort)
    assert swallowed == [True]
    assert result.reason is StopReason.ABORTED
    assert [s.reason for s in rec.of("stop")] == [StopReason.ABORTED]
    assert provider.calls == 1  # the turn stopped at its next event, not at its end


async def test_cancelling_the_caller_still_emits_stop() -> None:
    engine, _, _ = scripted_engine(Reply("slow", delay=30))
    rec = Recorder()
    task = asyncio.create_task(engine.run_turn(conv(), Message.user("x"), system="s", emit=rec))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [s.reason for s in rec.of("stop")] == [StopReason.ABORTED]


async def test_usage_and_cost_from_price_table() -> None:
    engine, _, _ = scripted_engine("a b c d", Reply("e f"))
    engine.prices = PriceTable({"offline:*": Price(input=2.0, output=10.0)})
    rec = Recorder()
    result = await engine.run_turn(conv(), Message.user("x"), system="s", emit=rec)
    u = result.usage
    assert u.output_tokens == 4 and u.input_tokens > 0
    assert result.cost_usd == pytest.approx((u.input_tokens * 2 + u.output_tokens * 10) / 1e6)
    stop: StopEvent = rec.of("stop")[0]
    assert stop.cost_usd == result.cost_usd and stop.usage == u


async def test_finish_tool_ends_the_turn() -> None:
    engine, provider, _ = scripted_engine(Reply("done", tool_calls=[("finish", {"summary": "s"})]))
    result = await engine.run_turn(conv(), Message.user("x"), system="s")
    assert result.reason is StopReason.FINISH and provider.calls == 1
    assert result.end_turn == {"kind": "finish", "summary": "s"}
    provider.assert_complete()


async def test_other_end_turn_request_is_a_tool_handoff() -> None:
    class P(BaseModel):
        pass

    async def hand_over(_: P, ctx: ToolContext) -> str:
        ctx.request_end_turn("forward", to="bob")
        return "forwarded"

    engine, provider, _ = scripted_engine(Reply(tool_calls=[("hand_over", {})]), Reply("never"))
    engine.tools.register(Tool("hand_over", "hands the turn on", P, hand_over))
    rec = Recorder()
    result = await engine.run_turn(conv(), Message.user("x"), system="s", emit=rec)
    assert result.reason is StopReason.TOOL_HANDOFF and provider.calls == 1
    assert [s.reason for s in rec.of("stop")] == [StopReason.TOOL_HANDOFF]
    assert result.end_turn == {"kind": "forward", "to": "bob"}


async def test_model_stop_is_read_as_a_member_and_stored_as_text() -> None:
    # A provider that reports end_turn while calling tools is read as tool_use.
    engine, provider, _ = scripted_engine(
        Reply(tool_calls=[("rethink", {"reason": "r"})], stop=ModelStop.END_TURN),
        Reply("cut", stop=ModelStop.MAX_TOKENS),
        Reply("done"),
    )
    c = conv()
    await engine.run_turn(c, Message.user("x"), system="s")
    stops = [m.meta["stop"] for m in c.messages if m.role == "assistant"]
    assert stops == ["tool_use", "max_tokens", "end_turn"]
    # Persisted metadata holds the plain value, not the enum member.
    assert all(type(stop) is str for stop in stops)
    provider.assert_complete()


async def test_tools_filtered_by_allowlist() -> None:
    engine, provider, _ = scripted_engine(Reply(tool_calls=[("rethink", {"reason": "r"})]), "ok")
    c = conv()
    await engine.run_turn(c, Message.user("x"), system="s", allowed_tools={"finish"})
    assert [t.name for t in provider.requests[0].tools] == ["finish"]
    assert c.messages[2].is_error and "unavailable" in c.messages[2].content
    provider.assert_complete()


def test_registry_rejects_duplicate_names() -> None:
    reg = ToolRegistry()
    engine, _, _ = scripted_engine()
    tool = engine.tools.get("finish")
    assert tool is not None
    reg.register(tool)
    with pytest.raises(ValueError):
        reg.register(tool)


def test_a_transcripts_tokens_are_counted_once_and_again_when_a_message_changes() -> None:
    conv = Conversation(
        id="c",
        messages=[
            Message.user("x" * 400),
            Message.assistant("y" * 80, tool_calls=[ToolCall(id="c1", name="recall")]),
            Message.tool_result("c1", "z" * 4000, name="recall"),
        ],
    )
    expected = sum(message_tokens(m) for m in conv.messages)
    assert conv.messages_tokens() == expected
    assert conv.messages_tokens() == expected  # counted again from the memo
    # A result shrunk in place (as on a context overflow) is counted anew.
    conv.messages[2].content = "z" * 40
    conv.messages.append(Message.user("one more"))
    assert conv.messages_tokens() == sum(message_tokens(m) for m in conv.messages) < expected + 5
    # A copy with other text is another object: never taken for the original.
    conv.messages[0] = conv.messages[0].model_copy(update={"content": "short"})
    assert conv.messages_tokens() == sum(message_tokens(m) for m in conv.messages)
