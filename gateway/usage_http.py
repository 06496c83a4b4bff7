"""Usage and quotas over HTTP: who spent what, and a person's quota (administrators only).

- ``GET /api/admin/usage?from=YYYY-MM-DD&to=YYYY-MM-DD``: the usage rows of
  those UTC days, both included (default: the last 30 days, today
  included), one per (day, person, group, VP, model) with input and output
  tokens and US dollars, and their totals. The person is the one whose
  message started the turn's chain; turns no person started (scheduled
  ones) are under ``(system)``. A date that is not one, ``from`` after
  ``to``, or a range longer than 366 days is 422 ``invalid_request`` naming
  the parameter. Rows outlive their group (``groupName`` is then
  ``(deleted)``).
- ``GET /api/admin/users/{username}/quota``: the person's quota (``null``
  when none is set; each limit 0 means none) and what they spent today and
  this month across all groups;
- ``PUT /api/admin/users/{username}/quota {tokensPerDay, usdPerDay,
  tokensPerMonth, usdPerMonth}`` (each optional, 0 or absent: no limit;
  all 0 removes the quota): applies at once to the person's next turns in
  every group, on every gateway; recorded in the audit log
  (``quota_changed``).

An unknown user is 404 ``not_found``; anyone not an administrator 403.
A group's own day and month budgets are group settings
(``PATCH /api/groups/{id}/settings``).
"""

from __future__ import annotations

import time
from datetime import date, timedelta
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from gateway.admin_http import Admin
from gateway.audit import record as record_audit
from gateway.errors import GatewayError, not_found
from gateway.http import Ctx
from protocol import ErrorCode
from store.audit import AuditAction
from store.base import Store
from store.budgets import day_account
from store.quotas import PersonQuota, UsageRow, month_account

router = APIRouter()

DEFAULT_DAYS = 30
MAX_DAYS = 366
DELETED_GROUP = "(deleted)"


class View(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, validate_by_name=True, validate_by_alias=True
    )


class UsageRowView(View):
    day: str
    user: str
    group_id: str
    group_name: str
    vp: str
    model: str
    input_tokens: int
    output_tokens: int
    usd: float


class UsageTotalsView(View):
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0


class UsageReport(View):
    from_: str = Field(alias="from")
    to: str
    rows: list[UsageRowView]
    totals: UsageTotalsView


class QuotaBody(View):
    model_config = ConfigDict(
        alias_generator=to_camel, validate_by_name=True, validate_by_alias=True, extra="forbid"
    )
    tokens_per_day: int = Field(
        default=0, ge=0, le=10_000_000_000, description="Tokens a UTC day, all groups; 0: none."
    )
    usd_per_day: float = Field(
        default=0.0, ge=0, le=1_000_000, description="US dollars a UTC day, all groups; 0: none."
    )
    tokens_per_month: int = Field(
        default=0, ge=0, le=1_000_000_000_000, description="Tokens a UTC month; 0: none."
    )
    usd_per_month: float = Field(
        default=0.0, ge=0, le=100_000_000, description="US dollars a UTC month; 0: none."
    )

    def quota(self) -> PersonQuota:
        return PersonQuota(
            self.tokens_per_day, self.usd_per_day, self.tokens_per_month, self.usd_per_month
        )


class SpendView(View):
    tokens: int
    usd: float


class QuotaView(View):
    username: str
    # None when no quota is set.
    quota: QuotaBody | None
    today: SpendView
    month: SpendView


def _day(value: str | None, name: str, default: date) -> date:
    if value is None or value == "":
        return default
    try:
        if len(value) != 10:
            raise ValueError(value)
        return date.fromisoformat(value)
    except ValueError:
        raise GatewayError(
            ErrorCode.INVALID_FRAME,
            f"{name} must be a date as YYYY-MM-DD, not {value[:40]!r}",
            field=name,
        ) from None


