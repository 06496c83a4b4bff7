"""The group as an MCP server: ``/mcp``, streamable HTTP, on the gateway's bearer token.

A desktop MCP client (or any agent speaking MCP) brings a person's groups
into its own chat through three tools:

- ``list_groups``: the person's groups, each with its id, name and roster;
- ``ask_group``: a message to a group, sent as the person's own (``@mentions``
  address VPs, as in the web UI); it waits for each addressed VP's reply,
  sends a progress notification as each one answers, and returns them all,
  each named by its VP;
- ``group_history``: the group's recent messages, author and text.

Every request carries ``Authorization: Bearer <token>``, the tokens ``/api``
takes; a missing, bad or expired token, a disabled account and an ended
session are refused with 401 before the MCP layer sees the request. The
tools act as that person, through ``GroupService`` (membership checked as
everywhere: a group they are not in is "not found", like one that does not
exist). The server is stateless (every POST stands alone), so any gateway
replica answers any request.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import FastAPI
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, ContentBlock, TextContent
from pydantic import Field
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from gateway.auth import AuthError
from gateway.bearer import bearer_user, unauthorized
from gateway.context import GatewayContext
from gateway.errors import GatewayError
from protocol import MAX_TEXT_LENGTH, Channel
from protocol.data import ResultData
from protocol.server import YeaftOutput

PATH = "/mcp"
# The longest ask_group waits for the VPs' replies, unless told less.
ASK_WAIT_S = 300.0
# The longest one read of the group's event log blocks.
_READ_WAIT_S = 5.0
# The most messages group_history returns.
HISTORY_MAX = 200
# The largest request body: a message of MAX_TEXT_LENGTH characters, JSON-escaped.
MAX_BODY_BYTES = 2 * 1024 * 1024
# Where the authenticated person rides in the ASGI scope.
_USER_KEY = "yeaft.user"

GroupId = Annotated[str, Field(min_length=1, max_length=200, description="The group's id.")]


def build_server(ctx: GatewayContext) -> MCPServer:
    """The MCP server whose tools act for the person a request authenticated."""
    server: MCPServer = MCPServer(
        "yeaft",
        instructions=(
            "Yeaft groups: teams of VPs (AI personas). list_groups names the person's "
            "groups and their VPs; ask_group sends a message (@name addresses a VP) and "
            "returns each addressed VP's reply; group_history reads recent messages."
        ),
    )

    @server.tool()
    async def list_groups(context: Context) -> dict[str, Any]:
        """The groups you are a member of: id, name and roster of VPs."""
        user = _user(context)
        groups = await ctx.groups.list_for(user)
        return {
            "groups": [
                {"id": g.id, "name": g.name, "roster": list(g.roster), "defaultVp": g.default_vp}
                for g in groups
            ]
        }

    @server.tool()
    async def ask_group(
        groupId: GroupId,
        text: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_TEXT_LENGTH,
                description="Your message; @name addresses a VP of the group.",
            ),
        ],
        context: Context,
        waitSeconds: Annotated[
            float,
            Field(
                gt=0,
                le=ASK_WAIT_S,
                description="How long to wait for the replies (at most 300 s).",
            ),
        ] = ASK_WAIT_S,
    ) -> CallToolResult:
        """Send a message to a group as yourself and return each addressed VP's reply.

        A progress notification goes out as each VP answers.
        """
        user, group_id = _user(context), groupId
        await _member(ctx, user, group_id)
        after = await ctx.groups.head_seq(group_id)
        try:
            sent = await ctx.groups.ingest(user, group_id, text, None, None, channel=Channel.API)
        except GatewayError as exc:
            raise ToolError(exc.message) from exc
        pending = {turn: vp for vp, turn in sent.turns.items()}
        answers: dict[str, dict[str, Any]] = {}
        total = len(pending)
        deadline = time.monotonic() + waitSeconds
        store = await ctx.runtime.store()
        while pending and (left := deadline - time.monotonic()) > 0:
            batch = await store.read_events(group_id, after, wait=min(left, _READ_WAIT_S))
            for event in batch.events:
                after = max(after, event.seq)
                if event.data_type != "result" or event.type != "yeaft_output":
                    continue
                frame = event.frame()
                if not isinstance(frame, YeaftOutput) or frame.turn_id not in pending:
                    continue
                vp = pending.pop(frame.turn_id)
                assert isinstance(frame.data, ResultData)
                answers[vp] = await _answer(ctx, group_id, vp, frame.data)
                await context.report_progress(
                    len(answers), total, f"{vp} answered ({len(answers)} of {total})"
                )
        for vp in pending.values():
            answers[vp] = {"vp": vp, "text": None, "error": "no reply within the wait"}
        replies = [answers[vp] for vp in sent.turns]
        summary = {
            "groupId": group_id,
            "messageId": sent.message_id,
            "replies": replies,
            "unknownMentions": list(sent.unknown),
        }
        return CallToolResult(
            content=_reply_texts(replies, sent.unknown),
            structured_content=summary,
            is_error=bool(pending),
        )

    @server.tool()
    async def group_history(
        groupId: GroupId,
        context: Context,
        limit: Annotated[
            int, Field(ge=1, le=HISTORY_MAX, description="How many, newest last.")
        ] = 20,
    ) -> dict[str, Any]:
        """The group's most recent messages (oldest first): author, role and text."""
        user, group_id = _user(context), groupId
        try:
            page = await ctx.groups.history(user, group_id, None, limit)
        except GatewayError as exc:
            raise ToolError(exc.message) from exc
        return {
            "groupId": group_id,
            "messages": [
                {"id": m["id"], "author": m["author"], "role": m["role"], "text": m["text"]}
                for m in page["messages"]
            ],
        }

    return server


