"""The tools of one VP turn, and the terms it may call them on.

:class:`TurnToolkit` assembles the turn's :class:`ToolContext`: the router
to the coordinator (when the turn may forward), the group's roster and
services, the question callbacks, and the approval gate that combines the
group's, the persona's and the message's approval marks. It also says which
tools the persona may call and adds the tools of the MCP servers the VP may
use in the group.
"""

from __future__ import annotations

import logging

from actors.commands import AllowTool
from actors.coordinator_link import CoordinatorLink
from actors.services import VPServices
from actors.tools import CoordinatorRouter, workspace_service
from actors.turns import TurnRequest
from actors.writer import TurnWriter
from engine.mcp import select_servers
from engine.messages import Conversation
from engine.tools.approval import ApprovalGate, ApprovalRules
from engine.tools.registry import ToolContext
from engine.tools.sources import joined
from personas.prompts import Mode
from store.base import Group

log = logging.getLogger(__name__)


def turn_mode(group: Group) -> Mode:
    """A turn's mode: ``group`` with other VPs in the roster, ``chat`` alone."""
    return "group" if len(group.roster) > 1 else "chat"


class TurnToolkit:
    """Builds the tool context of one turn of one VP in one group."""

    def __init__(
        self,
        services: VPServices,
        req: TurnRequest,
        writer: TurnWriter,
        host: CoordinatorLink | None = None,
    ) -> None:
        self.s = services
        self.req = req
        self.writer = writer
        self.host = host

    def allowed(self) -> set[str] | None:
        """The tools the persona may call; None when it may call any."""
        if self.s.persona.tools is None:
            return None
        # Every VP in a group may hand work on, whatever its persona lists.
        return {*self.s.persona.tools, "route_forward"}

    def context(self, group: Group, conv: Conversation) -> ToolContext:
        """The turn's tool context: who calls, in which group, with which services."""
        req = self.req
        router = None
        if self.host is not None and req.can_forward:
            router = CoordinatorRouter(self.host, req.group_id, self.s.vp_id, req.origin)
        return ToolContext(
            conversation_id=conv.id,
            vp_id=self.s.vp_id,
            group_id=req.group_id,
            # The prompt's mode too (TurnRunner.prompt): tools are offered by it.
            mode=turn_mode(group),
            ask_user=self.s.questions.asker(self.writer),
            router=router,
            roster=tuple(group.roster),
            services={
                "user_id": req.origin.user_id,
                "memory": self.s.memory,
                **workspace_service(self.s.data_dir, group),
            },
            approve=self.approval_gate(group),
        )

    def approval_gate(self, group: Group) -> ApprovalGate:
        """The turn's approval policy: the group's, the persona's and the message's marks."""
        settings = group.settings
        rules = ApprovalRules.of(
            settings.tool_policies,
            self.s.persona.tool_policies,
            settings.auto_approve,
            self.req.origin.approvals,
        )
        ask = self.s.questions.approval_asker(self.writer, settings.approval_timeout_s)
        host = self.host

        async def remember(tool: str) -> None:
            if host is None:
                log.warning("turn %s has no coordinator to remember %s", self.req.turn_id, tool)
                return
            try:
                coordinator = await host.handle()
                await coordinator.call.remote(AllowTool(self.req.group_id, tool, self.s.vp_id))
            except Exception:
                # The call was allowed; only the choice for later turns is lost.
                log.warning("%s could not be remembered as allowed", tool, exc_info=True)

        return ApprovalGate(rules, ask, remember)

    def add_mcp_tools(self, group: Group, tools: ToolContext) -> list[str]:
        """Give the turn the tools of the MCP servers this VP may use in ``group``; their names now.

        The turn reads them again at every step (``McpToolset``): a server
        still starting joins when it is ready, one that cannot be reached
        offers nothing, and a call to one of its tools gets an error saying
        why. Nothing here waits for a server.
        """
        servers = select_servers(
            self.s.mcp.servers, self.s.persona.mcp_servers, group.settings.mcp_servers
        )
        if not servers:
            return []
        toolset = self.s.mcp.toolset(servers, self.s.vp_id)
        tools.more_tools = joined(tools.more_tools, toolset)
        return [t.name for t in toolset.tools()]

    def add_a2a_tools(self, tools: ToolContext) -> list[str]:
        """Give the turn a tool per remote A2A agent (``a2a__<agent>``); their names.

        Each is offered at once: its card is read in the background from
        now, and its description says so until it is in. Nothing here
        waits for an agent; a call to one goes through the approval gate
        like any tool (A2A tools ask by default).
        """
        if not self.s.a2a.agents:
            return []
        toolset = self.s.a2a.toolset()
        tools.more_tools = joined(tools.more_tools, toolset)
        return [t.name for t in toolset.tools()]
