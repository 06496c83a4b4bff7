"""The one writer of a group's event log, on both store backends (no Ray)."""

from __future__ import annotations

from typing import Any

import pytest

from actors.group_events import GroupEvents, error_stop
from actors.turns import IllegalTransition, TurnState, TurnTracker
from actors.writer import TurnWriter
from engine.events import StopEvent, StopReason, TextDelta, ToolCallEvent
from engine.messages import Usage
from personas.prompts import SKIP_TOKEN
from protocol import AgentState, parse_server_frame
from store.base import GroupMessage, Store


def stop(text: str, reason: StopReason = StopReason.END_TURN) -> StopEvent:
    return StopEvent(reason=reason, usage=Usage(), cost_usd=0.0, duration_ms=3, text=text)


async def frames(store: Store, group_id: str) -> list[dict[str, Any]]:
    batch = await store.read_events(group_id, 0, limit=1000)
    out = [event.envelope() for event in batch.events]
    for env in out:
        parse_server_frame(env)
    return out


def kinds(envs: list[dict[str, Any]]) -> list[str]:
    return [
        env["data"]["type"] if env["type"] == "yeaft_output" else f"status:{env['state']}"
        for env in envs
    ]


async def test_the_result_waits_for_finish(store: Store) -> None:
    writer = TurnWriter(GroupEvents(store, "g1"), "linus", "t1")
    await writer.feed(TextDelta("hello there"))
    await writer.feed(stop("hello there"))
    # The engine has stopped, but nothing says so until the owner finishes.
    assert "result" not in kinds(await frames(store, "g1"))
    await writer.finish()
    envs = await frames(store, "g1")
    assert kinds(envs) == ["status:streaming", "assistant", "result", "status:idle"]
    assert [env["seq"] for env in envs] == [1, 2, 3, 4]
    assert all(env["turnId"] == "t1" and env["vpId"] == "linus" for env in envs)


async def test_a_vp_that_chooses_silence_shows_nothing_but_its_end(store: Store) -> None:
    writer = TurnWriter(GroupEvents(store, "g2"), "steve", "t1")
    for piece in ("[[", "SKIP", "]]"):
        await writer.feed(TextDelta(piece))
    await writer.feed(stop(SKIP_TOKEN))
    await writer.finish()
    assert writer.skipped
    assert kinds(await frames(store, "g2")) == ["result"]


async def test_a_prefix_of_the_skip_token_is_released_in_order(store: Store) -> None:
    writer = TurnWriter(GroupEvents(store, "g3"), "steve", "t1")
    await writer.feed(TextDelta("[["))
    await writer.feed(ToolCallEvent("c1", "recall", {"query": "x"}))
    await writer.feed(stop("[["))
    await writer.finish()
    envs = await frames(store, "g3")
    assert kinds(envs) == [
        "status:streaming",
        "assistant",
        "status:tool",
        "assistant",
        "result",
        "status:idle",
    ]
    assert envs[1]["data"]["message"]["content"][0]["text"] == "[["
    assert not writer.skipped


async def test_a_turn_that_fails_ends_with_one_error_result(store: Store) -> None:
    writer = TurnWriter(GroupEvents(store, "g4"), "kent", "t9")
    await writer.finish(error_stop(StopReason.ERROR, "the VP died", "actor_died"))
    envs = await frames(store, "g4")
    assert kinds(envs) == ["result", "status:error"]
    result = envs[0]["data"]
    assert (result["subtype"], result["error"], result["error_kind"]) == (
        "error_during_execution",
        "the VP died",
        "actor_died",
    )


async def test_a_turn_is_finished_once_and_a_second_result_is_refused(store: Store) -> None:
    tracker = TurnTracker("t3", TurnState.RUNNING)
    writer = TurnWriter(GroupEvents(store, "g6"), "kent", "t3", tracker)
    await writer.feed(stop("done"))
    await writer.finish()
    assert tracker.finished and writer.sent is not None
    with pytest.raises(IllegalTransition):
        await writer.finish(error_stop(StopReason.ABORTED, "aborted", "aborted"))
    assert kinds(await frames(store, "g6")) == ["result"]


