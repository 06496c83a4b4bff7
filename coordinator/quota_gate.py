"""Budgets and quotas checked once per fan-out, before any turn is dispatched.

Each VP turn reserves its budgets before its model call (``actors.budget``),
so a spent quota would otherwise refuse every VP of a fan-out, each with its
own error. The coordinator reserves for the turns it is about to dispatch
instead, in order, with the same reservations (one per turn id, on the
person's ledger and the group's): the turns that fit are dispatched, and
their own reserve later finds the reservation held; the first that does not
fit stops the fan-out, and the group gets one notice naming whose budget,
which period and its limit, and what to do (:func:`quota_notice`).

With no limit on the person's quota nor on the group's budgets nothing is
written here: the gate costs one read of the person's quota per fan-out.
"""

from __future__ import annotations

from collections.abc import Sequence

from actors.budget import QuotaRefusal, TurnBudget, budget_limits
from actors.group_events import GroupEvents
from actors.turns import TurnRequest
from store.base import Group, Store

QUOTA_RULE = "quota"
"""The ``rule`` of a refused fan-out's notice."""


async def gate(
    store: Store, group: Group, reqs: Sequence[TurnRequest]
) -> tuple[list[TurnRequest], QuotaRefusal | None]:
    """The turns the budgets have room for, each reserved, and the refusal that stopped them."""
    if not reqs:
        return [], None
    origin = reqs[0].origin
    quota = await store.get_person_quota(origin.user_id) if origin.user_id else None
    limits = budget_limits(group.settings, origin.chain_id)
    if not (quota and quota.limited) and not any(x.max_tokens or x.max_usd for x in limits):
        return list(reqs), None
    admitted: list[TurnRequest] = []
    for req in reqs:
        budget = TurnBudget(store, group.id, req.turn_id, req.origin.user_id)
        await budget.reserve(group.settings, req.origin.chain_id)
        if budget.refusal is not None:
            return admitted, budget.refusal
        admitted.append(req)
    return admitted, None


async def release(store: Store, group_id: str, reqs: Sequence[TurnRequest]) -> None:
    """Give back the reservations of turns that will not be dispatched after all."""
    for req in reqs:
        await store.settle_budget(group_id, req.turn_id, 0, 0.0)
        if req.origin.user_id:
            await store.settle_person(req.origin.user_id, req.turn_id, 0, 0.0)


async def quota_notice(events: GroupEvents, refusal: QuotaRefusal, chain_id: str) -> None:
    """Tell the group, once, that a spent budget stopped a message's turns."""
    await events.notice(refusal.describe(), chain_id, QUOTA_RULE, **refusal.detail())
