"""Reactions and pins in the store (``store.reactions``), on both backends.

Two store instances on one store stand for two gateway processes; closing
every instance and opening a new one stands for a restart. Each change that
changed something is in the group's event log, with the whole new state,
in the order the changes were made.
"""

from __future__ import annotations

import asyncio

import pytest

from protocol import MessagePins, MessageReactions
from protocol.reactions import MAX_PINS, MAX_REACTION_KINDS, emoji_problem
from store.base import Group
from store.reactions import Pin, Reaction, ReactionError, ReactionErrorCode
from tests.fixtures.stores import StoreFactory

G = "grp_reactions"
M1, M2 = "msg_one", "msg_two"


async def test_toggles_of_several_people_and_the_events_they_append(
    store_factory: StoreFactory,
) -> None:
    one, two = store_factory(), store_factory()
    added = await one.react(G, M1, "👍", "ann", on=None, ts=1.0)
    assert added.on and added.changed and added.reactions == (Reaction("👍", ("ann",)),)
    # Another process, another person, the same emoji, then another emoji.
    await two.react(G, M1, "👍", "bob", on=None, ts=2.0)
    both = await two.react(G, M1, "🎉", "bob", on=True, ts=3.0)
    assert both.reactions == (Reaction("👍", ("ann", "bob")), Reaction("🎉", ("bob",)))
    # Adding what is there, or removing what is not, changes nothing.
    again = await one.react(G, M1, "🎉", "bob", on=True, ts=4.0)
    assert again.on and not again.changed and again.seq == 0
    absent = await one.react(G, M1, "🎉", "ann", on=False, ts=4.0)
    assert not absent.on and not absent.changed
    # A toggle of one's own takes one's own reaction off, nobody else's.
    off = await one.react(G, M1, "👍", "ann", on=None, ts=5.0)
    assert not off.on and off.reactions == (Reaction("👍", ("bob",)), Reaction("🎉", ("bob",)))
    # The last user of an emoji takes it off the message.
    gone = await two.react(G, M1, "👍", "bob", on=False, ts=6.0)
    assert gone.reactions == (Reaction("🎉", ("bob",)),)
    assert await one.reactions_of(G, [M1, M2]) == {M1: (Reaction("🎉", ("bob",)),)}

    batch = await one.read_events(G, 0)
    frames = [e.frame() for e in batch.events]
    assert all(isinstance(f, MessageReactions) for f in frames)
    assert [e.seq for e in batch.events] == [1, 2, 3, 4, 5]
    assert [(f.by, f.emoji, f.on) for f in frames if isinstance(f, MessageReactions)] == [
        ("ann", "👍", True),
        ("bob", "👍", True),
        ("bob", "🎉", True),
        ("ann", "👍", False),
        ("bob", "👍", False),
    ]
    last = frames[-1]
    assert isinstance(last, MessageReactions) and last.group_id == G and last.message_id == M1
    assert [(r.emoji, r.users) for r in last.reactions] == [("🎉", ["bob"])]
    assert [off.seq, gone.seq] == [4, 5]


async def test_reactions_at_the_same_instant_from_two_processes_all_land(
    store_factory: StoreFactory,
) -> None:
    one, two = store_factory(), store_factory()
    people = [f"u{i}" for i in range(12)]
    await asyncio.gather(
        *(
            (one if i % 2 else two).react(G, M1, "❤️", user, on=True, ts=float(i))
            for i, user in enumerate(people)
        )
    )
    (hearts,) = (await one.reactions_of(G, [M1]))[M1]
    assert sorted(hearts.users) == sorted(people)
    # Each landed change is one event, and the last carries everyone.
    batch = await two.read_events(G, 0)
    assert len(batch.events) == len(people)
    last = batch.events[-1].frame()
    assert isinstance(last, MessageReactions) and sorted(last.reactions[0].users) == sorted(people)


