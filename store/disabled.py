"""Disabled accounts: who may not sign in any more, since when and by whose hand.

An administrator disables a person (``gateway.admin_people``); the mark is
kept apart from the user record on purpose. A user record is rewritten
whole by whoever changes it (a display name, a password, a rehash at login,
a role), each from the copy it read: a mark inside it could be lost to a
write that began before the mark was made, and a disabled person would be
let back in. Here the mark has its own row (embedded) or hash field (Redis),
written by this module's verbs alone.

The gateway reads the mark at every login, on every request and WebSocket
handshake (``gateway.accounts.session_user``), so a disabled person's
tokens are refused on every gateway process at once.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class DisabledMark:
    """A disabled account: when (epoch seconds) and by whom (None: the command line)."""

    username: str
    at: float
    by: str | None = None


class DisabledAccounts(Protocol):
    """The disabled marks of accounts, by exact username."""

    @abstractmethod
    async def disable_account(self, mark: DisabledMark) -> bool:
        """Mark ``mark.username`` disabled; False when it was already (the first mark stays)."""

    @abstractmethod
    async def enable_account(self, username: str) -> bool:
        """Remove the mark; False when the account was not disabled."""

    @abstractmethod
    async def disabled_mark(self, username: str) -> DisabledMark | None:
        """The account's mark, or None when it may sign in."""

    @abstractmethod
    async def disabled_accounts(self) -> list[DisabledMark]:
        """Every mark, sorted by username."""
