"""Failed logins counted in the store (``store.logins``), on both backends, with a moved clock.

Two store instances on one store stand for two gateway processes: what one
counts, the other sees. The clock is the test's, so windows and lockouts
pass without waiting.
"""

from __future__ import annotations

import pytest

from gateway.lockout import LoginLockout, lift_lockout, wait_words
from store.logins import AccountLock, AddressLock, lock_member, parse_lock_member
from tests.fixtures.stores import StoreFactory

A, B, OWNER = "10.0.0.1", "10.0.0.2", "10.0.0.9"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def guard(clock: Clock, *, max_failures: int = 3, address_max: int = 100) -> LoginLockout:
    return LoginLockout(max_failures, 60, 120, address_max, clock=clock)


async def test_an_account_locks_for_the_addresses_that_failed_on_any_process(
    store_factory: StoreFactory,
) -> None:
    clock = Clock()
    one, two = store_factory(), store_factory()
    lock = guard(clock)
    assert await lock.failed(one, "Ann", A) is None
    assert await lock.failed(two, "ann", B) is None  # another process, another address
    assert await lock.failed(one, "ANN", A) == 120  # the third, wherever, locks the account
    # Both addresses that failed are refused, seen from either process.
    for store in (one, two):
        assert await lock.retry_after(store, "ann", A) == 120
        assert await lock.retry_after(store, "ann", B) == 120
        # An address that has not failed for ann is not: the owner gets in.
        assert await lock.retry_after(store, "ann", OWNER) is None
        assert await lock.retry_after(store, "bob", A) is None  # nor another account
    # While the account is locked, a new address that fails is refused at once.
    clock.now += 100
    assert await lock.failed(two, "ann", "10.0.0.3") == pytest.approx(20)
    assert await lock.retry_after(one, "ann", "10.0.0.3") == pytest.approx(20)
    listed = await lock.lockouts(two)
    assert listed.accounts == [
        AccountLock(
            "ann",
            1_000_120.0,
            (
                AddressLock(A, 1_000_120.0),
                AddressLock(B, 1_000_120.0),
                AddressLock("10.0.0.3", 1_000_120.0),
            ),
        )
    ]
    assert listed.addresses == []
    # The lockout ends by itself.
    clock.now += 21
    assert await lock.retry_after(one, "ann", A) is None
    assert (await lock.lockouts(one)).accounts == []


async def test_failures_older_than_the_window_and_forgotten_ones_do_not_add_up(
    store_factory: StoreFactory,
) -> None:
    clock = Clock()
    store = store_factory()
    lock = guard(clock)
    await lock.failed(store, "ann", A)
    await lock.failed(store, "ann", A)
    clock.now += 61  # past the window
    assert await lock.failed(store, "ann", A) is None
    await lock.failed(store, "ann", B)
    # ann gets in from B: B's failure is forgotten, A's two still count.
    await lock.succeeded(store, "ann", B)
    assert await lock.failed(store, "ann", B) is None
    assert await lock.failed(store, "ann", A) == 120


async def test_one_address_spraying_many_accounts_is_locked_out_of_all(
    store_factory: StoreFactory,
) -> None:
    clock = Clock()
    store = store_factory()
    lock = guard(clock, max_failures=5, address_max=4)
    for name in ("ann", "bob", "cat"):
        assert await lock.failed(store, name, A) is None
    assert await lock.failed(store, "dan", A) == 120  # the fourth name from one address
    for name in ("ann", "eve", "zed"):
        assert await lock.retry_after(store, name, A) == 120
    assert await lock.retry_after(store, "ann", B) is None
    listed = await lock.lockouts(store)
    assert listed.addresses == [AddressLock(A, 1_000_120.0)]
    assert listed.accounts == []  # no account had enough failures for its own lock


async def test_lifting_a_lockout_reaches_every_process(store_factory: StoreFactory) -> None:
    clock = Clock()
    one, two = store_factory(), store_factory()
    lock = guard(clock)
    for _ in range(3):
        await lock.failed(one, "ann", A)
    await lock.failed(one, "bob", A)
    assert await lock.retry_after(two, "ann", A) is not None
    assert await lift_lockout(two, "Ann") is True
    assert await lock.retry_after(one, "ann", A) is None
    assert (await lock.lockouts(one)).accounts == []
    # The failures before the lift no longer count either; bob's are his own.
    assert await lock.failed(one, "ann", A) is None
    assert await lift_lockout(one, "ann") is False


def test_lock_names_keep_any_two_pairs_apart() -> None:
    pairs = [("ann", "1.2.3.4"), ("ann1", ".2.3.4"), ("", "ann"), ("ann", ""), ("é:|\n", "::1")]
    members = [lock_member(*pair) for pair in pairs]
    assert len(set(members)) == len(pairs)
    assert [parse_lock_member(m) for m in members] == pairs


def test_wait_words() -> None:
    assert [wait_words(s) for s in (0.2, 45, 60, 299.5)] == ["1 s", "45 s", "1 min", "5 min"]
    assert wait_words(130) == "2 min 10 s"
