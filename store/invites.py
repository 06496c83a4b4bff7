"""Invite links: who may make an account (and join a group) by following one.

An invite is made by an administrator (or a group's owner, when allowed)
with an expiry and a number of uses, optionally for one group. The link
carries a random secret; the store keeps only ``secret_hash`` (the gateway
hashes and compares, ``gateway.invites``), so a copy of the store cannot
be turned into working links. The rules both backends keep:

- ``create_invite`` stores a new invite; an id is never reused.
- ``redeem_invite`` counts one use in a single atomic step, and only while
  the invite is not revoked, not expired at ``now`` and has uses left: of
  two redemptions of its last use at once, exactly one succeeds, on any
  number of gateway processes.
- ``release_invite`` gives back a use a redemption counted when what it was
  for could not be done (the name wanted was taken in the meantime).
- ``revoke_invite`` marks an invite revoked (the first time counts); it is
  kept, like used-up and expired ones, so administrators see what was
  made and what became of it.

Times are the caller's clock (epoch seconds), so tests can move it.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Protocol


class InviteState(StrEnum):
    """What an invite is at a moment; only ``valid`` ones can be redeemed."""

    VALID = "valid"
    # No invite has the id (only a redemption says this; a record never is).
    UNKNOWN = "unknown"
    REVOKED = "revoked"
    EXPIRED = "expired"
    USED_UP = "used_up"


@dataclass(frozen=True, slots=True)
class InviteRecord:
    """One invite as the store keeps it (never its secret)."""

    id: str
    secret_hash: str
    created_by: str
    created_at: float
    expires_at: float
    max_uses: int
    uses: int = 0
    # The group the invite joins; None: an account only.
    group_id: str | None = None
    revoked_at: float | None = None

    def state(self, now: float) -> InviteState:
        """Revoked first, then expired, then used up: the first that applies."""
        if self.revoked_at is not None:
            return InviteState.REVOKED
        if self.expires_at <= now:
            return InviteState.EXPIRED
        if self.uses >= self.max_uses:
            return InviteState.USED_UP
        return InviteState.VALID

    def counted(self, uses: int) -> InviteRecord:
        return replace(self, uses=uses)


@dataclass(frozen=True, slots=True)
class Redemption:
    """What ``redeem_invite`` did: ``state`` ``valid`` when it counted a use.

    ``invite`` is the record after the step (None, and ``state``
    ``unknown``, for an id no invite has).
    """

    state: InviteState
    invite: InviteRecord | None

    @property
    def redeemed(self) -> bool:
        return self.invite is not None and self.state is InviteState.VALID


class InviteLog(Protocol):
    """Invite links (rules in the module docstring)."""

    @abstractmethod
    async def create_invite(self, invite: InviteRecord) -> None:
        """Store a new invite; StoreError when its id exists."""

    @abstractmethod
    async def get_invite(self, invite_id: str) -> InviteRecord | None:
        """The invite, whatever its state; None when unknown."""

    @abstractmethod
    async def list_invites(self, group_id: str | None = None) -> list[InviteRecord]:
        """Every invite (or every one for ``group_id``), newest first."""

    @abstractmethod
    async def redeem_invite(self, invite_id: str, now: float) -> Redemption:
        """Count one use if the invite is valid at ``now``; atomic."""

    @abstractmethod
    async def release_invite(self, invite_id: str) -> None:
        """Give back one counted use (never below none)."""

    @abstractmethod
    async def revoke_invite(self, invite_id: str, now: float) -> InviteRecord | None:
        """Revoke the invite (kept revoked at its first revocation); None when unknown."""
