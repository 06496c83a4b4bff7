"""Engine transcripts in the store: a head and a row per message, saved from the first change.

Both backends (the ``store`` fixture runs each test on the embedded store
and on Redis). A turn adds a few messages to a transcript of hundreds; the
store must take the head and only the new rows, atomically, and refuse a
save that assumes rows it does not hold.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from actors.transcripts import TranscriptCache, load_conversation
from engine.messages import Conversation, Message, Thinking, ToolCall
from store import Store, StoreError
from store.base import StoredTranscript, new_id


def sample(gid: str) -> Conversation:
    return Conversation(
        id=f"{gid}:jobs",
        summary="Earlier: the team agreed to ship on Friday, 周五发布.",
        compactions=2,
        meta={"cursor": "m-1"},
        messages=[
            Message.user("what now?", speaker="alice"),
            Message.assistant(
                "let me check",
                speaker="jobs",
                thinking=[Thinking(text="hmm", signature="sig")],
                tool_calls=[ToolCall(id="t1", name="search", arguments={"q": "x", "n": [1]})],
            ),
            Message.tool_result("t1", "found nothing", name="search", is_error=True),
            Message.assistant("nothing yet", meta={"usage": {"input_tokens": 3}}),
        ],
    )


class Recording:
    """The store, with each transcript save it is asked for: (rows, keep)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.saves: list[tuple[int, int]] = []
        self.fail_next = False

    async def load_transcript(self, group_id: str, vp_id: str) -> StoredTranscript | None:
        return await self.store.load_transcript(group_id, vp_id)

    async def save_transcript(
        self, group_id: str, vp_id: str, head: str, messages: Sequence[str], keep: int = 0
    ) -> bool:
        self.saves.append((len(messages), keep))
        if self.fail_next:
            self.fail_next = False
            raise StoreError("the store is away")
        return await self.store.save_transcript(group_id, vp_id, head, messages, keep)


async def saved_sample(store: Store) -> tuple[Recording, TranscriptCache, str, Conversation]:
    """A VP's cache that has saved :func:`sample` once (its first save: 4 rows)."""
    gid = new_id("grp")
    rec = Recording(store)
    cache = TranscriptCache("jobs")
    conv = sample(gid)
    cache.keep(gid, conv)
    await cache.save(rec, gid, conv)
    return rec, cache, gid, conv


# -- the store ---------------------------------------------------------------
async def test_head_and_rows_round_trip_and_keep_replaces_the_tail(store: Store) -> None:
    gid = new_id("grp")
    assert await store.load_transcript(gid, "jobs") is None

    assert await store.save_transcript(gid, "jobs", '{"h": 1}', ['"a"', '"b"', '"c"'])
    assert await store.load_transcript(gid, "jobs") == StoredTranscript(
        '{"h": 1}', ['"a"', '"b"', '"c"']
    )
    assert await store.load_transcript(gid, "rams") is None

    assert await store.save_transcript(gid, "jobs", '{"h": 2}', ['"d"'], keep=2)
    assert await store.load_transcript(gid, "jobs") == StoredTranscript(
        '{"h": 2}', ['"a"', '"b"', '"d"']
    )
    assert await store.save_transcript(gid, "jobs", '{"h": 3}', [], keep=3)
    assert await store.load_transcript(gid, "jobs") == StoredTranscript(
        '{"h": 3}', ['"a"', '"b"', '"d"']
    )
    assert await store.save_transcript(gid, "jobs", '{"h": 4}', [])
    assert await store.load_transcript(gid, "jobs") == StoredTranscript('{"h": 4}', [])


async def test_a_save_assuming_rows_the_store_lacks_writes_nothing(store: Store) -> None:
    gid = new_id("grp")
    await store.save_transcript(gid, "jobs", '{"h": 1}', ['"a"'])

    assert not await store.save_transcript(gid, "jobs", '{"h": 2}', ['"c"'], keep=2)
    assert not await store.save_transcript(gid, "rams", '{"h": 2}', ['"c"'], keep=1)

    assert await store.load_transcript(gid, "jobs") == StoredTranscript('{"h": 1}', ['"a"'])
    assert await store.load_transcript(gid, "rams") is None


async def test_thousands_of_rows_load_in_order(store: Store) -> None:
    gid = new_id("grp")
    rows = [f'"{i}"' for i in range(2_500)]
    await store.save_transcript(gid, "jobs", "{}", rows[:1_200])
    await store.save_transcript(gid, "jobs", "{}", rows[1_200:], keep=1_200)

    loaded = await store.load_transcript(gid, "jobs")

    assert loaded is not None and loaded.messages == rows


