"""Durable turn records on both backends: phases, one result per turn, recovery reads."""

from __future__ import annotations

import asyncio
import json

import pytest

from store import GroupMessage, Store
from store.budgets import BudgetSpend
from store.chatviews import TurnUsage, UsageTotals
from store.turns import TurnEnd, TurnPhase, TurnRecord
from tests.fixtures.store_samples import detail_of, notice, sample_group
from tests.fixtures.stores import StoreFactory


def record(turn_id: str, trigger: str = "msg_1", vp: str = "steve", **kw: object) -> TurnRecord:
    return TurnRecord.model_validate(
        {
            "turn_id": turn_id,
            "group_id": "g1",
            "vp_id": vp,
            "trigger_id": trigger,
            "chain_id": trigger,
            **kw,
        }
    )


async def test_turns_move_forward_and_finish_once(store: Store) -> None:
    await store.create_group(sample_group(id="g1"))
    await store.add_turns("g1", [record("t1", caused_by=["m0"], user_id="alice"), record("t2")])
    assert {t.turn_id: t.phase for t in await store.open_turns()} == {
        "t1": TurnPhase.REQUESTED,
        "t2": TurnPhase.REQUESTED,
    }
    assert await store.start_turn("g1", "t1") is True
    seq = await store.finish_turn("g1", "t1", notice("steve"), TurnEnd.ANSWERED)
    assert seq == 1
    # A second finish (a late VP, a retried write) appends nothing.
    assert await store.finish_turn("g1", "t1", notice("steve"), TurnEnd.INTERRUPTED) is None
    assert await store.start_turn("g1", "t1") is False
    assert await store.head("g1") == 1
    stored = json.loads((await store.read_events("g1", 0)).events[0].text)
    assert stored["seq"] == 1 and stored["vpId"] == "steve"
    [left] = await store.open_turns()
    assert left.turn_id == "t2" and left.caused_by == [] and left.user_id is None
    by_trigger = {t.turn_id: t for t in await store.turns_of("g1", "msg_1")}
    assert by_trigger["t1"].phase is TurnPhase.FINISHED
    assert by_trigger["t1"].end is TurnEnd.ANSWERED and not by_trigger["t1"].interrupted
    assert by_trigger["t1"].caused_by == ["m0"] and by_trigger["t1"].user_id == "alice"
    assert by_trigger["t2"].phase is TurnPhase.REQUESTED


async def test_adding_a_recorded_turn_again_keeps_its_phase(store: Store) -> None:
    await store.create_group(sample_group(id="g1"))
    await store.add_turns("g1", [record("t1")])
    await store.start_turn("g1", "t1")
    await store.add_turns("g1", [record("t1")])
    [again] = await store.turns_of("g1", "msg_1")
    assert again.phase is TurnPhase.STARTED
    await store.finish_turn("g1", "t1", None, TurnEnd.INTERRUPTED)
    await store.add_turns("g1", [record("t1")])
    [finished] = await store.turns_of("g1", "msg_1")
    assert finished.finished and finished.interrupted
    assert await store.open_turns() == []


async def test_a_turn_starts_with_its_first_frame_unless_it_ended(store: Store) -> None:
    await store.create_group(sample_group(id="g1"))
    await store.add_turns("g1", [record("t1"), record("t2")])
    assert await store.start_turn("g1", "t1", notice("steve")) is True
    [started] = [t for t in await store.open_turns() if t.turn_id == "t1"]
    assert started.phase is TurnPhase.STARTED
    await store.finish_turn("g1", "t2", None, TurnEnd.INTERRUPTED)
    # Ended before it began: its first frame is not appended.
    assert await store.start_turn("g1", "t2", notice("linus")) is False
    assert [json.loads(e.text)["vpId"] for e in (await store.read_events("g1", 0)).events] == [
        "steve"
    ]


async def test_a_turn_without_a_record_runs_and_finishes_once(store: Store) -> None:
    assert await store.start_turn("g1", "loose") is True
    assert await store.finish_turn("g1", "loose", notice(), TurnEnd.ANSWERED) == 1
    assert await store.finish_turn("g1", "loose", notice(), TurnEnd.ANSWERED) is None
    # Never handed out as a record: it has none.
    assert await store.turns_of("g1", "") == []
    assert await store.open_turns() == []