def _user(context: Context) -> str:
    """The person the request carrying this tool call authenticated (see :class:`McpEndpoint`)."""
    request = context.request_context.request
    user = getattr(request, "scope", {}).get(_USER_KEY)
    if not isinstance(user, str):
        raise ToolError("this request is not authenticated")
    return user


async def _member(ctx: GatewayContext, user: str, group_id: str) -> None:
    try:
        await ctx.groups.member_group(user, group_id)
    except GatewayError as exc:
        raise ToolError(exc.message) from exc


async def _answer(
    ctx: GatewayContext, group_id: str, vp: str, result: ResultData
) -> dict[str, Any]:
    """One VP's reply: the message its turn stored, or what the turn ended with."""
    text = result.result
    if result.message_id is not None:
        stored = await (await ctx.runtime.store()).get_message(group_id, result.message_id)
        if stored is not None:
            text = stored.text
    answer: dict[str, Any] = {"vp": vp, "text": text, "messageId": result.message_id}
    if result.is_error:
        answer["error"] = result.error or result.subtype
    return answer


def _reply_texts(replies: list[dict[str, Any]], unknown: tuple[str, ...]) -> list[ContentBlock]:
    blocks: list[ContentBlock] = []
    for reply in replies:
        said = reply["text"] if reply["text"] else f"(no reply: {reply.get('error', 'silent')})"
        if reply.get("error") and reply["text"]:
            said += f"\n(ended with an error: {reply['error']})"
        blocks.append(TextContent(type="text", text=f"{reply['vp']}: {said}"))
    if not replies:
        blocks.append(TextContent(type="text", text="sent; no VP was addressed, so none answers"))
    if unknown:
        names = ", ".join(f"@{name}" for name in unknown)
        blocks.append(TextContent(type="text", text=f"not in the group: {names}"))
    return blocks


class McpEndpoint:
    """The ASGI app at ``/mcp``: the bearer token checked, then the SDK's transport."""

    def __init__(self, ctx: GatewayContext, manager: StreamableHTTPSessionManager) -> None:
        self.ctx = ctx
        self.manager = manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            user = await bearer_user(self.ctx, Request(scope, receive))
        except AuthError as exc:
            await unauthorized(exc)(scope, receive, send)
            return
        scope[_USER_KEY] = user
        scope["user"] = AuthenticatedUser(
            AccessToken(token="", client_id=user, subject=user, scopes=[])
        )
        await self.manager.handle_request(scope, receive, send)


def mount(app: FastAPI) -> None:
    """Serve the MCP endpoint at ``/mcp`` on the gateway app, its sessions run with the app."""
    ctx: GatewayContext = app.state.gateway
    server = build_server(ctx)
    server.streamable_http_app(
        stateless_http=True,
        max_request_body_size=MAX_BODY_BYTES,
        # The bearer token, not a cookie, is the credential: a page rebinding a
        # name to this host has nothing to send.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    manager = server.session_manager
    # POST only: stateless, the server has no stream of its own for a GET to
    # open and no session for a DELETE to end (both answer 405, as the spec allows).
    app.router.routes.append(Route(PATH, endpoint=McpEndpoint(ctx, manager), methods=["POST"]))
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[Any]:
        async with inner(app) as state, manager.run():
            yield state

    app.router.lifespan_context = lifespan