def day_range(first: str | None, last: str | None, now: float | None = None) -> tuple[str, str]:
    """The asked range as ISO days; the last :data:`DEFAULT_DAYS` days by default."""
    today = date.fromisoformat(day_account(now).removeprefix("day:"))
    end = _day(last, "to", today)
    start = _day(first, "from", end - timedelta(days=DEFAULT_DAYS - 1))
    if start > end:
        raise GatewayError(ErrorCode.INVALID_FRAME, "from must not be after to", field="from")
    if (end - start).days + 1 > MAX_DAYS:
        raise GatewayError(
            ErrorCode.INVALID_FRAME,
            f"a range is at most {MAX_DAYS} days",
            field="from",
            detail={"limit": MAX_DAYS},
        )
    return start.isoformat(), end.isoformat()


async def usage_report(store: Store, first: str, last: str, user: str | None = None) -> UsageReport:
    """The usage rows of ``first``..``last`` with group names and totals."""
    rows: list[UsageRow] = await store.usage_rows(first, last, user)
    names = {g.id: g.name for g in await store.list_groups()}
    views = [
        UsageRowView(
            day=r.day,
            user=r.user,
            group_id=r.group_id,
            group_name=names.get(r.group_id, DELETED_GROUP),
            vp=r.vp,
            model=r.model,
            input_tokens=r.input_tokens,
            output_tokens=r.output_tokens,
            usd=round(r.usd, 6),
        )
        for r in rows
    ]
    totals = UsageTotalsView(
        input_tokens=sum(r.input_tokens for r in rows),
        output_tokens=sum(r.output_tokens for r in rows),
        usd=round(sum(r.usd for r in rows), 6),
    )
    return UsageReport.model_validate({"from": first, "to": last, "rows": views, "totals": totals})


@router.get("/api/admin/usage", response_model_by_alias=True)
async def admin_usage(
    user: Admin,
    ctx: Ctx,
    first: Annotated[str | None, Query(alias="from")] = None,
    last: Annotated[str | None, Query(alias="to")] = None,
) -> UsageReport:
    """Tokens and US dollars per day, person, group, VP and model (administrators only)."""
    start, end = day_range(first, last)
    return await usage_report(await ctx.runtime.store(), start, end)


async def _quota_view(store: Store, username: str, quota: PersonQuota | None) -> QuotaView:
    now = time.time()
    today, month = await store.person_spend(username, [day_account(now), month_account(now)])
    body = (
        QuotaBody(
            tokens_per_day=quota.tokens_per_day,
            usd_per_day=quota.usd_per_day,
            tokens_per_month=quota.tokens_per_month,
            usd_per_month=quota.usd_per_month,
        )
        if quota is not None
        else None
    )
    return QuotaView(
        username=username,
        quota=body,
        today=SpendView(tokens=today.spent_tokens, usd=round(today.spent_usd, 6)),
        month=SpendView(tokens=month.spent_tokens, usd=round(month.spent_usd, 6)),
    )


async def _account(store: Store, username: str) -> str:
    record = await store.get_user(username)
    if record is None:
        raise not_found("user")
    return str(record["username"])


@router.get("/api/admin/users/{username}/quota")
async def get_quota(username: str, user: Admin, ctx: Ctx) -> QuotaView:
    """A person's quota and what they spent today and this month (administrators only)."""
    store = await ctx.runtime.store()
    name = await _account(store, username)
    return await _quota_view(store, name, await store.get_person_quota(name))


@router.put("/api/admin/users/{username}/quota")
async def put_quota(username: str, body: QuotaBody, user: Admin, ctx: Ctx) -> QuotaView:
    """Set a person's daily and monthly limits, in every group (administrators only)."""
    store = await ctx.runtime.store()
    name = await _account(store, username)
    quota = body.quota()
    before = await store.get_person_quota(name)
    await store.set_person_quota(name, quota if quota.limited else None)
    detail = {
        "quota": body.model_dump(by_alias=True),
        "previous": QuotaBody.model_validate(before.to_dict()).model_dump(by_alias=True)
        if before is not None
        else None,
    }
    await record_audit(store, AuditAction.QUOTA_CHANGED, actor=user, target=name, detail=detail)
    return await _quota_view(store, name, quota if quota.limited else None)
