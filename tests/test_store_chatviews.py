"""Search, deletion, read marks, group summaries and usage totals, on both backends.

Every test runs on the embedded (SQLite FTS5) and the Redis (inverted index)
store through the ``store`` fixture, with the same data and the same
expectations, so the two agree on the rules in ``store.chatviews``.
"""

from __future__ import annotations

from pathlib import Path

from store import GroupMessage, Store
from store.chatviews import UNREAD_CAP, TurnUsage
from store.embedded import EmbeddedStore
from store.sqlite import connect
from store.threads import THREAD_KEY
from tests.fixtures.store_samples import sample_group


def said(author: str, text: str, ts: float, role: str = "user") -> GroupMessage:
    return GroupMessage(author=author, role=role, text=text, ts=ts)


async def test_search_matches_every_word_by_prefix_newest_first(store: Store) -> None:
    a = await store.create_group(sample_group(members=["alice"]))
    b = await store.create_group(sample_group(members=["alice"]))
    other = await store.create_group(sample_group(members=["mallory"]))
    m1, _ = await store.append_message(a.id, said("alice", "How should we cache the sessions?", 1))
    m2, _ = await store.append_message(
        b.id, said("linus", "Caching sessions in Redis is fine.", 2, "assistant")
    )
    await store.append_message(a.id, said("alice", "Unrelated: lunch at noon", 3))
    await store.append_message(other.id, said("mallory", "cache sessions secret", 4))

    hits = await store.search_messages([a.id, b.id], "cach SESSION")
    assert [(h.group_id, h.message_id) for h in hits] == [(b.id, m2.id), (a.id, m1.id)]
    assert hits[0].author == "linus" and hits[0].role == "assistant"
    assert "Caching sessions" in hits[0].snippet
    # Only the groups asked about; every word must match; empty queries find nothing.
    assert await store.search_messages([a.id], "redis") == []
    assert await store.search_messages([a.id, b.id], "cache lunch") == []
    assert await store.search_messages([a.id, b.id], "  ?! ") == []
    assert await store.search_messages([], "cache") == []
    assert len(await store.search_messages([a.id, b.id], "sessions", limit=1)) == 1


async def test_a_search_hit_names_the_thread_its_message_is_a_reply_in(store: Store) -> None:
    g = await store.create_group(sample_group(members=["alice"]))
    root, _ = await store.append_message(g.id, said("alice", "Which sessions store?", 1))
    reply = said("linus", "Redis sessions, with a TTL", 2, "assistant")
    reply.meta[THREAD_KEY] = root.id
    answer, _ = await store.append_message(g.id, reply)
    hits = await store.search_messages([g.id], "sessions")
    assert [(h.message_id, h.thread_id) for h in hits] == [(answer.id, root.id), (root.id, None)]


async def test_search_splits_words_like_both_backends_and_skips_notices(store: Store) -> None:
    g = await store.create_group(sample_group(members=["alice"]))
    m, _ = await store.append_message(g.id, said("alice", "use route_forward for Überweisung", 1))
    await store.append_message(g.id, said("system", "forward notice", 2, "system"))
    for query in ("forward", "route_forward", "überweisung", "ÜBER"):
        hits = await store.search_messages([g.id], query)
        assert [h.message_id for h in hits] == [m.id], query


async def test_delete_keeps_a_tombstone_and_leaves_the_index(store: Store) -> None:
    g = await store.create_group(sample_group(members=["alice"]))
    m, _ = await store.append_message(g.id, said("alice", "a secret plan @linus", 1))
    gone = await store.delete_message(g.id, m.id, by="alice", ts=5.0)
    assert gone is not None and gone.text == "" and gone.meta["deleted"] is True
    assert gone.meta["deletedBy"] == "alice" and gone.meta["deletedAt"] == 5.0
    stored = await store.get_message(g.id, m.id)
    assert stored == gone
    assert [x.id for x in await store.read_messages(g.id)] == [m.id]  # its place stays
    assert await store.search_messages([g.id], "secret") == []
    again = await store.delete_message(g.id, m.id, by="alice", ts=9.0)
    assert again is not None and again.meta["deletedAt"] == 5.0
    assert await store.delete_message(g.id, "msg_missing", by="alice", ts=1.0) is None


async def test_supersede_marks_the_reply_and_keeps_it_searchable(store: Store) -> None:
    g = await store.create_group(sample_group(members=["alice"]))
    r, _ = await store.append_message(g.id, said("linus", "use an LRU cache", 1, "assistant"))
    marked = await store.supersede_message(g.id, r.id, turn_id="t2", by="alice", ts=3.0)
    assert marked is not None and marked.meta["supersededBy"] == "t2"
    assert marked.text == "use an LRU cache"
    assert (await store.get_message(g.id, r.id)) == marked
    assert [h.message_id for h in await store.search_messages([g.id], "lru")] == [r.id]


