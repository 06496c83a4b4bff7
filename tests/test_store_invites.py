"""Invite links in the store (``store.invites``), on both backends, with a moved clock.

Two store instances on one store stand for two gateway processes: a use one
counts, the other sees; two redemptions of a last use at once, from both,
count it once.
"""

from __future__ import annotations

import asyncio

import pytest

from store.base import StoreError
from store.invites import InviteRecord, InviteState
from tests.fixtures.stores import StoreFactory

NOW = 1_000_000.0


def invite(
    iid: str, *, uses: int = 1, ttl: float = 3600, group: str | None = None, at: float = NOW
) -> InviteRecord:
    return InviteRecord(
        id=iid,
        secret_hash="ab" * 32,
        created_by="root",
        created_at=at,
        expires_at=at + ttl,
        max_uses=uses,
        group_id=group,
    )


async def test_invites_are_made_listed_and_never_made_twice(store_factory: StoreFactory) -> None:
    one, two = store_factory(), store_factory()
    await one.create_invite(invite("inv_a", group="grp_1"))
    await one.create_invite(invite("inv_b", uses=3, at=NOW + 5))
    assert await two.get_invite("inv_a") == invite("inv_a", group="grp_1")
    assert await two.get_invite("inv_nope") is None
    assert [i.id for i in await two.list_invites()] == ["inv_b", "inv_a"]  # newest first
    assert [i.id for i in await two.list_invites("grp_1")] == ["inv_a"]
    with pytest.raises(StoreError):
        await two.create_invite(invite("inv_a", uses=9))
    again = await one.get_invite("inv_a")
    assert again is not None and again.max_uses == 1


async def test_a_redemption_counts_each_use_until_none_is_left(
    store_factory: StoreFactory,
) -> None:
    one, two = store_factory(), store_factory()
    await one.create_invite(invite("inv_a", uses=2))
    first = await one.redeem_invite("inv_a", NOW + 1)
    assert first.redeemed and first.invite is not None and first.invite.uses == 1
    second = await two.redeem_invite("inv_a", NOW + 2)
    assert second.redeemed and second.invite is not None and second.invite.uses == 2
    third = await one.redeem_invite("inv_a", NOW + 3)
    assert not third.redeemed and third.state is InviteState.USED_UP
    assert third.invite is not None and third.invite.uses == 2
    # A use given back (the account could not be made) can be taken again, once.
    await two.release_invite("inv_a")
    assert (await one.redeem_invite("inv_a", NOW + 4)).redeemed
    assert (await one.redeem_invite("inv_a", NOW + 5)).state is InviteState.USED_UP
    unknown = await one.redeem_invite("inv_nope", NOW)
    assert unknown.state is InviteState.UNKNOWN and unknown.invite is None
    # Never below none.
    await one.create_invite(invite("inv_b"))
    await one.release_invite("inv_b")
    got = await one.get_invite("inv_b")
    assert got is not None and got.uses == 0


async def test_two_redemptions_of_the_last_use_at_once_count_it_once(
    store_factory: StoreFactory,
) -> None:
    stores = [store_factory() for _ in range(4)]
    await stores[0].create_invite(invite("inv_race", uses=3))
    # Twelve redemptions at once, from four "processes", for three uses.
    tries = [s.redeem_invite("inv_race", NOW + 1) for s in stores for _ in range(3)]
    results = await asyncio.gather(*tries)
    assert sum(r.redeemed for r in results) == 3
    assert {r.state for r in results if not r.redeemed} == {InviteState.USED_UP}
    assert sorted(r.invite.uses for r in results if r.redeemed and r.invite) == [1, 2, 3]
    got = await stores[1].get_invite("inv_race")
    assert got is not None and got.uses == 3


async def test_an_invite_expires_by_the_callers_clock(store_factory: StoreFactory) -> None:
    store = store_factory()
    await store.create_invite(invite("inv_a", uses=5, ttl=60))
    assert (await store.redeem_invite("inv_a", NOW + 59.5)).redeemed
    late = await store.redeem_invite("inv_a", NOW + 60)
    assert late.state is InviteState.EXPIRED and late.invite is not None
    assert late.invite.uses == 1  # an expired invite counts nothing
    assert late.invite.state(NOW + 30) is InviteState.VALID
    assert late.invite.state(NOW + 61) is InviteState.EXPIRED


async def test_a_revoked_invite_is_refused_and_kept(store_factory: StoreFactory) -> None:
    one, two = store_factory(), store_factory()
    await one.create_invite(invite("inv_a", uses=5))
    revoked = await two.revoke_invite("inv_a", NOW + 10)
    assert revoked is not None and revoked.revoked_at == NOW + 10
    # Revoking again keeps the first time.
    again = await one.revoke_invite("inv_a", NOW + 20)
    assert again is not None and again.revoked_at == NOW + 10
    refused = await one.redeem_invite("inv_a", NOW + 30)
    assert refused.state is InviteState.REVOKED and not refused.redeemed
    assert [i.id for i in await two.list_invites()] == ["inv_a"]
    assert await one.revoke_invite("inv_nope", NOW) is None
    # Revoked wins over expired and used up.
    assert refused.invite is not None and refused.invite.state(NOW + 9999) is InviteState.REVOKED