async def test_a_message_takes_a_bounded_number_of_different_emoji(
    store_factory: StoreFactory,
) -> None:
    store = store_factory()
    emoji = [chr(0x1F600 + i) for i in range(MAX_REACTION_KINDS + 1)]
    for each in emoji[:-1]:
        await store.react(G, M1, each, "ann", on=True, ts=1.0)
    head = await store.head(G)
    with pytest.raises(ReactionError) as refused:
        await store.react(G, M1, emoji[-1], "bob", on=True, ts=2.0)
    assert refused.value.code is ReactionErrorCode.TOO_MANY_REACTIONS
    assert refused.value.limit == MAX_REACTION_KINDS
    # Nothing was written, nothing announced; an emoji already there still takes people.
    assert await store.head(G) == head
    assert len((await store.reactions_of(G, [M1]))[M1]) == MAX_REACTION_KINDS
    joined = await store.react(G, M1, emoji[0], "bob", on=True, ts=3.0)
    assert joined.changed and joined.reactions[0].users == ("ann", "bob")


async def test_pins_are_ordered_idempotent_and_capped(store_factory: StoreFactory) -> None:
    one, two = store_factory(), store_factory()
    first = await one.pin(G, M1, "ann", pinned=True, ts=10.0)
    assert first.changed and first.pins == (Pin(M1, "ann", 10.0),)
    second = await two.pin(G, M2, "bob", pinned=True, ts=11.0)
    assert second.pins == (Pin(M1, "ann", 10.0), Pin(M2, "bob", 11.0))
    # Pinning again keeps who pinned it first and when; no event.
    again = await two.pin(G, M1, "bob", pinned=True, ts=12.0)
    assert not again.changed and again.pins == second.pins
    unpinned = await one.pin(G, M1, "bob", pinned=False, ts=13.0)
    assert unpinned.changed and unpinned.pins == (Pin(M2, "bob", 11.0),)
    assert not (await one.pin(G, M1, "bob", pinned=False, ts=14.0)).changed
    assert await two.pins_of(G) == (Pin(M2, "bob", 11.0),)
    frames = [e.frame() for e in (await one.read_events(G, 0)).events]
    assert [(f.message_id, f.pinned, f.by) for f in frames if isinstance(f, MessagePins)] == [
        (M1, True, "ann"),
        (M2, True, "bob"),
        (M1, False, "bob"),
    ]

    for i in range(MAX_PINS - 1):
        await one.pin(G, f"msg_{i}", "ann", pinned=True, ts=20.0 + i)
    with pytest.raises(ReactionError) as refused:
        await two.pin(G, "msg_over", "bob", pinned=True, ts=99.0)
    assert refused.value.code is ReactionErrorCode.TOO_MANY_PINS
    assert len(await one.pins_of(G)) == MAX_PINS


async def test_reactions_and_pins_survive_a_restart_and_go_with_their_group(
    store_factory: StoreFactory,
) -> None:
    store = store_factory()
    await store.react(G, M1, "🚀", "ann", on=True, ts=1.0)
    await store.react(G, M1, "🚀", "bob", on=True, ts=2.0)
    await store.react(G, M2, "👀", "bob", on=True, ts=3.0)
    await store.pin(G, M2, "ann", pinned=True, ts=4.0)
    for opened in store_factory.opened:
        await opened.close()
    again = store_factory()
    assert await again.reactions_of(G, [M1, M2]) == {
        M1: (Reaction("🚀", ("ann", "bob")),),
        M2: (Reaction("👀", ("bob",)),),
    }
    assert await again.pins_of(G) == (Pin(M2, "ann", 4.0),)
    # Toggling after the restart goes on from the stored state.
    assert not (await again.react(G, M1, "🚀", "ann", on=None, ts=5.0)).on

    await again.create_group(Group(id=G, name="g"))
    assert await again.delete_group(G)
    assert await again.reactions_of(G, [M1, M2]) == {}
    assert await again.pins_of(G) == ()


@pytest.mark.parametrize("text", ["👍", "❤️", "🇫🇷", "👨‍👩‍👧", "1️⃣", "👍🏽", "🏴󠁧󠁢󠁳󠁣󠁴󠁿"])
def test_what_counts_as_an_emoji(text: str) -> None:
    assert emoji_problem(text) is None


@pytest.mark.parametrize("text", ["", "ok", ":)", "<b>", "👍 ", "a👍", "1", "\u200d", "👍" * 17])
def test_what_does_not(text: str) -> None:
    assert emoji_problem(text) is not None
