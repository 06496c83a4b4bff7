"""People's mentions and the activity log in the store (``store.mentions``), on both backends.

A second store instance stands for another process (a gateway reading what
a coordinator wrote); closing every instance and opening a new one stands
for a restart.
"""

from __future__ import annotations

import asyncio

from protocol.inbox import ActivityEvent
from store.base import Group, GroupMessage
from store.mentions import ACTIVITY_LOG, Mention
from store.threads import THREAD_KEY
from tests.fixtures.stores import StoreFactory

G1, G2 = "grp_m1", "grp_m2"


def _msg(mid: str, author: str, text: str, people: list[str], ts: float) -> GroupMessage:
    role = "assistant" if author == "linus" else "user"
    return GroupMessage(id=mid, author=author, role=role, text=text, people=people, ts=ts)


async def _activity(store: object, after: int) -> list[ActivityEvent]:
    batch = await store.read_events(ACTIVITY_LOG, after)  # type: ignore[attr-defined]
    return [ActivityEvent.model_validate_json(e.text) for e in batch.events]


async def test_mentions_are_stored_listed_newest_first_and_survive_a_restart(
    store_factory: StoreFactory,
) -> None:
    one, two = store_factory(), store_factory()
    for gid in (G1, G2):
        await one.create_group(Group(id=gid, name=gid, members=["ann", "bob", "cy"]))
    await one.append_message(G1, _msg("msg_0001", "ann", "@bob look at this", ["bob"], 1.0))
    await one.append_message(G2, _msg("msg_0002", "cy", "hi @bob and @ann", ["bob", "ann"], 2.0))
    await one.append_message(G1, _msg("msg_0003", "linus", "no mention", [], 3.0))
    await one.append_message(G1, _msg("msg_0004", "cy", "@bob again", ["bob"], 4.0))
    # A message's people are stored with it.
    stored = await two.get_message(G2, "msg_0002")
    assert stored is not None and stored.people == ["bob", "ann"]

    listed = await two.mentions_of("bob", [G1, G2])
    assert [(m.group_id, m.message_id, m.author) for m in listed] == [
        (G1, "msg_0004", "cy"),
        (G2, "msg_0002", "cy"),
        (G1, "msg_0001", "ann"),
    ]
    assert listed[0] == Mention(G1, "msg_0004", "cy", "@bob again", 4.0)
    assert [m.message_id for m in await two.mentions_of("bob", [G1, G2], limit=2)] == [
        "msg_0004",
        "msg_0002",
    ]
    # Only the groups asked for (those the person is in now).
    assert [m.message_id for m in await two.mentions_of("bob", [G2])] == ["msg_0002"]
    assert [m.message_id for m in await two.mentions_of("ann", [G1, G2])] == ["msg_0002"]
    assert await two.mentions_of("cy", [G1, G2]) == []

    # A deleted message mentions nobody any more.
    await one.delete_message(G1, "msg_0004", by="cy", ts=5.0)
    assert [m.message_id for m in await two.mentions_of("bob", [G1, G2])] == [
        "msg_0002",
        "msg_0001",
    ]
    await one.close()
    await two.close()
    again = store_factory()
    assert [m.message_id for m in await again.mentions_of("bob", [G1, G2])] == [
        "msg_0002",
        "msg_0001",
    ]
    # Deleting a group takes its mentions with it.
    await again.delete_group(G2)
    assert [m.message_id for m in await again.mentions_of("bob", [G1, G2])] == ["msg_0001"]


