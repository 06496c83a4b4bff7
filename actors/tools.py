"""Tools that only make sense inside a group: ``route_forward``; and the group's workspace.

:func:`vp_tools` is the whole built-in tool set of a VP.

The tool asks the group's coordinator, through the ``Router`` in the tool
context, to hand work to another VP. Refusals come back to the model as
``{ok: false, error}`` and the turn goes on; a successful forward ends the
sender's turn.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from actors.commands import Forward
from actors.coordinator_link import CoordinatorLink
from actors.turns import ForwardRequest, TurnOrigin
from engine.memory import memory_tools
from engine.settings import EngineConfig
from engine.tools.builtin import builtin_tools
from engine.tools.files import WORKSPACE_SERVICE, file_tools
from engine.tools.handoff import ForwardResult
from engine.tools.registry import CONVERSATION_MODES, Tool, ToolContext
from engine.tools.web import web_fetch_tool
from store.base import Group
from store.workspaces import WorkspaceNameError, files_of


class RouteForwardParams(BaseModel):
    to: str = Field(
        min_length=1, max_length=64, description="The id of the VP to hand over to, or 'all'."
    )
    text: str = Field(
        min_length=1, max_length=20_000, description="What the other VP should do, self-contained."
    )
    reason: str | None = Field(
        default=None, max_length=500, description="Why this VP is the right one."
    )


async def _route_forward(params: RouteForwardParams, ctx: ToolContext) -> dict[str, object]:
    if ctx.router is None or ctx.vp_id is None or ctx.group_id is None:
        return {"ok": False, "error": "router_unavailable"}
    target = params.to.removeprefix("@")
    result = await ctx.router.forward(target, params.text, params.reason)
    if result.ok:
        ctx.request_end_turn("route_forward", to=target, dispatched=list(result.dispatched))
    return result.as_tool_result()


def _has_company(ctx: ToolContext) -> bool:
    # Hidden in one-VP groups: there is nobody to forward to.
    return ctx.router is not None and len(ctx.roster) > 1


def route_forward_tool() -> Tool:
    return Tool(
        "route_forward",
        "Hand this work to another VP in the group. Ends your turn when it succeeds.",
        RouteForwardParams,
        _route_forward,
        available=_has_company,
        modes=CONVERSATION_MODES,
        timeout=30.0,
    )


def vp_tools(settings: EngineConfig) -> list[Tool]:
    """Every built-in tool of a VP (MCP servers add theirs per turn)."""
    return [
        *builtin_tools(),
        route_forward_tool(),
        *memory_tools(),
        *file_tools(settings.file_limits()),
        web_fetch_tool(settings.web_fetch()),
    ]


class CoordinatorRouter:
    """The ``Router`` of one turn: forwards go to the group's coordinator with the turn's origin.

    A forward carries the whole origin (chain, causes, trigger and the user
    it acts for), so the turn it starts belongs to the same chain and acts
    for the same person.
    """

    def __init__(
        self, coordinator: CoordinatorLink, group_id: str, vp_id: str, origin: TurnOrigin
    ) -> None:
        self._coordinator = coordinator
        self._group_id = group_id
        self._vp_id = vp_id
        self._origin = origin

    async def forward(self, to: str, text: str, reason: str | None) -> ForwardResult:
        request = ForwardRequest(self._group_id, self._vp_id, to, text, reason, self._origin)
        coordinator = await self._coordinator.handle()
        result: ForwardResult = await coordinator.call.remote(Forward(request))
        return result


def workspace_service(data_dir: Path | None, group: Group) -> dict[str, Path]:
    """The tool-context entry giving a turn its group's (or conversation's) workspace.

    The folder comes from the group record and the data directory of the
    runtime config, never from the process environment; empty when there is
    no data directory or the record names no valid workspace.
    """
    if data_dir is None:
        return {}
    try:
        return {WORKSPACE_SERVICE: files_of(data_dir, group)}
    except WorkspaceNameError:
        return {}