async def test_unread_counts_others_messages_after_the_mark(store: Store) -> None:
    g = await store.create_group(sample_group(members=["alice", "bob"]))
    empty = await store.create_group(sample_group(members=["alice"]))
    first, _ = await store.append_message(g.id, said("bob", "hello alice", 1))
    await store.append_message(g.id, said("alice", "hi bob", 2))
    reply, _ = await store.append_message(g.id, said("linus", "both of you: hi", 3, "assistant"))
    await store.append_message(g.id, said("system", "notice", 4, "system"))

    alice, none = await store.summaries([g.id, empty.id], "alice")
    assert alice.group_id == g.id and alice.unread == 2  # bob's and linus's
    assert alice.last is not None and alice.last.message_id == reply.id  # notices are skipped
    assert alice.last.author == "linus" and alice.last.text == "both of you: hi"
    assert none.group_id == empty.id and none.unread == 0 and none.last is None

    assert await store.mark_read(g.id, "alice", first.id)
    (alice,) = await store.summaries([g.id], "alice")
    assert alice.unread == 1
    assert await store.mark_read(g.id, "alice", reply.id)
    assert (await store.summaries([g.id], "alice"))[0].unread == 0
    # A mark never moves back, and an unknown message moves nothing.
    assert await store.mark_read(g.id, "alice", first.id)
    assert (await store.summaries([g.id], "alice"))[0].unread == 0
    assert not await store.mark_read(g.id, "alice", "msg_missing")
    # Marks are per user: bob has read nothing yet (alice's and linus's count).
    assert (await store.summaries([g.id], "bob"))[0].unread == 2

    # A deleted message is neither unread nor the last message.
    late, _ = await store.append_message(g.id, said("bob", "oops", 5))
    assert (await store.summaries([g.id], "alice"))[0].unread == 1
    await store.delete_message(g.id, late.id, by="bob", ts=6)
    (alice,) = await store.summaries([g.id], "alice")
    assert alice.unread == 0 and alice.last is not None and alice.last.message_id == reply.id


async def test_unread_is_capped(store: Store) -> None:
    g = await store.create_group(sample_group(members=["alice"]))
    for i in range(UNREAD_CAP + 3):
        await store.append_message(g.id, said("bob", f"m{i}", float(i)))
    assert (await store.summaries([g.id], "alice"))[0].unread == UNREAD_CAP


async def test_usage_totals_count_each_turn_once(store: Store) -> None:
    g = await store.create_group(sample_group())
    totals = await store.group_usage(g.id)
    assert (totals.turns, totals.input_tokens, totals.output_tokens, totals.cost_usd) == (
        0,
        0,
        0,
        0.0,
    )
    assert await store.add_usage(g.id, TurnUsage("t1", 100, 20, 0.0015))
    assert await store.add_usage(g.id, TurnUsage("t2", 50, 5, 0.0005))
    assert not await store.add_usage(g.id, TurnUsage("t1", 100, 20, 0.0015))
    totals = await store.group_usage(g.id)
    assert (totals.turns, totals.input_tokens, totals.output_tokens) == (2, 150, 25)
    assert abs(totals.cost_usd - 0.002) < 1e-9


async def test_deleting_a_group_removes_its_index_marks_and_usage(store: Store) -> None:
    g = await store.create_group(sample_group(members=["alice"]))
    m, _ = await store.append_message(g.id, said("bob", "findable words", 1))
    await store.mark_read(g.id, "alice", m.id)
    await store.add_usage(g.id, TurnUsage("t1", 1, 1, 0.1))
    assert await store.delete_group(g.id)
    assert await store.search_messages([g.id], "findable") == []
    assert (await store.group_usage(g.id)).turns == 0
    # A group made again under the same id starts with nothing read.
    again = await store.create_group(sample_group(id=g.id, members=["alice"]))
    await store.append_message(again.id, said("bob", "new", 2))
    assert (await store.summaries([g.id], "alice"))[0].unread == 1


async def test_an_older_embedded_database_gets_its_messages_indexed(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path)
    g = await store.create_group(sample_group())
    m, _ = await store.append_message(g.id, said("alice", "written before search existed", 1))
    await store.close()
    conn = connect(tmp_path / "yeaft-store.sqlite3", 5.0)
    conn.execute("DROP TABLE message_fts")
    conn.close()
    reopened = EmbeddedStore(tmp_path)
    try:
        hits = await reopened.search_messages([g.id], "existed")
        assert [h.message_id for h in hits] == [m.id]
    finally:
        await reopened.close()
