"""Disabling a person, and letting them back in: what an administrator and ``yeaft user`` do.

Disabling ``ann`` (:func:`disable`), in this order:

1. the mark is stored (``store.disabled``): from then on every gateway
   process refuses her password and OpenID logins and every request and
   WebSocket handshake her tokens make (``gateway.accounts.session_user``
   reads the mark each time);
2. all her sessions are ended, so letting her back in later does not bring
   old tokens back to life (tokens without a session, made by ``yeaft user
   token``, die with the mark alone and live again without it);
3. an ``account_disabled`` event goes into the store's directory log, which
   every gateway process tails (``gateway.people``): each closes her open
   WebSockets (4401) as soon as it reads it, typically within milliseconds.

A disable that is repeated redoes steps 2 and 3, so one that failed half
way is finished by trying again. Enabling only removes the mark: she signs
in afresh. Both are recorded in the audit log (``gateway.audit``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from gateway import sessions
from gateway.audit import record
from gateway.users import UserError
from protocol.members import DirectoryEvent
from store.audit import AuditAction, AuditLog
from store.base import EventLog, UserStore
from store.disabled import DisabledAccounts, DisabledMark
from store.members import DIRECTORY_LOG
from store.sessions import SessionLog


class DisablingStore(UserStore, DisabledAccounts, SessionLog, EventLog, AuditLog, Protocol):
    """What disabling touches: accounts, marks, sessions, the directory and audit logs."""


@dataclass(frozen=True, slots=True)
class Disabled:
    """What a disable did: whether the mark is new, and how many sessions ended."""

    changed: bool
    ended_sessions: int


async def _require_user(store: UserStore, username: str) -> None:
    if await store.get_user(username) is None:
        raise UserError(f"no user {username!r}")


async def disable(
    store: DisablingStore, username: str, by: str | None, *, cli: bool = False
) -> Disabled:
    """Disable ``username`` (by administrator ``by``; None and ``cli``: the command line)."""
    await _require_user(store, username)
    changed = await store.disable_account(DisabledMark(username, time.time(), by))
    ended = await sessions.end(store, username, None)
    await store.append_event(
        DIRECTORY_LOG, DirectoryEvent(action="account_disabled", user=username)
    )
    detail = {"endedSessions": len(ended), "changed": changed}
    await record(
        store, AuditAction.ACCOUNT_DISABLED, actor=by, target=username, detail=detail, cli=cli
    )
    return Disabled(changed, len(ended))


async def enable(
    store: DisablingStore, username: str, by: str | None, *, cli: bool = False
) -> bool:
    """Let ``username`` sign in again; False when the account was not disabled."""
    await _require_user(store, username)
    changed = await store.enable_account(username)
    detail = {"changed": changed}
    await record(
        store, AuditAction.ACCOUNT_ENABLED, actor=by, target=username, detail=detail, cli=cli
    )
    return changed
