"""Member changes, presence and VP placement in the store, on both backends.

Member changes are atomic: many changes made at once from two store
instances (standing for two processes) all land, which a read-modify-write
of the whole record would not guarantee. The rules (owner always a member,
the last member cannot leave) hold whatever the order. A VP's pooled host
is decided once, balanced, and every process gets the same answer.
"""

from __future__ import annotations

import asyncio

import pytest

from store import NotFound, Store
from store.members import MemberChange, MemberError, MemberErrorCode
from store.membership import owner_of
from store.placement import assign
from tests.fixtures.store_samples import sample_group
from tests.fixtures.stores import StoreFactory


async def test_concurrent_member_changes_from_two_stores_all_land(
    store_factory: StoreFactory,
) -> None:
    first, second = store_factory(), store_factory()
    group = await first.create_group(sample_group(members=["ann", "old"], owner="ann"))
    joiners = [f"user{i}" for i in range(24)]
    changes = [
        (first if i % 2 else second).change_members(group.id, MemberChange(add=(user,)))
        for i, user in enumerate(joiners)
    ]
    # A removal races the additions too; it must not bring back nor drop anyone else.
    changes.append(second.change_members(group.id, MemberChange(remove=("old",))))
    await asyncio.gather(*changes)
    stored = await first.get_group(group.id)
    assert stored is not None
    assert sorted(stored.members) == sorted(["ann", *joiners])
    assert stored.owner == "ann"


async def test_the_same_race_through_a_plain_save_loses_changes(
    store_factory: StoreFactory,
) -> None:
    """Why the atomic step exists: read-modify-write of the record drops concurrent changes."""
    first, second = store_factory(), store_factory()
    group = await first.create_group(sample_group(members=["ann"]))
    a, b = await asyncio.gather(first.get_group(group.id), second.get_group(group.id))
    assert a is not None and b is not None
    await first.save_group(a.model_copy(update={"members": [*a.members, "bob"]}))
    await second.save_group(b.model_copy(update={"members": [*b.members, "cat"]}))
    lost = await first.get_group(group.id)
    assert lost is not None and "bob" not in lost.members
    fixed = await first.change_members(group.id, MemberChange(add=("bob",)))
    again = await second.change_members(group.id, MemberChange(add=("dan",)))
    assert fixed.members == ["ann", "cat", "bob"] and again.members == ["ann", "cat", "bob", "dan"]


async def test_owner_rules(store: Store) -> None:
    group = await store.create_group(sample_group(members=["ann", "bob"]))
    # A record made before owners existed is owned by its first member.
    assert group.owner is None and owner_of(group) == "ann"
    refusals = [
        (MemberChange(remove=("ann",)), MemberErrorCode.OWNER_LEAVING),
        (MemberChange(remove=("zed",)), MemberErrorCode.NOT_MEMBER),
        (MemberChange(owner="zed"), MemberErrorCode.NOT_MEMBER),
    ]
    for change, code in refusals:
        with pytest.raises(MemberError) as caught:
            await store.change_members(group.id, change)
        assert caught.value.code is code
    unchanged = await store.get_group(group.id)
    assert unchanged is not None and unchanged.members == ["ann", "bob"]

    moved = await store.change_members(group.id, MemberChange(owner="bob"))
    assert moved.owner == "bob"
    left = await store.change_members(group.id, MemberChange(remove=("ann",)))
    assert left.members == ["bob"] and left.owner == "bob"
    with pytest.raises(MemberError) as last:
        await store.change_members(group.id, MemberChange(remove=("bob",)))
    assert last.value.code is MemberErrorCode.LAST_MEMBER
    twice = await store.change_members(group.id, MemberChange(add=("cat", "cat")))
    assert twice.members == ["bob", "cat"]
    with pytest.raises(NotFound):
        await store.change_members("grp_missing", MemberChange(add=("x",)))


async def test_presence_expires_and_is_per_node(store_factory: StoreFactory) -> None:
    first, second = store_factory(), store_factory()
    await first.mark_online(["ann", "bob"], "node-a", ttl_s=60)
    await second.mark_online(["bob"], "node-b", ttl_s=60)
    # An entry whose time is up no longer counts (a process that died).
    await second.mark_online(["cat"], "node-b", ttl_s=-1)
    assert await second.online(["ann", "bob", "cat", "dan"]) == {"ann", "bob"}
    await first.mark_offline("bob", "node-a")
    assert await first.online(["bob"]) == {"bob"}  # still served by node-b
    await second.mark_offline("bob", "node-b")
    await first.mark_offline("ann", "node-a")
    assert await second.online(["ann", "bob"]) == set()
    assert await first.online([]) == set()


async def test_vps_are_placed_balanced_in_order_and_kept(store_factory: StoreFactory) -> None:
    first, second = store_factory(), store_factory()
    # A two-VP group gets both hosts; a hash of the ids put these two in one.
    assert await first.place_vps(["linus", "steve"], 2) == [0, 1]
    # Known VPs keep their hosts; new ones fill the least loaded host first.
    assert await second.place_vps(["steve", "ada", "grace", "linus", "ken"], 2) == [1, 0, 1, 0, 0]
    assert await first.place_vps(["ken", "ken"], 2) == [0, 0]
    assert await first.place_vps([], 2) == []
    sixteen = [f"vp{i:02d}" for i in range(16)]
    hosts = await second.place_vps(sixteen, 2)
    assert sorted(hosts.count(h) for h in (0, 1)) == [8, 8]
    # A smaller pool at a later start: a VP on a host beyond it is placed again.
    assert await first.place_vps(["steve", "linus"], 1) == [0, 0]
    assert await second.place_vps(["steve"], 2) == [0]


async def test_one_vp_placed_at_once_from_two_stores_gets_one_host(
    store_factory: StoreFactory,
) -> None:
    first, second = store_factory(), store_factory()
    await first.place_vps(["a", "b", "c"], 4)
    rosters = [[f"vp{i}", "shared"] for i in range(12)]
    answers = await asyncio.gather(
        *((first if i % 2 else second).place_vps(r, 4) for i, r in enumerate(rosters))
    )
    assert len({hosts[1] for hosts in answers}) == 1
    everyone = await first.place_vps(["a", "b", "c", "shared", *(r[0] for r in rosters)], 4)
    assert sorted(everyone.count(h) for h in range(4)) == [4, 4, 4, 4]


def test_a_pool_needs_a_host() -> None:
    with pytest.raises(ValueError, match="at least one host"):
        assign({}, ["a"], 0)
