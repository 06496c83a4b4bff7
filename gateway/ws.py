"""The ``/ws`` endpoint: authentication, then every client frame checked and handled.

Each frame goes through the same steps, and each refusal is an ``error``
frame while the connection stays open:

1. the rate limits, per connection and per user (``rate_limited``, with
   ``retryAfter``), charged as the receive loop reads the frame, which is as
   it arrives: that loop never waits for a chat;
2. size and validation by ``protocol.parse_client_frame`` (``frame_too_large``,
   ``bad_json``, ``unknown_type``, ``invalid_frame`` with the field);
3. a chat frame leaves the receive loop here: it is handled in a task of its
   own, a few per connection at once (``gateway.inflight``), and gets
   ``busy`` when they are all taken; every other frame is handled in the
   loop, in order, so a ping, a cancel or a subscribe never waits for a chat;
4. authorisation: the user must be a member of the group the frame names
   (``not_found`` otherwise, the same answer as for a group that does not exist);
5. the handler for the frame type.

Too many error replies in a window close the connection with 4429 (see
``gateway.connection`` for every close code). Refusals the server causes do
not count: ``busy``, ``internal``, ``gap``, and a ``rate_limited`` while the
server lagged (a frame it read late may look like part of a burst).

Replies: ``subscribe`` → ``group_update {action: "subscribed"}`` then the
replayed and live envelopes; chat → ``ack`` once the message is stored, or
``busy`` (with ``retryAfter`` and the ``clientMessageId`` as ``requestId``)
when the group, one of its VPs or the connection has too much waiting;
group management → ``group_update {action, group, requestId?}``
(``list_groups`` → ``{action: "list", group: {}, groups: [...]}``);
``ask_user_answer`` for an unknown request → ``error not_found``;
``llm_config`` → ``llm_config``, ``yeaft_settings`` → ``yeaft_settings``
(``gateway.ws_settings``); ``ping`` → ``pong``; ``unsubscribe`` and ``cancel_execution`` → no reply
(the cancelled turns end with their ``result`` envelopes). The chat mode's
frames (conversations) are handled in ``gateway.conversation_ws``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from starlette.websockets import WebSocket

from coordinator.commands import Warm
from gateway.accounts import check_enabled, session_user
from gateway.auth import AuthError, AuthFailure, check_origin, find_token, token_claims
from gateway.connection import CloseCode, Connection
from gateway.conversation_ws import ConversationFrames
from gateway.errors import GatewayError
from gateway.inflight import InFlight
from gateway.limits import AbuseMeter, LagMeter, TokenBucket
from gateway.sessions import session_id
from gateway.threads import thread_root
from gateway.views import group_update, group_view
from gateway.ws_edits import edit_handlers
from gateway.ws_members import member_handlers
from gateway.ws_reactions import reaction_handlers
from gateway.ws_settings import settings_handlers
from gateway.ws_threads import thread_handlers
from protocol import (
    Ack,
    AddVp,
    AskUserAnswer,
    CancelExecution,
    Channel,
    ClientFrame,
    CreateGroup,
    DeleteGroup,
    ErrorCode,
    ErrorFrame,
    ListGroups,
    McpServersList,
    Ping,
    Pong,
    ProtocolError,
    RemoveVp,
    RenameGroup,
    SendMessage,
    SetDefaultVp,
    Subscribe,
    Unsubscribe,
    YeaftSessionChat,
    parse_client_frame,
)

if TYPE_CHECKING:
    from gateway.context import GatewayContext

log = logging.getLogger(__name__)

# How long a process's first connection waits for the activity tail to take
# its place in the log (gateway.inbox_push), so no push after it is missed.
INBOX_READY_S = 5.0
# Error codes that do not count as abuse: our own failures, a gap the
# client could not have avoided, and the server being too busy.
_NOT_ABUSE = frozenset({ErrorCode.INTERNAL, ErrorCode.GAP, ErrorCode.BUSY})


async def websocket_endpoint(websocket: WebSocket) -> None:
    """The ASGI handler of ``/ws``."""
    ctx: GatewayContext = websocket.app.state.gateway
    conn = Connection(websocket, ctx.settings, ctx.metrics)
    session = ClientSession(ctx, conn)
    await conn.serve(session.authenticate, session.on_frame, session.on_close)


class ClientSession:
    """What one authenticated client may do, frame by frame."""

    def __init__(self, ctx: GatewayContext, conn: Connection) -> None:
        self.ctx = ctx
        self.conn = conn
        settings = ctx.settings
        self.bucket = TokenBucket(settings.rate_limit_per_s, settings.rate_limit_burst)
        # Taken once the user is known; shared with the user's other connections.
        self.user_bucket: TokenBucket | None = None
        self.abuse = AbuseMeter(settings.abuse_max_errors, settings.abuse_window_s)
        self.chats = InFlight(settings.chat_in_flight)
        # When a handler run in the receive loop last held up its reading.
        self.stalls = LagMeter()
        self._handlers: dict[type[Any], Callable[[Any], Awaitable[None]]] = {
            Subscribe: self._subscribe,
            Unsubscribe: self._unsubscribe,
            YeaftSessionChat: self._chat,
            CancelExecution: self._cancel,
            AskUserAnswer: self._answer,
            CreateGroup: self._create_group,
            RenameGroup: self._rename_group,
            DeleteGroup: self._delete_group,
            AddVp: self._add_vp,
            RemoveVp: self._remove_vp,
            SetDefaultVp: self._set_default_vp,
            ListGroups: self._list_groups,
            McpServersList: self._mcp_servers,
            Ping: self._ping,
        }
        # The seed's chat mode: create, resume, send, delete, list (gateway.conversation_ws).
        self._handlers.update(ConversationFrames(ctx, conn).handlers())
        self._handlers.update(member_handlers(self))
        self._handlers.update(reaction_handlers(self))
        self._handlers.update(edit_handlers(self))
        self._handlers.update(thread_handlers(self))
        # The seed's settings queries: llm_config, yeaft_settings (gateway.ws_settings).
        self._handlers.update(settings_handlers(self))

    @property
    def username(self) -> str:
        return self.conn.username

    # -- lifecycle ---------------------------------------------------------------
    async def authenticate(self) -> tuple[str | None, int, str]:
        """The user of this handshake, or the close code and reason to refuse it."""
        ws = self.conn.websocket
        token, from_cookie = find_token(ws.headers, ws.query_params, ws.cookies)
        client = ws.query_params.get("client")
        if client is None:
            # Only a browser sends the cookie on its own.
            self.conn.channel = Channel.WEB if from_cookie else Channel.API
        elif client in set(Channel):
            self.conn.channel = Channel(client)
        else:
            expected = ", ".join(c.value for c in Channel)
            return None, CloseCode.BAD_REQUEST, f"unknown client {client!r}; expected {expected}"
        try:
            if from_cookie:
                check_origin(self.ctx.settings, ws.headers)
            claims = token_claims(self.ctx.settings, token)
            username = await session_user(await self.ctx.runtime.store(), claims)
        except AuthError as exc:
            code = CloseCode.BAD_ORIGIN if exc.reason is AuthFailure.BAD_ORIGIN else None
            return None, code or CloseCode.UNAUTHORIZED, exc.message
        self.conn.session = session_id(claims)
        self.user_bucket = self.ctx.user_rates.acquire(username)
        await self.ctx.people.connected(self.conn, username)
        # A disable between the check above and this connection's registration
        # would have found nothing to close: look again now that it is registered
        # (a disable after this look reaches it through the directory log).
        try:
            await check_enabled(await self.ctx.runtime.store(), username)
        except AuthError as exc:
            self.conn.request_close(CloseCode.UNAUTHORIZED, exc.message)
        await self.ctx.inbox.started(within=INBOX_READY_S)
        return username, 0, ""

    def on_close(self) -> None:
        self.chats.cancel()
        if self.user_bucket is not None:
            self.ctx.user_rates.release(self.username)
            self.ctx.people.disconnected(self.conn, self.username)
        for sub in list(self.conn.subscriptions.values()):
            self.ctx.hub.drop(sub)

    async def on_frame(self, raw: str | bytes) -> None:
        """Check one frame, then hand it on; every refusal becomes an ``error`` frame.

        A chat frame is handled off this (the receive) loop; the others in it.
        """
        self.ctx.metrics.frames_received.inc()
        if not self._within_rate():
            return
        try:
            frame = parse_client_frame(raw, max_bytes=self.ctx.settings.frame_max_bytes)
        except ProtocolError as exc:
            self.error(exc.to_error_frame())
            return
        if not isinstance(frame, Ping):
            # A client's keepalive (every 20 s from the web UI) never makes a
            # burst; with nothing else coming in, the lag probe stays asleep.
            self.ctx.lag.frame()
        if isinstance(frame, YeaftSessionChat | SendMessage):
            key = frame.group_id if isinstance(frame, YeaftSessionChat) else frame.conversation_id
            if not self.chats.start(key, lambda: self.handle(frame)):
                self._busy(frame)
            return
        started = self._loop_time()
        await self.handle(frame)
        # A slow handler kept this loop from reading: frames that arrived
        # meanwhile are read late, together, through no fault of the client.
        self.stalls.record(self._loop_time() - started)

    def _within_rate(self) -> bool:
        """Charge the frame to the connection's and the user's buckets, as it arrives."""
        settings = self.ctx.settings
        if not self.bucket.take():
            bucket = self.bucket
            why = f"more than {settings.rate_limit_per_s:g} frames per second on this connection"
        elif self.user_bucket is not None and not self.user_bucket.take():
            bucket = self.user_bucket
            why = (
                f"more than {settings.user_rate_limit_per_s:g} frames per second from "
                f"{self.username} across all connections"
            )
        else:
            return True
        retry = bucket.retry_after()
        frame = ErrorFrame(
            code=ErrorCode.RATE_LIMITED,
            message=f"{why}: this frame was dropped",
            retry_after=round(retry, 3),
            detail={"retryAfterMs": int(retry * 1000) + 1},
        )
        self.error(frame, abusive=not self._lagged(bucket))
        return False

    def _lagged(self, bucket: TokenBucket) -> bool:
        """Whether the server read this connection late while ``bucket`` was filling.

        Frames read late arrive together, and a bucket refuses the burst the
        server made; such a refusal is not the client's abuse. The bucket
        fills up within ``burst / rate`` seconds, so lag before that is moot.
        """
        span = max(bucket.burst / bucket.rate, 1.0)
        return self.ctx.lag.meter.lagged_within(span) or self.stalls.lagged_within(span)

    def _busy(self, frame: YeaftSessionChat | SendMessage) -> None:
        limit = self.ctx.settings.chat_in_flight
        retry = self.chats.retry_after()
        self.error(
            ErrorFrame(
                code=ErrorCode.BUSY,
                message=(
                    f"{limit} messages from this connection are still being sent: this one "
                    f"was not sent; send it again in about {retry:g} s"
                ),
                request_id=frame.client_message_id,
                retry_after=retry,
                detail={"reason": "in_flight", "limit": limit},
            )
        )

    def _loop_time(self) -> float:
        return asyncio.get_running_loop().time()

    async def handle(self, frame: ClientFrame) -> None:
        """Run the frame's handler; its refusal or failure becomes an ``error`` frame."""
        request_id = _request_id(frame)
        try:
            handler = self._handlers.get(type(frame))
            if handler is None:
                raise GatewayError(
                    ErrorCode.INVALID_FRAME,
                    f"'{frame.type}' is not supported by this server yet: it serves group "
                    "chats (yeaft_session_chat, subscribe, group management)",
                    field="type",
                    detail={"unsupported": frame.type},
                )
            await handler(frame)
        except GatewayError as exc:
            self.error(exc.to_frame(request_id))
        except Exception:
            log.exception("handling a %s frame from %s failed", frame.type, self.username)
            self.error(
                ErrorFrame(
                    code=ErrorCode.INTERNAL,
                    message="the server failed to handle this frame; try again",
                    request_id=request_id,
                )
            )

    def error(self, frame: ErrorFrame, *, abusive: bool = True) -> None:
        """Send an error frame, and close the connection when errors pile up.

        ``abusive=False`` (and the codes in ``_NOT_ABUSE``) do not count.
        """
        self.ctx.metrics.error_frames.labels(code=frame.code.value).inc()
        self.conn.send(frame)
        if abusive and frame.code not in _NOT_ABUSE and self.abuse.hit():
            log.warning("closing %s's connection: too many bad frames", self.username)
            self.conn.request_close(CloseCode.ABUSE, "too many bad frames")

    def reply(self, group: dict[str, Any], action: str, request_id: str | None = None) -> None:
        extra = {"requestId": request_id} if request_id is not None else {}
        self.conn.send(group_update(group, action, **extra))

    # -- subscriptions -----------------------------------------------------------
    async def _subscribe(self, frame: Subscribe) -> None:
        group = await self.ctx.groups.member_group(self.username, frame.group_id)
        # Someone is looking at the group: its VPs' processes start now, not
        # with its next message (after a restart, say).
        self.ctx.runtime.post(Warm(frame.group_id))
        old = self.conn.subscriptions.get(frame.group_id)
        if old is not None:
            self.ctx.hub.drop(old)
        elif len(self.conn.subscriptions) >= self.ctx.settings.max_subscriptions:
            raise GatewayError(
                ErrorCode.CONFLICT,
                f"at most {self.ctx.settings.max_subscriptions} groups can be watched at once",
                detail={"limit": self.ctx.settings.max_subscriptions},
            )
        online = await self.ctx.people.watching(frame.group_id, group.members)
        reply = group_update(group_view(group), "subscribed", online=online)
        # "subscribed" goes out once the group's tail has fixed where this
        # subscription starts: whatever the client does after it, it sees.
        await self.ctx.hub.subscribe(
            self.conn,
            frame.group_id,
            frame.last_seq,
            frame.vp_ids,
            pinned=lambda: self.conn.send(reply),
        )
        await self.ctx.meters.subscribed(self.conn.send, self.username, group)

    async def _unsubscribe(self, frame: Unsubscribe) -> None:
        sub = self.conn.subscriptions.get(frame.group_id)
        if sub is not None:
            self.ctx.hub.drop(sub)

    # -- conversation ------------------------------------------------------------
    async def _chat(self, frame: YeaftSessionChat) -> None:
        if frame.thread_id is not None:
            # Checked before anything is stored (gateway.threads).
            await thread_root(self.ctx, self.username, frame.group_id, frame.thread_id)
        files: list[dict[str, Any]] = []
        if frame.attachments:
            await self.ctx.groups.member_group(self.username, frame.group_id)
            files = await self.ctx.attachments.accept(
                self.username, frame.group_id, frame.attachments
            )
        result = await self.ctx.groups.ingest(
            self.username,
            frame.group_id,
            frame.text,
            frame.mentions,
            frame.client_message_id,
            attachments=files,
            channel=self.conn.channel,
            thread_id=frame.thread_id,
        )
        # Sent only now: ingest returns after the message is stored.
        self.conn.send(
            Ack(
                client_message_id=frame.client_message_id,
                message_id=result.message_id,
                group_id=frame.group_id,
                duplicate=result.duplicate,
            )
        )

    async def _cancel(self, frame: CancelExecution) -> None:
        # A group's conversationId is its id, so either field names the target.
        target = frame.group_id or frame.conversation_id or ""
        await self.ctx.conversations.cancel(self.username, target, frame.vp_id)

    async def _answer(self, frame: AskUserAnswer) -> None:
        # Without a group or conversation the server finds the question's own.
        target = frame.group_id or frame.conversation_id
        await self.ctx.conversations.answer(self.username, target, frame.request_id, frame.answer)

    # -- group management --------------------------------------------------------
    async def _create_group(self, frame: CreateGroup) -> None:
        group = await self.ctx.groups.create(
            self.username, frame.name, frame.roster, frame.default_vp_id, frame.settings
        )
        self.reply(group_view(group), "created", frame.request_id)

    async def _rename_group(self, frame: RenameGroup) -> None:
        group = await self.ctx.groups.rename(self.username, frame.group_id, frame.name)
        self.reply(group_view(group), "renamed")

    async def _delete_group(self, frame: DeleteGroup) -> None:
        await self.ctx.groups.delete(self.username, frame.group_id)
        self.reply({"id": frame.group_id}, "deleted")

    async def _add_vp(self, frame: AddVp) -> None:
        group = await self.ctx.groups.add_vp(self.username, frame.group_id, frame.vp_id)
        self.reply(group_view(group), "roster")

    async def _remove_vp(self, frame: RemoveVp) -> None:
        group = await self.ctx.groups.remove_vp(self.username, frame.group_id, frame.vp_id)
        self.reply(group_view(group), "roster")

    async def _set_default_vp(self, frame: SetDefaultVp) -> None:
        group = await self.ctx.groups.set_default_vp(self.username, frame.group_id, frame.vp_id)
        self.reply(group_view(group), "default_vp")

    async def _list_groups(self, frame: ListGroups) -> None:
        groups = await self.ctx.groups.list_for(self.username)
        self.conn.send(group_update({}, "list", groups=[group_view(g) for g in groups]))

    async def _mcp_servers(self, frame: McpServersList) -> None:
        # Opening servers can take seconds: answered off the receive loop.
        self.ctx.mcp.answer(self.conn.send, frame.connect, frame.request_id)

    async def _ping(self, frame: Ping) -> None:
        self.conn.send(Pong())


def _request_id(frame: ClientFrame) -> str | None:
    """The id a reply to ``frame`` should echo, when it has one."""
    for name in ("request_id", "client_message_id"):
        value = getattr(frame, name, None)
        if isinstance(value, str):
            return value
    return None
