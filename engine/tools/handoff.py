"""Handing work to another agent: the ``Router`` a hosting layer gives its tools.

The engine does not know how agents are hosted (in a group chat they are
actors behind a coordinator). A tool that hands work on calls the ``Router``
carried in its ``ToolContext``; what comes back is a ``ForwardResult``, which
the tool reports to the model as ``{ok, error?, detail?, dispatched}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class ForwardResult:
    """The answer to a forward: who got the work, or why nobody did.

    A refusal is data, never an exception: ``ok`` is False, ``error`` names the
    reason (``target_not_in_roster``, ``self_forward_rejected``, a loop-guard
    rule ...) and ``detail`` says more. ``dispatched`` lists the agents that
    did get the work, also when a later target was refused.
    """

    ok: bool
    dispatched: tuple[str, ...] = ()
    error: str | None = None
    detail: dict[str, object] = field(default_factory=dict)

    def as_tool_result(self) -> dict[str, object]:
        """What the model sees: the refusal reason only when there is one."""
        out: dict[str, object] = {"ok": self.ok, "dispatched": list(self.dispatched)}
        if self.error is not None:
            out["error"] = self.error
        if self.detail:
            out["detail"] = self.detail
        return out


class Router(Protocol):
    """Hands work from the current agent to others (``to`` is a name or ``all``)."""

    async def forward(self, to: str, text: str, reason: str | None) -> ForwardResult: ...
