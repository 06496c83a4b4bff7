"""Disabled accounts in the store (``store.disabled``) on both backends."""

from __future__ import annotations

from store import Store
from store.disabled import DisabledMark


async def test_a_mark_is_made_once_read_listed_and_removed(store: Store) -> None:
    assert await store.disabled_mark("ann") is None
    assert await store.disabled_accounts() == []
    assert await store.disable_account(DisabledMark("ann", 100.0, "root")) is True
    # A second disable keeps the first mark.
    assert await store.disable_account(DisabledMark("ann", 200.0, "other")) is False
    assert await store.disabled_mark("ann") == DisabledMark("ann", 100.0, "root")
    assert await store.disable_account(DisabledMark("bob", 150.0)) is True
    assert await store.disabled_accounts() == [
        DisabledMark("ann", 100.0, "root"),
        DisabledMark("bob", 150.0, None),
    ]
    # Names are exact: another case is another account.
    assert await store.disabled_mark("Ann") is None
    assert await store.enable_account("ann") is True
    assert await store.enable_account("ann") is False
    assert await store.disabled_mark("ann") is None
    assert [m.username for m in await store.disabled_accounts()] == ["bob"]


async def test_the_mark_survives_a_rewrite_of_the_user_record(store: Store) -> None:
    await store.put_user({"username": "ann", "displayName": "Ann"})
    await store.disable_account(DisabledMark("ann", 1.0, "root"))
    # Whoever rewrites the record from an older copy does not lift the mark.
    await store.put_user({"username": "ann", "displayName": "Ann B."})
    assert await store.disabled_mark("ann") is not None
