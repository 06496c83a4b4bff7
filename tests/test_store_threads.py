"""Threads in the store (``store.threads``), on both backends.

A reply in a thread is a group message whose ``meta.threadId`` names the
root; the store finds a thread's replies in order and sums each thread up
for the main timeline. Two store instances stand for two gateway
processes; closing every instance and opening a new one for a restart.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from store.base import Group, GroupMessage
from store.embedded import EmbeddedStore
from store.embedded_threads import REPLIES_SQL
from store.threads import MAX_THREAD_READ, THREAD_KEY, ThreadSummary
from tests.fixtures.stores import StoreFactory

G = "grp_threads"


def _msg(
    author: str, text: str, ts: float, thread: str | None = None, **meta: object
) -> GroupMessage:
    role = "assistant" if author.startswith("vp:") else "user"
    full: dict[str, object] = dict(meta)
    if thread is not None:
        full[THREAD_KEY] = thread
    return GroupMessage(author=author.removeprefix("vp:"), role=role, text=text, ts=ts, meta=full)


async def test_replies_in_order_and_summaries_from_two_processes(
    store_factory: StoreFactory,
) -> None:
    one, two = store_factory(), store_factory()
    root, _ = await one.append_message(G, _msg("ann", "a side question", 1.0))
    other, _ = await one.append_message(G, _msg("bob", "no thread here", 2.0))
    r1, _ = await two.append_message(G, _msg("bob", "first", 3.0, root.id))
    await one.append_message(G, _msg("ann", "main timeline again", 4.0))
    r2, _ = await one.append_message(G, _msg("vp:linus", "an answer", 5.0, root.id))
    r3, _ = await two.append_message(G, _msg("ann", "thanks", 6.0, root.id))

    for store in (one, two):
        replies = await store.thread_replies(G, root.id)
        assert [m.id for m in replies] == [r1.id, r2.id, r3.id]
        assert [m.text for m in replies] == ["first", "an answer", "thanks"]
        assert await store.thread_replies(G, other.id) == []
        assert [m.id for m in await store.thread_replies(G, root.id, limit=2)] == [r2.id, r3.id]
        summaries = await store.thread_summaries(G, [root.id, other.id, "msg_unknown"])
        assert summaries == {
            root.id: ThreadSummary(root.id, 3, 6.0, r3.id, ("bob", "linus", "ann"))
        }
    # Another group's thread under the same id is not this one's.
    assert await one.thread_replies("grp_elsewhere", root.id) == []


async def test_deleted_replies_and_notices_do_not_count(store_factory: StoreFactory) -> None:
    store = store_factory()
    root, _ = await store.append_message(G, _msg("ann", "root", 1.0))
    kept, _ = await store.append_message(G, _msg("bob", "kept", 2.0, root.id))
    gone, _ = await store.append_message(G, _msg("ann", "gone", 3.0, root.id))
    notice = GroupMessage(
        author="system", role="system", text="n", ts=4.0, meta={THREAD_KEY: root.id}
    )
    await store.append_message(G, notice)
    await store.delete_message(G, gone.id, by="ann", ts=5.0)
    # The tombstone stays in the thread, as in the group log; the summary skips it.
    assert [m.id for m in await store.thread_replies(G, root.id)] == [kept.id, gone.id, notice.id]
    summary = (await store.thread_summaries(G, [root.id]))[root.id]
    assert (summary.count, summary.last_id, summary.participants) == (1, kept.id, ("bob",))
    await store.delete_message(G, kept.id, by="bob", ts=6.0)
    assert await store.thread_summaries(G, [root.id]) == {}


async def test_a_repeated_client_message_id_is_one_reply(store_factory: StoreFactory) -> None:
    store = store_factory()
    root, _ = await store.append_message(G, _msg("ann", "root", 1.0))
    first, created = await store.append_message(
        G, _msg("ann", "once", 2.0, root.id, clientMessageId="c-1")
    )
    again, again_created = await store.append_message(
        G, _msg("ann", "once", 2.5, root.id, clientMessageId="c-1")
    )
    assert created and not again_created and again.id == first.id
    assert [m.id for m in await store.thread_replies(G, root.id)] == [first.id]
    assert (await store.thread_summaries(G, [root.id]))[root.id].count == 1


async def test_threads_survive_a_restart_and_go_with_their_group(
    store_factory: StoreFactory,
) -> None:
    store = store_factory()
    await store.create_group(Group(id=G, name="g"))
    root, _ = await store.append_message(G, _msg("ann", "root", 1.0))
    reply, _ = await store.append_message(G, _msg("bob", "reply", 2.0, root.id))
    for opened in store_factory.opened:
        await opened.close()
    again = store_factory()
    assert [m.id for m in await again.thread_replies(G, root.id)] == [reply.id]
    assert (await again.thread_summaries(G, [root.id]))[root.id].participants == ("bob",)
    assert await again.delete_group(G)
    assert await again.thread_replies(G, root.id) == []
    assert await again.thread_summaries(G, [root.id]) == {}
    assert MAX_THREAD_READ >= 100


async def test_the_embedded_store_reads_a_thread_through_its_index(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path)
    try:
        await store.append_message(G, _msg("ann", "root", 1.0))
    finally:
        await store.close()
    conn = sqlite3.connect(store.path)
    try:
        plan = conn.execute(f"EXPLAIN QUERY PLAN {REPLIES_SQL}", (G, "msg_x", 5)).fetchall()
    finally:
        conn.close()
    assert any("messages_by_thread" in str(row) for row in plan), plan
