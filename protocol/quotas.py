"""The quota meter: how much of their tightest budget a person has used.

``quota_meter`` is sent to one connection (it is the person's own, not the
group's, so it never goes through the group's event log): when the client
subscribes to a group, and after each turn of that group that spent
something. Of every limit that applies to the person writing in that group
(their own quota and the group's budgets, each daily and monthly, in tokens
and in US dollars) it reports the one most used: ``percent`` of ``limit``
is ``spent`` (``unit`` ``tokens`` or ``usd``), for ``period`` ``day`` or
``month`` (UTC), of ``scope`` ``person`` or ``group``. ``text`` says it in
a few words ("62% of today's budget"). With no limit at all nothing is
sent (``percent`` null is kept for a client to hide its meter).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from protocol.common import ServerModel


class QuotaMeter(ServerModel):
    """The person's tightest budget in a group, as a share used (null: no limit applies)."""

    type: Literal["quota_meter"] = "quota_meter"
    group_id: str
    percent: float | None = Field(
        default=None, ge=0, description="Share of the limit spent (may pass 100); null: none."
    )
    scope: Literal["person", "group"] | None = Field(
        default=None, description="The person's own quota, or the group's budget."
    )
    period: Literal["day", "month"] | None = Field(default=None, description="UTC day or month.")
    unit: Literal["tokens", "usd"] | None = Field(default=None, description="What is counted.")
    spent: float = Field(default=0.0, description="Spent by finished turns, in ``unit``.")
    limit: float = Field(default=0.0, description="The limit, in ``unit``.")
    text: str = Field(default="", description="In a few words: 62% of today's budget.")
