"""Group commit in the embedded store: appends that wait together share one transaction."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from store import StoreError, new_id
from store.embedded import EmbeddedStore
from tests.fixtures.store_samples import notice


async def test_an_append_alone_is_one_transaction(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path)
    try:
        gid = new_id("grp")
        for i in range(3):
            assert await store.append_event(gid, notice(i=i)) == i + 1
        assert store._appends.transactions == 3
    finally:
        await store.close()


async def test_appends_waiting_together_share_a_transaction_and_keep_their_order(
    tmp_path: Path,
) -> None:
    store = EmbeddedStore(tmp_path)
    try:
        groups = [new_id("grp") for _ in range(20)]
        await store.append_event(groups[0], notice(i=-1))  # the file exists: no setup below
        before = store._appends.transactions

        async def stream(gid: str) -> list[int]:
            # Each caller awaits its own appends one after another, as a turn does.
            return [await store.append_event(gid, notice(g=gid, i=i)) for i in range(10)]

        seqs = await asyncio.gather(*(stream(g) for g in groups))
        took = store._appends.transactions - before
        # 200 appends; each round of the 20 streams waits together.
        assert took <= 40, took
        first = 2  # groups[0] had one event already
        assert seqs[0] == list(range(first, first + 10))
        assert all(s == list(range(1, 11)) for s in seqs[1:])
        for gid in groups:
            batch = await store.read_events(gid, 0)
            mine = [json.loads(e.text)["data"]["detail"] for e in batch.events]
            assert [d["i"] for d in mine if d.get("g") == gid] == list(range(10))
    finally:
        await store.close()


async def test_a_failed_shared_transaction_fails_every_append_in_it(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path)
    gid = new_id("grp")
    await store.append_event(gid, notice(i=0))
    await store.close()
    got = await asyncio.gather(
        *(store.append_event(gid, notice(i=i)) for i in range(3)), return_exceptions=True
    )
    assert all(isinstance(g, StoreError) for g in got), got
