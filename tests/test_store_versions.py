"""Versions of messages in the store (``store.versions``), on both backends.

Two store instances on one store stand for two gateway processes; closing
every instance and opening a new one stands for a restart. An edit keeps
every earlier text; a reply's versions are found from the log; the chosen
version is kept on the reply's first version.
"""

from __future__ import annotations

import asyncio

import pytest

from protocol.versions import MAX_VERSIONS
from store import GroupMessage
from store.versions import (
    VersionError,
    VersionErrorCode,
    chosen_versions,
    edited_frame,
    family_roots,
)
from tests.fixtures.store_samples import sample_group
from tests.fixtures.stores import StoreFactory


def said(author: str, text: str, ts: float) -> GroupMessage:
    return GroupMessage(author=author, role="user", text=text, ts=ts)


def answer(vp: str, text: str, trigger: str, **meta: object) -> GroupMessage:
    return GroupMessage(
        author=vp, role="assistant", text=text, meta={"causedBy": [trigger], **meta}
    )


async def test_an_edit_keeps_every_text_and_survives_a_restart(
    store_factory: StoreFactory,
) -> None:
    one, two = store_factory(), store_factory()
    group = await one.create_group(sample_group(members=["ann"]))
    msg, _ = await one.append_message(group.id, said("ann", "cache the sessions in redis", 1.0))
    first = await one.edit_message(
        group.id, msg.id, "cache the sessions in memcached", by="ann", ts=2.0
    )
    assert first is not None and first.text == "cache the sessions in memcached"
    # Another process edits what the first left.
    second = await two.edit_message(group.id, msg.id, "cache nothing at all", by="ann", ts=3.0)
    assert second is not None
    assert second.meta["versions"] == [
        {"text": "cache the sessions in redis", "ts": 1.0},
        {"text": "cache the sessions in memcached", "ts": 2.0},
    ]
    assert (second.meta["editedAt"], second.meta["editedBy"]) == (3.0, "ann")
    frame = edited_frame(group.id, second)
    assert (frame.version, frame.text, frame.edited_at) == (3, "cache nothing at all", 3.0)
    # Search reads the current text only.
    assert [h.message_id for h in await two.search_messages([group.id], "nothing")] == [msg.id]
    assert await two.search_messages([group.id], "memcached") == []

    for opened in store_factory.opened:
        await opened.close()
    again = store_factory()
    stored = await again.get_message(group.id, msg.id)
    assert stored is not None and stored.text == "cache nothing at all"
    assert [v["text"] for v in stored.meta["versions"]] == [
        "cache the sessions in redis",
        "cache the sessions in memcached",
    ]
    assert await again.edit_message(group.id, "msg_missing", "x", by="ann", ts=4.0) is None


async def test_two_edits_at_once_both_land(store_factory: StoreFactory) -> None:
    one, two = store_factory(), store_factory()
    group = await one.create_group(sample_group(members=["ann"]))
    msg, _ = await one.append_message(group.id, said("ann", "v1", 1.0))
    await asyncio.gather(
        one.edit_message(group.id, msg.id, "from one", by="ann", ts=2.0),
        two.edit_message(group.id, msg.id, "from two", by="ann", ts=2.0),
    )
    stored = await one.get_message(group.id, msg.id)
    assert stored is not None
    texts = [v["text"] for v in stored.meta["versions"]] + [stored.text]
    assert texts[0] == "v1" and sorted(texts[1:]) == ["from one", "from two"]


async def test_a_deleted_message_or_one_with_too_many_versions_is_not_edited(
    store_factory: StoreFactory,
) -> None:
    store = store_factory()
    group = await store.create_group(sample_group(members=["ann"]))
    gone, _ = await store.append_message(group.id, said("ann", "oops", 1.0))
    await store.delete_message(group.id, gone.id, by="ann", ts=2.0)
    with pytest.raises(VersionError) as refused:
        await store.edit_message(group.id, gone.id, "back", by="ann", ts=3.0)
    assert refused.value.code is VersionErrorCode.DELETED
    stored = await store.get_message(group.id, gone.id)
    assert stored is not None and stored.text == "" and "versions" not in stored.meta

    busy, _ = await store.append_message(group.id, said("ann", "v1", 1.0))
    for n in range(2, MAX_VERSIONS + 1):
        await store.edit_message(group.id, busy.id, f"v{n}", by="ann", ts=float(n))
    with pytest.raises(VersionError) as full:
        await store.edit_message(group.id, busy.id, "one more", by="ann", ts=99.0)
    assert full.value.code is VersionErrorCode.TOO_MANY_VERSIONS
    stored = await store.get_message(group.id, busy.id)
    assert stored is not None and stored.text == f"v{MAX_VERSIONS}"


async def test_a_replys_versions_and_the_chosen_one(store_factory: StoreFactory) -> None:
    store = store_factory()
    group = await store.create_group(sample_group(members=["ann"]))
    q, _ = await store.append_message(group.id, said("ann", "LRU?", 1.0))
    v1, _ = await store.append_message(group.id, answer("linus", "use a list", q.id))
    await store.supersede_message(group.id, v1.id, turn_id="t2", by="ann", ts=2.0)
    v2, _ = await store.append_message(
        group.id, answer("linus", "use a dict", q.id, regenerates=v1.id)
    )
    await store.supersede_message(group.id, v2.id, turn_id="t3", by="ann", ts=3.0)
    v3, _ = await store.append_message(
        group.id, answer("linus", "use both", q.id, regenerates=v2.id)
    )
    other, _ = await store.append_message(group.id, answer("kent", "test it", q.id))

    log = await store.read_messages(group.id, limit=50)
    assert family_roots(log) == {v1.id: v1.id, v2.id: v1.id, v3.id: v1.id}
    assert chosen_versions(log) == {v1.id: v3.id}
    # A window that starts after the first version still names it the root.
    assert family_roots([m for m in log if m.id != v1.id]) == {v2.id: v1.id, v3.id: v1.id}
    assert other.id not in family_roots(log)

    await store.choose_version(group.id, v1.id, v2.id, by="bob", ts=4.0)
    for opened in store_factory.opened:
        await opened.close()
    again = store_factory()
    log = await again.read_messages(group.id, limit=50)
    assert chosen_versions(log) == {v1.id: v2.id}
    # Cleared (a new version is on its way): the newest is shown again.
    await again.choose_version(group.id, v1.id, None, by="ann", ts=5.0)
    assert chosen_versions(await again.read_messages(group.id, limit=50)) == {v1.id: v3.id}