async def test_a_finish_writes_the_result_its_last_status_and_the_usage_in_one_step(
    store: Store,
) -> None:
    await store.create_group(sample_group(id="g1"))
    await store.add_turns("g1", [record("t1"), record("t2")])
    usage = TurnUsage("t1", 120, 30, 0.25, ("day:1", "chain:m1"))
    result, last = notice("steve", n="result"), notice("steve", n="idle")
    seq = await store.finish_turn("g1", "t1", result, TurnEnd.ANSWERED, after=last, usage=usage)
    assert seq == 1 and await store.head("g1") == 2
    assert [detail_of(e) for e in (await store.read_events("g1", 0)).events] == [
        {"n": "result"},
        {"n": "idle"},
    ]
    charged = [BudgetSpend("day:1", 150, 0.25, 0, 0.0), BudgetSpend("chain:m1", 150, 0.25, 0, 0.0)]
    assert await store.group_usage("g1") == UsageTotals(1, 120, 30, 0.25)
    assert await store.budget_spend("g1", ["day:1", "chain:m1"]) == charged
    # Finished already: nothing more is appended, and the usage counts once.
    again = await store.finish_turn("g1", "t1", result, TurnEnd.ANSWERED, after=last, usage=usage)
    assert again is None and await store.head("g1") == 2
    assert await store.group_usage("g1") == UsageTotals(1, 120, 30, 0.25)
    assert not await store.add_usage("g1", usage)
    assert await store.budget_spend("g1", ["day:1", "chain:m1"]) == charged
    # A turn finished elsewhere first still has what it used counted.
    await store.finish_turn("g1", "t2", None, TurnEnd.INTERRUPTED)
    late = TurnUsage("t2", 10, 5, 0.5, ("day:1",))
    assert await store.finish_turn("g1", "t2", result, TurnEnd.ANSWERED, usage=late) is None
    assert await store.head("g1") == 2
    assert await store.group_usage("g1") == UsageTotals(2, 130, 35, 0.75)
    [day] = await store.budget_spend("g1", ["day:1"])
    assert (day.spent_tokens, day.spent_usd) == (165, 0.75)
    # A frame to follow a result needs the result.
    with pytest.raises(ValueError, match="needs a result"):
        await store.finish_turn("g1", "t3", None, TurnEnd.ANSWERED, after=last)
    assert await store.head("g1") == 2


async def test_concurrent_finishes_write_one_result(store_factory: StoreFactory) -> None:
    """Two processes' stores finishing one turn at once: exactly one result lands."""
    a, b = store_factory(), store_factory()
    await a.create_group(sample_group(id="g1"))
    await a.add_turns("g1", [record(f"t{i}") for i in range(20)])
    for i in range(20):
        seqs = await asyncio.gather(
            a.finish_turn("g1", f"t{i}", notice(), TurnEnd.ANSWERED),
            b.finish_turn("g1", f"t{i}", notice(), TurnEnd.INTERRUPTED),
        )
        assert sorted(s is None for s in seqs) == [False, True]
    assert await a.head("g1") == 20


async def test_open_turns_span_groups_oldest_first(store: Store) -> None:
    for gid in ("g1", "g2"):
        await store.create_group(sample_group(id=gid))
    await store.add_turns("g2", [record("b", created_at=2.0).model_copy(update={"group_id": "g2"})])
    await store.add_turns("g1", [record("a", created_at=1.0)])
    assert [(t.group_id, t.turn_id) for t in await store.open_turns()] == [("g1", "a"), ("g2", "b")]
    assert await store.delete_group("g1")
    assert [t.turn_id for t in await store.open_turns()] == ["b"]


async def test_a_new_message_is_stored_with_its_turns_and_a_repeat_with_none(
    store: Store,
) -> None:
    await store.create_group(sample_group(id="g1"))
    first = GroupMessage(author="ann", role="user", text="hi", meta={"clientMessageId": "c1"})
    stored, created = await store.append_message("g1", first, [record("t1", trigger=first.id)])
    assert created
    [turn] = await store.turns_of("g1", stored.id)
    assert turn.turn_id == "t1" and turn.phase is TurnPhase.REQUESTED
    again = GroupMessage(author="ann", role="user", text="hi", meta={"clientMessageId": "c1"})
    repeat, created = await store.append_message("g1", again, [record("t2", trigger=again.id)])
    assert not created and repeat.id == stored.id
    assert [t.turn_id for t in await store.open_turns()] == ["t1"]
    assert await store.turns_of("g1", again.id) == []


async def test_a_message_its_turns_and_its_frame_are_one_write(store: Store) -> None:
    await store.create_group(sample_group(id="g1"))
    msg = GroupMessage(author="ann", role="user", text="hi", meta={"clientMessageId": "c1"})
    frame = notice("system")
    stored, created = await store.append_message(
        "g1", msg, [record("t1", trigger=msg.id), record("t2", trigger=msg.id)], announce=frame
    )
    assert created and stored.id == msg.id
    assert {t.turn_id for t in await store.turns_of("g1", msg.id)} == {"t1", "t2"}
    assert await store.head("g1") == 1
    # The resend of the same clientMessageId records and appends nothing.
    again = GroupMessage(author="ann", role="user", text="hi", meta={"clientMessageId": "c1"})
    stored, created = await store.append_message(
        "g1", again, [record("t3", trigger=again.id)], announce=frame
    )
    assert not created and stored.id == msg.id
    assert await store.head("g1") == 1
    assert await store.turns_of("g1", again.id) == []
