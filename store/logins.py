"""Failed logins, counted in the store so every gateway process sees the same counts.

The rules (``LoginRules``, from the gateway's settings), applied in one
atomic step per failure by both backends:

- Failures are counted per account, whatever address they come from. When
  an account has had ``max_failures`` within ``window`` seconds it is locked
  for ``lockout`` seconds, **for the addresses that failed**: each address
  that contributed a failure is locked out of that account, and so is any
  address that fails for it while the lock lasts. An address that has not
  failed for the account is never refused: the owner, at her own machine,
  logs in while someone else is guessing her password.
- Failures are also counted per address, across accounts: an address with
  ``address_max_failures`` within the window is locked out of every account
  for ``lockout`` seconds, so one address cannot spray guesses over many
  accounts one at a time.
- A successful login forgets that address's failures for that account; an
  unlock (an admin, ``yeaft user unlock``, a new password) forgets all of
  the account's failures and locks, on every gateway at once.

Counts are kept for names that do not exist too (a lockout that only
existing names get would tell which names exist); they expire with the
window, and locks with the lockout, so made-up names leave nothing behind
for long. Account names are keys as given (the gateway lowercases them).
Times are the caller's clock (epoch seconds), so tests can move it.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class LoginRules:
    """How many failures lock what, and for how long (seconds)."""

    max_failures: int
    address_max_failures: int
    window: float
    lockout: float


@dataclass(frozen=True, slots=True)
class AddressLock:
    """An address locked out (of one account, or of all) until ``until``."""

    address: str
    until: float


@dataclass(frozen=True, slots=True)
class AccountLock:
    """A locked account: until when, and the addresses refused for it."""

    username: str
    until: float
    addresses: tuple[AddressLock, ...] = ()


@dataclass(frozen=True, slots=True)
class Lockouts:
    """Every lock in force: accounts (with their addresses) and addresses locked for all."""

    accounts: list[AccountLock] = field(default_factory=list)
    addresses: list[AddressLock] = field(default_factory=list)


class LoginLog(Protocol):
    """Failed-login counts and the lockouts they cause (rules in the module docstring)."""

    @abstractmethod
    async def login_locked_until(self, username: str, address: str, now: float) -> float | None:
        """Until when ``address`` may not log in as ``username``; None when it may now."""

    @abstractmethod
    async def record_login_failure(
        self, username: str, address: str, now: float, rules: LoginRules
    ) -> float | None:
        """Count a failed login, atomically; until when ``address`` is now locked out, or None."""

    @abstractmethod
    async def forget_login_failures(self, username: str, address: str) -> None:
        """Forget ``address``'s failures for ``username`` (its owner just got in)."""

    @abstractmethod
    async def lift_lockout(self, username: str) -> bool:
        """Forget every failure and lock of ``username``; True when there was a lock."""

    @abstractmethod
    async def lockouts(self, now: float) -> Lockouts:
        """The locks in force at ``now``, accounts sorted by name."""


def lock_member(username: str, address: str) -> str:
    """One lock's name in a flat set: the account's UTF-8 length, ``:``, then both.

    ``username`` empty: ``address`` is locked for every account; ``address``
    empty: the account itself. The length prefix keeps any two pairs apart
    whatever characters a made-up name holds.
    """
    return f"{len(username.encode())}:{username}{address}"


def parse_lock_member(member: str) -> tuple[str, str]:
    """The (username, address) of a :func:`lock_member` name."""
    length, _, rest = member.partition(":")
    raw = rest.encode()
    n = int(length)
    return raw[:n].decode(), raw[n:].decode()


def collect(rows: list[tuple[str, str, float]]) -> Lockouts:
    """:class:`Lockouts` from (username, address, until) rows of locks in force."""
    accounts: dict[str, float] = {}
    addresses: dict[str, list[AddressLock]] = {}
    everywhere: list[AddressLock] = []
    for username, address, until in rows:
        if not username:
            everywhere.append(AddressLock(address, until))
        elif not address:
            accounts[username] = max(accounts.get(username, 0.0), until)
        else:
            addresses.setdefault(username, []).append(AddressLock(address, until))
            accounts.setdefault(username, until)
    return Lockouts(
        accounts=[
            AccountLock(name, accounts[name], tuple(sorted(addresses.get(name, []), key=_addr)))
            for name in sorted(accounts)
        ],
        addresses=sorted(everywhere, key=_addr),
    )


def _addr(lock: AddressLock) -> str:
    return lock.address
