"""Sign-in sessions, kept in the store so every gateway process agrees on which are live.

A session is what one sign-in (a password login, an OpenID sign-in) began,
or an API token its owner made for a program (named by ``label``):
its id is the ``jti`` of the token the sign-in issued, and every renewal of
that token keeps it. The rules both backends keep:

- ``record_session`` stores a new session; a session id is never reused.
- A session is **live** until it expires or is ended. ``end_sessions``
  marks sessions of one user ended (a tombstone): the gateway refuses every
  token that names an ended session, on every process, so the record stays
  until the session would have expired, and is then dropped like any other.
- ``touch_session`` moves ``last_seen`` (and, for a renewed token, the
  expiry) of a session that is not ended; it never brings one back.
- Expired sessions are dropped by ``prune_sessions``, which every
  ``record_session`` runs too.

Times are the caller's clock (epoch seconds), so tests can move it.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


class SignIn(StrEnum):
    """How a session began."""

    PASSWORD = "password"
    OIDC = "oidc"
    API_TOKEN = "api_token"  # a named, long-lived token a person made for a program


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """One sign-in's session, as the store keeps it."""

    id: str
    username: str
    created: float
    expires: float
    last_seen: float
    how: SignIn = SignIn.PASSWORD
    user_agent: str = ""
    address: str = ""
    ended: float | None = None
    # The name its owner gave an API token ('' for a sign-in).
    label: str = ""

    def live(self, now: float) -> bool:
        return self.ended is None and self.expires > now


class SessionLog(Protocol):
    """Sign-in sessions (rules in the module docstring)."""

    @abstractmethod
    async def record_session(self, session: SessionRecord) -> None:
        """Store a new session (and drop the expired ones)."""

    @abstractmethod
    async def get_session(self, session_id: str) -> SessionRecord | None:
        """The session, ended or not, while its record is kept; None when unknown."""

    @abstractmethod
    async def user_sessions(self, username: str, now: float) -> list[SessionRecord]:
        """The user's live sessions at ``now``, newest first."""

    @abstractmethod
    async def touch_session(
        self, session_id: str, last_seen: float, expires: float | None = None
    ) -> None:
        """Move a session's ``last_seen`` (and ``expires`` when given); nothing if ended or gone."""

    @abstractmethod
    async def end_sessions(
        self, username: str, session_ids: Sequence[str] | None, now: float, keep: str = ""
    ) -> list[str]:
        """End live sessions of ``username``: those of ``session_ids``, or all (None) but ``keep``.

        Returns the ids this call ended; ids of other users' sessions are
        never touched.
        """

    @abstractmethod
    async def prune_sessions(self, now: float) -> int:
        """Drop every session expired at ``now``; how many were dropped."""
