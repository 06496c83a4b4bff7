"""Several credentials per provider, rotated with per-credential cooldowns.

A provider may have a list of credentials (``OPENAI_API_KEYS``, a profiles
file), each with a label. A call uses the first credential that is not
cooling down; a rate limit, an auth failure or a billing failure puts the
credential it used into a cooldown and the call moves to the next one.

A rate limit is the provider asking for a pause, not a broken key: its
cooldown is as long as the provider says (``Retry-After``, or the reset
time of the limit that ran out), and when the reply does not say, it backs
off from 1 s, doubling at each consecutive rate limit, to at most 60 s.
The escalating ladder is for keys that are broken: by the credential's
consecutive failures 1 min, 5 min, 25 min, then 1 h for auth failures;
billing failures start at 5 h and double up to 24 h. That failure count
starts again once a cooldown has run out with no failure for a day (for
rate limits, after 10 minutes without one).

Cooldowns live in a :class:`CooldownBook` (:mod:`store.provider_state`
keeps them in the store, so every VP actor on every node sees the same
ones). Only labels are ever stored, logged or shown; a key leaves its
:class:`~pydantic.SecretStr` only where an SDK client is made.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol

from pydantic import BaseModel, ConfigDict, SecretStr

from engine.errors import ErrorKind
from store.provider_state import Cooldown

Clock = Callable[[], float]

ROTATE_ON = frozenset({ErrorKind.RATE_LIMIT, ErrorKind.AUTH, ErrorKind.BILLING})
LADDER_S = (60.0, 300.0, 1500.0, 3600.0)
BILLING_FIRST_S = 5 * 3600.0
BILLING_MAX_S = 24 * 3600.0
RESET_AFTER_S = 24 * 3600.0
RATE_FIRST_S = 1.0
RATE_MAX_S = 60.0
RATE_RESET_AFTER_S = 600.0


class Credential(BaseModel):
    """One API key of a provider, known everywhere but here by its label."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    label: str
    key: SecretStr


def parse_keys(text: str, provider: str) -> tuple[Credential, ...]:
    """``"a=sk-1,b=sk-2"`` or ``"sk-1,sk-2"`` (labelled ``provider#1``...) as credentials."""
    out: list[Credential] = []
    for n, part in enumerate((p.strip() for p in text.split(",")), start=1):
        if not part:
            continue
        label, sep, key = part.partition("=")
        if not sep or not label or label.startswith("sk-"):
            label, key = f"{provider}#{n}", part
        out.append(Credential(label=label.strip(), key=SecretStr(key.strip())))
    return tuple(out)


def cooldown_seconds(kind: ErrorKind, errors: int) -> float:
    """How long the ``errors``-th consecutive failure of this kind cools a credential.

    For a rate limit this is only the back-off used when the provider did
    not say how long to wait.
    """
    if kind is ErrorKind.RATE_LIMIT:
        return min(RATE_MAX_S, RATE_FIRST_S * 2 ** (errors - 1))
    if kind is ErrorKind.BILLING:
        return min(BILLING_MAX_S, BILLING_FIRST_S * 2 ** (errors - 1))
    return LADDER_S[min(errors, len(LADDER_S)) - 1]


def _is_rate(cooldown: Cooldown) -> bool:
    return cooldown.reason == ErrorKind.RATE_LIMIT.value


def next_cooldown(
    previous: Cooldown | None, kind: ErrorKind, now: float, retry_after: float | None = None
) -> Cooldown:
    """The cooldown after one more failure of ``kind`` at ``now``.

    Rate limits and broken keys count their failures apart: a burst of rate
    limits never climbs the ladder meant for a bad key. A rate limit's window
    is the provider's latest word (``retry_after``) and replaces an earlier
    rate-limit window; a window for a broken key is never shortened by a
    later failure, only replaced by a longer one.
    """
    rate = kind is ErrorKind.RATE_LIMIT
    errors = 1
    if previous is not None and _is_rate(previous) == rate:
        quiet = RATE_RESET_AFTER_S if rate else RESET_AFTER_S
        if now < previous.until + quiet:
            errors = previous.errors + 1
    span = cooldown_seconds(kind, errors)
    if rate and retry_after is not None:
        span = max(retry_after, 0.0)
    until = now + span
    if previous is not None and previous.active(now) and not _is_rate(previous):
        until = max(until, previous.until)
    return Cooldown(until, errors, kind.value)


class CooldownBook(Protocol):
    """Where the cooldowns of every credential are kept (shared by a deployment)."""

    async def cooldowns(self, provider: str) -> dict[str, Cooldown]: ...

    async def put_cooldown(self, provider: str, label: str, cooldown: Cooldown) -> None: ...


class LocalCooldowns:
    """A book in this process only (an engine made without a store)."""

    def __init__(self) -> None:
        self._book: dict[tuple[str, str], Cooldown] = {}

    async def cooldowns(self, provider: str) -> dict[str, Cooldown]:
        return {label: c for (p, label), c in self._book.items() if p == provider}

    async def put_cooldown(self, provider: str, label: str, cooldown: Cooldown) -> None:
        self._book[(provider, label)] = cooldown


class CredentialPool:
    """The credentials of one provider, in order, with their shared cooldowns."""

    def __init__(
        self,
        provider: str,
        credentials: Sequence[Credential],
        book: CooldownBook,
        clock: Clock = time.time,
    ) -> None:
        self.provider = provider
        self.credentials = tuple(credentials)
        self.book = book
        self.clock = clock

    def __repr__(self) -> str:
        labels = ", ".join(c.label for c in self.credentials)
        return f"CredentialPool({self.provider!r}, [{labels}])"

    async def pick(self, skip: frozenset[str] = frozenset()) -> Credential | Cooldown | None:
        """The first usable credential not in ``skip``.

        When every credential is cooling down: the cooldown that ends first
        (so the caller knows how long to wait and why); None when the only
        usable ones are in ``skip``.
        """
        book = await self.book.cooldowns(self.provider)
        now = self.clock()
        soonest: Cooldown | None = None
        usable = False
        for cred in self.credentials:
            cooling = book.get(cred.label)
            if cooling is None or not cooling.active(now):
                if cred.label not in skip:
                    return cred
                usable = True
                continue
            if soonest is None or cooling.until < soonest.until:
                soonest = cooling
        return None if usable else soonest

    async def failed(
        self, label: str, kind: ErrorKind, retry_after: float | None = None
    ) -> Cooldown:
        """Record a failure of ``label``; returns its new cooldown."""
        book = await self.book.cooldowns(self.provider)
        cooldown = next_cooldown(book.get(label), kind, self.clock(), retry_after)
        await self.book.put_cooldown(self.provider, label, cooldown)
        return cooldown
