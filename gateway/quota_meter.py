"""The quota meter (``protocol.quotas.QuotaMeter``): computed here, pushed, never polled.

Every limit that applies to a person writing in a group is looked at: their
own quota (``store.quotas``) and the group's budgets (``store.budgets``),
each for today and this month (UTC), in tokens and in US dollars. The one
most used is the meter. What counts is what finished turns spent: a turn
settles its ledgers before its ``result`` is written (``actors.runner``),
so a meter computed once the result is seen is up to date.

:class:`QuotaMeters` sends a connection its meter when it subscribes to a
group, and, after each ``result`` of a turn that used tokens or money in a
group this process tails, sends every subscriber of that group theirs (one
computation per person, however many tabs). Only a meter with a limit goes
out: a person with no limit anywhere never gets the frame, and a client
hides its meter when it subscribes to a group until one comes. A turn that
spends from a person's quota also tells every gateway through the store's
activity log (a ``spent`` event, written as the turn settles), so their
meter moves in whichever group they watch, not only in the one that spent.
Refreshes are coalesced: results arriving while one runs cause one more,
not one each.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Literal

from protocol import dumps
from protocol.quotas import QuotaMeter
from store.base import Group, Store
from store.budgets import day_account
from store.events import StoredEvent
from store.quotas import PersonQuota, month_account

if TYPE_CHECKING:
    from gateway.tail import Hub, Subscription

log = logging.getLogger(__name__)

Scope = Literal["person", "group"]
Period = Literal["day", "month"]
Unit = Literal["tokens", "usd"]

_TEXT = {
    ("person", "day"): "of today's budget",
    ("person", "month"): "of this month's budget",
    ("group", "day"): "of the group's budget for today",
    ("group", "month"): "of the group's budget for this month",
}


def _candidates(
    scope: Scope, limits: tuple[int, float, int, float], spends: list[tuple[int, float]]
) -> list[tuple[float, Scope, Period, Unit, float, float]]:
    """(share used, scope, period, unit, spent, limit) of each limit set (0: none)."""
    tokens_day, usd_day, tokens_month, usd_month = limits
    (day_tokens, day_usd), (month_tokens, month_usd) = spends
    found: list[tuple[float, Scope, Period, Unit, float, float]] = []
    for period, unit, spent, limit in (
        ("day", "tokens", day_tokens, tokens_day),
        ("day", "usd", day_usd, usd_day),
        ("month", "tokens", month_tokens, tokens_month),
        ("month", "usd", month_usd, usd_month),
    ):
        if limit:
            found.append((spent / limit, scope, period, unit, float(spent), float(limit)))  # type: ignore[arg-type]
    return found


async def meter(store: Store, username: str, group: Group, now: float | None = None) -> QuotaMeter:
    """The person's tightest budget in ``group`` now."""
    accounts = [day_account(now), month_account(now)]
    quota, mine, ours = await asyncio.gather(
        store.get_person_quota(username),
        store.person_spend(username, accounts),
        store.budget_spend(group.id, accounts),
    )
    q = quota or PersonQuota()
    s = group.settings
    found = _candidates(
        "person",
        (q.tokens_per_day, q.usd_per_day, q.tokens_per_month, q.usd_per_month),
        [(x.spent_tokens, x.spent_usd) for x in mine],
    ) + _candidates(
        "group",
        (
            s.budget_tokens_per_day,
            s.budget_usd_per_day,
            s.budget_tokens_per_month,
            s.budget_usd_per_month,
        ),
        [(x.spent_tokens, x.spent_usd) for x in ours],
    )
    if not found:
        return QuotaMeter(group_id=group.id)
    share, scope, period, unit, spent, limit = max(found, key=lambda c: c[0])
    percent = round(share * 100, 1)
    return QuotaMeter(
        group_id=group.id,
        percent=percent,
        scope=scope,
        period=period,
        unit=unit,
        spent=round(spent, 6),
        limit=limit,
        text=f"{percent:g}% {_TEXT[(scope, period)]}",
    )


def spent_something(event: StoredEvent) -> bool:
    """Whether a ``result`` envelope reports tokens or cost (read only for results)."""
    try:
        data = json.loads(event.text).get("data") or {}
    except ValueError:
        return False
    usage = data.get("usage") or {}
    return bool(
        usage.get("input_tokens") or usage.get("output_tokens") or data.get("total_cost_usd")
    )


class QuotaMeters:
    """Pushes meters to this process's subscribers (on subscribe, after spending turns)."""

    def __init__(self, store: Callable[[], Awaitable[Store]], hub: Hub) -> None:
        self._store = store
        self._hub = hub
        self._dirty: set[str] = set()  # groups whose subscribers' meters are stale
        self._dirty_people: set[str] = set()  # people whose meters are stale everywhere
        self._task: asyncio.Task[None] | None = None
        hub.on_result = self.turn_ended

    async def subscribed(
        self, send: Callable[[QuotaMeter], object], username: str, group: Group
    ) -> None:
        """Send a new subscriber its meter; a failing store costs the meter, not the subscribe."""
        try:
            found = await meter(await self._store(), username, group)
        except Exception:
            log.warning("quota meter of %s in %s not sent", username, group.id, exc_info=True)
            return
        if found.percent is not None:
            send(found)

    def turn_ended(self, group_id: str, event: StoredEvent) -> None:
        """A ``result`` went to the group's subscribers; refresh their meters if it spent."""
        if not spent_something(event):
            return
        self._dirty.add(group_id)
        self._start()

    def person_spent(self, username: str) -> None:
        """A turn spent from the person's quota, in any group, on any gateway.

        Told by the activity log (``gateway.inbox_push``): their meter moves
        in whatever group they watch here, not only in the one that spent.
        """
        self._dirty_people.add(username)
        self._start()

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain(), name="quota-meters")

    async def _drain(self) -> None:
        while self._dirty or self._dirty_people:
            # A group's subscribers after its turn; or one person's, in every group.
            if self._dirty:
                key = self._dirty.pop()
                subs = functools.partial(self._hub.group_subscriptions, key)
            else:
                key = self._dirty_people.pop()
                subs = functools.partial(self._hub.user_subscriptions, key)
            try:
                await self._send(subs)
            except Exception:
                log.warning("quota meters of %s not refreshed", key, exc_info=True)

    async def _send(self, subscriptions: Callable[[], list[Subscription]]) -> None:
        """Each (person, group) of these subscriptions gets its meter, computed once."""
        subs = subscriptions()
        if not subs:
            return
        store = await self._store()
        groups = {
            gid: group
            for gid in {sub.group_id for sub in subs}
            if (group := await store.get_group(gid)) is not None
        }
        pairs = sorted({(s.sink.username, s.group_id) for s in subs if s.group_id in groups})
        frames = await asyncio.gather(*(meter(store, user, groups[gid]) for user, gid in pairs))
        texts = {p: dumps(f) for p, f in zip(pairs, frames, strict=True) if f.percent is not None}
        # Read again: who subscribed while the meters were computed gets theirs too.
        for sub in subscriptions():
            text = texts.get((sub.sink.username, sub.group_id))
            if text is not None and not sub.ended:
                sub.sink.offer(text, envelope=False)

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
