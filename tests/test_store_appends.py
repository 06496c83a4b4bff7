"""Group commit on both backends: appends that wait together share one write."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from store import Store, StoreError, new_id
from store.appends import AppendQueue
from store.embedded import EmbeddedStore
from tests.fixtures.store_samples import notice


def _queue(store: Store) -> AppendQueue:
    queue = store._appends  # type: ignore[attr-defined]
    assert isinstance(queue, AppendQueue)
    return queue


async def test_an_append_alone_is_one_write(store: Store) -> None:
    gid = new_id("grp")
    before = _queue(store).writes
    for i in range(3):
        assert await store.append_event(gid, notice(i=i)) == i + 1
    assert _queue(store).writes - before == 3


async def test_appends_waiting_together_share_a_write_and_keep_their_order(store: Store) -> None:
    groups = [new_id("grp") for _ in range(20)]
    await store.append_event(groups[0], notice(i=-1))
    before = _queue(store).writes

    async def stream(gid: str) -> list[int]:
        # Each caller awaits its appends one after another, as a turn does;
        # the second of each pair is a status and a payload together.
        seqs = []
        for i in range(5):
            seqs.append(await store.append_event(gid, notice(g=gid, i=2 * i)))
            seqs += await store.append_events(
                gid, [notice(g=gid, i=2 * i + 1, part=0), notice(g=gid, i=2 * i + 1, part=1)]
            )
        return seqs

    seqs = await asyncio.gather(*(stream(g) for g in groups))
    # 200 appends of 300 events; each round of the 20 streams waits together.
    assert _queue(store).writes - before <= 40
    assert seqs[0] == list(range(2, 17))
    assert all(s == list(range(1, 16)) for s in seqs[1:])
    expected: list[tuple[int, int | None]] = []
    for i in range(5):
        expected += [(2 * i, None), (2 * i + 1, 0), (2 * i + 1, 1)]
    for gid in groups:
        batch = await store.read_events(gid, 0)
        details = [json.loads(e.text)["data"]["detail"] for e in batch.events]
        mine = [(d["i"], d.get("part")) for d in details if d.get("g") == gid]
        assert mine == expected


async def test_a_failed_shared_transaction_fails_every_append_in_it(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path)
    gid = new_id("grp")
    await store.append_event(gid, notice(i=0))
    await store.close()
    got = await asyncio.gather(
        *(store.append_event(gid, notice(i=i)) for i in range(3)), return_exceptions=True
    )
    assert all(isinstance(g, StoreError) for g in got), got