# -- the VP's side -------------------------------------------------------------
async def test_a_conversation_round_trips_exactly(store: Store) -> None:
    gid = new_id("grp")
    conv = sample(gid)
    cache = TranscriptCache("jobs")
    cache.keep(gid, conv)
    await cache.save(store, gid, conv)

    assert await load_conversation(store, gid, "jobs") == conv
    assert await TranscriptCache("jobs").take(store, gid) == conv
    empty = Conversation(id=f"{gid}:jobs", summary="只有摘要")
    await TranscriptCache("jobs").save(store, gid, empty)
    assert await load_conversation(store, gid, "jobs") == empty


async def test_a_turn_writes_only_the_messages_it_added(store: Store) -> None:
    gid = new_id("grp")
    rec = Recording(store)
    cache = TranscriptCache("jobs")
    conv = await cache.take(rec, gid)
    conv.messages += sample(gid).messages
    cache.keep(gid, conv)
    await cache.save(rec, gid, conv)

    conv = await cache.take(rec, gid)
    conv.messages += [Message.user("and now?", speaker="bob"), Message.assistant("shipping")]
    conv.meta["cursor"] = "m-9"
    cache.keep(gid, conv)
    await cache.save(rec, gid, conv)

    assert rec.saves == [(4, 0), (2, 4)]
    assert await load_conversation(store, gid, "jobs") == conv

    # A restarted actor reads the rows and goes on from them.
    again = TranscriptCache("jobs")
    conv = await again.take(rec, gid)
    conv.messages.append(Message.user("done?"))
    again.keep(gid, conv)
    await again.save(rec, gid, conv)

    assert rec.saves[-1] == (1, 6)
    assert await load_conversation(store, gid, "jobs") == conv


async def test_a_replaced_or_dropped_message_is_written_from_where_it_changed(
    store: Store,
) -> None:
    rec, cache, gid, conv = await saved_sample(store)

    # A message deleted in the group is blanked by a new object in its place.
    conv.messages[2] = conv.messages[2].model_copy(update={"content": "(deleted)"})
    await cache.save(rec, gid, conv)
    # A regenerated turn cuts the transcript back.
    del conv.messages[1:]
    await cache.save(rec, gid, conv)
    # An edit in place that changes the text's length is caught all the same.
    conv.messages += [Message.assistant("long answer"), Message.user("ok")]
    await cache.save(rec, gid, conv)
    conv.messages[1].content = "short"
    await cache.save(rec, gid, conv)

    assert rec.saves == [(4, 0), (2, 2), (0, 1), (2, 1), (2, 1)]
    assert await load_conversation(store, gid, "jobs") == conv


async def test_rows_the_store_lost_are_written_again_whole(store: Store) -> None:
    rec, cache, gid, conv = await saved_sample(store)
    # Someone else cut the stored transcript short.
    await store.save_transcript(gid, "jobs", "{}", [])

    conv.messages.append(Message.user("still there?"))
    await cache.save(rec, gid, conv)

    assert rec.saves[1:] == [(1, 4), (5, 0)]
    assert await load_conversation(store, gid, "jobs") == conv


async def test_a_failed_save_is_made_good_by_the_next(store: Store) -> None:
    rec, cache, gid, conv = await saved_sample(store)

    conv.messages.append(Message.user("one"))
    rec.fail_next = True
    with pytest.raises(StoreError):
        await cache.save(rec, gid, conv)
    conv.messages.append(Message.user("two"))
    await cache.save(rec, gid, conv)

    assert rec.saves[1:] == [(1, 4), (2, 4)]
    assert await load_conversation(store, gid, "jobs") == conv


async def test_a_transcript_saved_whole_before_rows_loads_and_is_rewritten(
    store: Store,
) -> None:
    gid = new_id("grp")
    old = sample(gid)
    # The old format: the whole conversation, messages inside, as the head.
    await store.save_transcript(gid, "jobs", old.model_dump_json(), [])
    rec = Recording(store)
    cache = TranscriptCache("jobs")

    conv = await cache.take(rec, gid)
    assert conv == old
    conv.messages.append(Message.user("new"))
    cache.keep(gid, conv)
    await cache.save(rec, gid, conv)

    assert rec.saves == [(5, 0)]
    stored = await store.load_transcript(gid, "jobs")
    assert stored is not None and '"messages"' not in stored.head
    assert await load_conversation(store, gid, "jobs") == conv
