"""Groups and their VPs as A2A v1 agents: ``/a2a``, JSON-RPC over HTTP, on the bearer token.

The URL layout (each agent's card at ``<agent URL>/.well-known/agent-card.json``):

- ``GET  /a2a/groups``: the caller's agents, each group and its VPs with their URLs;
- ``POST /a2a/groups/{groupId}``: the group as an agent (a message is the
  person's, ``@mentions`` address VPs);
- ``POST /a2a/groups/{groupId}/vps/{vpId}``: one VP of the group as an agent
  (a message addresses that VP).

Every request carries ``Authorization: Bearer <token>``, the tokens ``/api``
takes (``gateway.bearer``): no token, a bad or expired one, a disabled
account or an ended session get a 401 before A2A sees the request. A group
the caller is not a member of is "not found" exactly like one that does not
exist, and so is a VP not on its roster: a 404, card or call. The body is
read no further than ``MAX_BODY_BYTES``; one larger is refused with the
JSON-RPC error the SDK gives for it. What passes goes to the SDK's
``JsonRpcDispatcher``, which answers every protocol error (malformed
JSON-RPC, an unknown method, bad params, a missing ``A2A-Version``) itself,
and to :class:`~gateway.a2a_handler.YeaftRequestHandler` for the work.
"""

from __future__ import annotations

from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import agent_card_to_dict, build_error_response
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from a2a.utils.errors import InvalidRequestError
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Message as AsgiMessage
from starlette.types import Receive

from gateway.a2a_cards import group_card, vp_card
from gateway.a2a_handler import TARGET_KEY, Target, YeaftRequestHandler
from gateway.auth import AuthError
from gateway.bearer import bearer_user, unauthorized
from gateway.context import GatewayContext
from gateway.errors import GatewayError, not_found
from gateway.run_stream import read_body

PREFIX = "/a2a"
GROUP_PATH = PREFIX + "/groups/{group_id}"
VP_PATH = GROUP_PATH + "/vps/{vp_id}"
# The largest request body: a message of MAX_TEXT_LENGTH characters, JSON-escaped.
MAX_BODY_BYTES = 2 * 1024 * 1024


class _ContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's call context, with the caller and agent this edge checked."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state[TARGET_KEY] = request.scope[TARGET_KEY]
        return context


def agent_url(request: Request, group_id: str, vp_id: str | None = None) -> str:
    """The absolute URL of a group's (or a VP's) agent, as the caller reached this gateway."""
    base = str(request.base_url).rstrip("/")
    path = f"{PREFIX}/groups/{group_id}" + (f"/vps/{vp_id}" if vp_id else "")
    return base + path


class A2AEdge:
    """The ``/a2a`` routes of one gateway."""

    def __init__(self, ctx: GatewayContext) -> None:
        self.ctx = ctx
        self.dispatcher = JsonRpcDispatcher(
            YeaftRequestHandler(ctx), context_builder=_ContextBuilder()
        )

    async def _target(self, request: Request) -> Target:
        """The caller and the agent the URL names; AuthError or a not-found GatewayError."""
        user = await bearer_user(self.ctx, request)
        group = await self.ctx.groups.member_group(user, request.path_params["group_id"])
        vp_id = request.path_params.get("vp_id")
        if vp_id is not None and vp_id not in group.roster:
            raise not_found("VP")
        return Target(user, group, vp_id)

    async def _checked(self, request: Request) -> Target | Response:
        try:
            return await self._target(request)
        except AuthError as exc:
            return unauthorized(exc)
        except GatewayError as exc:
            return JSONResponse(exc.to_json(), status_code=exc.status, headers=exc.headers())

    async def card(self, request: Request) -> Response:
        """``GET <agent>/.well-known/agent-card.json``: the agent's card, for members only."""
        target = await self._checked(request)
        if isinstance(target, Response):
            return target
        group, vp_id = target.group, target.vp_id
        url = agent_url(request, group.id, vp_id)
        card = (
            group_card(self.ctx.personas, group, url)
            if vp_id is None
            else vp_card(self.ctx.personas, group, vp_id, url)
        )
        return JSONResponse(agent_card_to_dict(card), headers={"Cache-Control": "no-store"})

    async def rpc(self, request: Request) -> Response:
        """``POST <agent>``: one JSON-RPC request, answered by the SDK's dispatcher."""
        target = await self._checked(request)
        if isinstance(target, Response):
            return target
        body = await read_body(request, MAX_BODY_BYTES)
        if len(body) > MAX_BODY_BYTES:
            error = InvalidRequestError(
                f"Payload too large: the body is larger than {MAX_BODY_BYTES} bytes",
                {"limit": MAX_BODY_BYTES},
            )
            return JSONResponse(build_error_response(None, error))
        request.scope[TARGET_KEY] = target
        return await self.dispatcher.handle_requests(
            Request(request.scope, _replay(body, request.receive))
        )

    async def directory(self, request: Request) -> Response:
        """``GET /a2a/groups``: the caller's groups and VPs as agents, with their card URLs."""
        try:
            user = await bearer_user(self.ctx, request)
        except AuthError as exc:
            return unauthorized(exc)
        agents: list[dict[str, Any]] = []
        for group in await self.ctx.groups.list_for(user):
            url = agent_url(request, group.id)
            vps = [
                {"id": vp, "url": (u := agent_url(request, group.id, vp)), "card": _card_url(u)}
                for vp in group.roster
            ]
            entry = {"id": group.id, "name": group.name, "url": url, "card": _card_url(url)}
            agents.append({**entry, "vps": vps})
        return JSONResponse({"groups": agents})


def _card_url(url: str) -> str:
    return url + AGENT_CARD_WELL_KNOWN_PATH


def _replay(body: bytes, receive_next: Receive) -> Receive:
    """An ASGI ``receive`` that hands the already read body on, then waits as the original."""
    sent = False

    async def receive() -> AsgiMessage:
        nonlocal sent
        if sent:
            return await receive_next()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


def mount(app: FastAPI) -> None:
    """Serve the A2A agents under ``/a2a`` on the gateway app."""
    edge = A2AEdge(app.state.gateway)
    app.router.routes += [
        Route(PREFIX + "/groups", endpoint=edge.directory, methods=["GET"]),
        Route(GROUP_PATH + AGENT_CARD_WELL_KNOWN_PATH, endpoint=edge.card, methods=["GET"]),
        Route(VP_PATH + AGENT_CARD_WELL_KNOWN_PATH, endpoint=edge.card, methods=["GET"]),
        Route(GROUP_PATH, endpoint=edge.rpc, methods=["POST"]),
        Route(VP_PATH, endpoint=edge.rpc, methods=["POST"]),
    ]
