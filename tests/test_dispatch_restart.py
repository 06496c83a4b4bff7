"""A turn whose VP actor died: the dispatcher's word on whether it had started.

It reads the turn's durable record, which the VP marks started with the
turn's first status: a turn nobody could have seen goes to the restarted
actor, one that may have been seen ends with an error result instead of
running twice. When the record cannot be read, the turn counts as started.
"""

from __future__ import annotations

from pathlib import Path

from actors.config import RuntimeConfig
from actors.turns import TurnOrigin, TurnOutcome, TurnRequest
from coordinator.dispatch import Dispatcher
from store import Store
from store.embedded import EmbeddedStore
from store.turns import TurnEnd
from tests.fixtures.store_samples import notice, sample_group


async def _ignore(_req: TurnRequest, _outcome: TurnOutcome) -> None:
    return None


def _request(turn_id: str, vp: str) -> TurnRequest:
    # A reply two hops down a chain: its trigger is not the chain's root.
    origin = TurnOrigin("msg_reply", "msg_root", caused_by=("msg_root",))
    return TurnRequest("g1", vp, turn_id, origin)


async def test_a_turn_counts_as_started_once_its_own_record_says_so(store: Store) -> None:
    await store.create_group(sample_group(id="g1"))
    dispatcher = Dispatcher(RuntimeConfig(), store, "coordinator-0", _ignore)
    mine, other = _request("t1:steve", "steve"), _request("t2:linus", "linus")
    await store.add_turns("g1", [mine.record(), other.record()])
    # Another turn on the same message started: this one has not.
    assert await store.start_turn("g1", other.turn_id) is True
    assert await dispatcher.began(other) is True
    assert await dispatcher.began(mine) is False

    assert await store.start_turn("g1", mine.turn_id) is True
    assert await dispatcher.began(mine) is True
    await store.finish_turn("g1", mine.turn_id, notice("steve"), TurnEnd.ANSWERED)
    assert await dispatcher.began(mine) is True


async def test_a_turn_whose_record_cannot_be_read_counts_as_started(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path)
    await store.create_group(sample_group(id="g1"))
    dispatcher = Dispatcher(RuntimeConfig(), store, "coordinator-0", _ignore)
    req = _request("t1:steve", "steve")
    await store.add_turns("g1", [req.record()])
    await store.close()
    assert await dispatcher.began(req) is True