async def test_a_notice_is_in_the_event_log_and_the_group_log(store: Store) -> None:
    await GroupEvents(store, "g5").notice("loop guard tripped", "m1", "ping_pong", limit=4)
    (env,) = await frames(store, "g5")
    assert env["vpId"] == "system" and env["turnId"] == "m1"
    assert env["data"]["detail"] == {"rule": "ping_pong", "limit": 4}
    (msg,) = await store.read_messages("g5")
    assert msg.role == "system" and msg.meta["notice"] == {"rule": "ping_pong", "limit": 4}


async def test_a_stored_message_becomes_one_group_message_frame(store: Store) -> None:
    events = GroupEvents(store, "g7")
    said = GroupMessage(
        author="ann",
        role="user",
        text="@linus hi",
        mentions=["linus"],
        meta={"clientMessageId": "c1"},
    )
    forward = GroupMessage(
        author="linus",
        role="assistant",
        text="please take it",
        meta={
            "injectedBy": "route_forward",
            "routeForwardTarget": "steve",
            "senderVpId": "linus",
            "reason": "design",
            "causedBy": [said.id],
            "chainId": said.id,
        },
    )
    assert await events.store_message(said) == (said, True)
    assert await events.store_message(forward) == (forward, True)
    # A repeat (a retried write that had landed) shows nothing twice.
    assert await events.store_message(said) == (said, False)
    person, handoff = await frames(store, "g7")
    assert person == {
        "seq": 1,
        "type": "group_message",
        "groupId": "g7",
        "messageId": said.id,
        "author": "ann",
        "role": "user",
        "text": "@linus hi",
        "ts": said.ts,
        "mentions": ["linus"],
        "clientMessageId": "c1",
        "chainId": said.id,
    }
    assert handoff["handoff"] == {
        "from": "linus",
        "to": "steve",
        "reason": "design",
        "via": "route_forward",
    }
    assert (handoff["causedBy"], handoff["chainId"]) == ([said.id], said.id)
    # No VP filter can hide a message: its header names no VP.
    (first, _) = (await store.read_events("g7", 0)).events
    assert (first.type, first.vp_id, first.data_type) == ("group_message", None, None)


async def test_statuses_name_the_trigger_and_the_result_names_the_stored_reply(
    store: Store,
) -> None:
    writer = TurnWriter(GroupEvents(store, "g8"), "linus", "t1", trigger_id="msg_a")
    await writer.status(AgentState.THINKING)
    await writer.feed(TextDelta("fine"))
    await writer.feed(stop("fine"))
    await writer.finish(message_id="msg_b")
    envs = await frames(store, "g8")
    assert kinds(envs) == [
        "status:thinking",
        "status:streaming",
        "assistant",
        "result",
        "status:idle",
    ]
    assert {env["triggerId"] for env in envs if env["type"] == "agent_status"} == {"msg_a"}
    assert envs[3]["data"]["message_id"] == "msg_b"


class _CountingStore:
    """A store that counts the writes to its event log (everything else passes through)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.writes: list[int] = []

    async def append_event(self, group_id: str, frame: Any) -> int:
        self.writes.append(1)
        return await self._store.append_event(group_id, frame)

    async def append_events(self, group_id: str, frames: Any) -> list[int]:
        self.writes.append(len(frames))
        return await self._store.append_events(group_id, frames)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


async def test_a_status_goes_out_in_one_write_with_the_payload_it_announces(store: Store) -> None:
    counting = _CountingStore(store)
    writer = TurnWriter(GroupEvents(counting, "g10"), "linus", "t1")  # type: ignore[arg-type]
    await writer.feed(TextDelta("first words"))
    # The streaming status and the first text: one write, before the model's next token.
    assert counting.writes == [2]
    await writer.feed(ToolCallEvent("c1", "recall", {"query": "x"}))
    assert counting.writes == [2, 2]
    await writer.feed(stop("first words"))
    await writer.finish()
    assert kinds(await frames(store, "g10")) == [
        "status:streaming",
        "assistant",
        "status:tool",
        "assistant",
        "result",
        "status:idle",
    ]