async def test_mention_counts_follow_the_read_mark(store_factory: StoreFactory) -> None:
    store = store_factory()
    await store.create_group(Group(id=G1, name=G1, members=["ann", "bob"]))
    await store.append_message(G1, _msg("msg_0001", "ann", "@bob one", ["bob"], 1.0))
    await store.append_message(G1, _msg("msg_0002", "ann", "plain", [], 2.0))
    await store.append_message(G1, _msg("msg_0003", "ann", "@bob two", ["bob"], 3.0))
    (bob,) = await store.summaries([G1], "bob")
    assert (bob.unread, bob.mentions) == (3, 2)
    (ann,) = await store.summaries([G1], "ann")
    assert (ann.unread, ann.mentions) == (0, 0)
    assert await store.mark_read(G1, "bob", "msg_0002")
    (bob,) = await store.summaries([G1], "bob")
    assert (bob.unread, bob.mentions) == (1, 1)
    assert await store.mark_read(G1, "bob", "msg_0003")
    (bob,) = await store.summaries([G1], "bob")
    assert (bob.unread, bob.mentions) == (0, 0)
    # A new mention after the mark counts again; a deleted one does not.
    await store.append_message(G1, _msg("msg_0004", "ann", "@bob three", ["bob"], 4.0))
    (bob,) = await store.summaries([G1], "bob")
    assert (bob.unread, bob.mentions) == (1, 1)
    await store.delete_message(G1, "msg_0004", by="ann", ts=5.0)
    (bob,) = await store.summaries([G1], "bob")
    assert (bob.unread, bob.mentions) == (0, 0)


async def test_stored_messages_and_moved_marks_are_in_the_activity_log(
    store_factory: StoreFactory,
) -> None:
    one, two = store_factory(), store_factory()
    start = await two.head(ACTIVITY_LOG)
    await one.create_group(Group(id=G1, name=G1, members=["ann", "bob"]))
    await one.append_message(G1, _msg("msg_0001", "ann", "@bob  look\nhere", ["bob"], 1.0))
    # A repeat of a stored message is no activity.
    repeat = _msg("msg_0001", "ann", "@bob look", ["bob"], 1.0)
    assert not (await one.append_message(G1, repeat))[1]
    await one.append_message(G1, _msg("msg_0002", "ann", "plain", [], 2.0))
    assert await one.mark_read(G1, "bob", "msg_0002")
    # A mark that does not move (back, or where it is) is no activity.
    assert await one.mark_read(G1, "bob", "msg_0001")
    assert await one.mark_read(G1, "bob", "msg_0002")
    assert not await one.mark_read(G1, "bob", "msg_unknown")
    # A deletion may lower counts: it is activity too (once a message is found).
    assert await one.delete_message(G1, "msg_0001", by="ann", ts=3.0) is not None
    assert await one.delete_message(G1, "msg_nothing", by="ann", ts=3.0) is None
    events = await _activity(two, start)
    assert [(e.kind, e.group_id, e.user, e.message_id) for e in events] == [
        ("message", G1, "ann", "msg_0001"),
        ("message", G1, "ann", "msg_0002"),
        ("read", G1, "bob", "msg_0002"),
        ("deleted", G1, "ann", "msg_0001"),
    ]
    assert events[0].people == ["bob"] and events[0].excerpt == "@bob look here"
    assert events[1].people == [] and events[1].excerpt == ""


async def test_a_blocking_read_of_the_activity_log_gets_another_process_message(
    store_factory: StoreFactory,
) -> None:
    writer, reader = store_factory(), store_factory()
    await writer.create_group(Group(id=G1, name=G1, members=["ann", "bob"]))
    head = await reader.head(ACTIVITY_LOG)
    waiting = asyncio.create_task(reader.read_events(ACTIVITY_LOG, head, wait=20.0))
    await asyncio.sleep(0)  # the read is parked before the write
    await writer.append_message(G1, _msg("msg_0001", "ann", "@bob hi", ["bob"], 1.0))
    batch = await asyncio.wait_for(waiting, 10.0)
    assert [ActivityEvent.model_validate_json(e.text).message_id for e in batch.events] == [
        "msg_0001"
    ]


async def test_a_mention_in_a_thread_names_the_thread(store_factory: StoreFactory) -> None:
    store = store_factory()
    await store.create_group(Group(id=G1, name=G1, members=["ann", "bob"]))
    await store.append_message(G1, _msg("msg_0001", "ann", "which cache?", [], 1.0))
    reply = _msg("msg_0002", "ann", "@bob in the thread", ["bob"], 2.0)
    reply.meta[THREAD_KEY] = "msg_0001"
    await store.append_message(G1, reply)
    await store.append_message(G1, _msg("msg_0003", "ann", "@bob on the main", ["bob"], 3.0))
    listed = await store.mentions_of("bob", [G1])
    assert [(m.message_id, m.thread_id) for m in listed] == [
        ("msg_0003", None),
        ("msg_0002", "msg_0001"),
    ]
