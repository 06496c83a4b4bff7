"""The ``/ws`` endpoint: authentication, then every client frame checked and handled.

Each frame goes through the same steps, and each refusal is an ``error``
frame while the connection stays open:

1. the per-connection rate limit (``rate_limited``, with ``retryAfterMs``);
2. size and validation by ``protocol.parse_client_frame`` (``frame_too_large``,
   ``bad_json``, ``unknown_type``, ``invalid_frame`` with the field);
3. authorisation: the user must be a member of the group the frame names
   (``not_found`` otherwise, the same answer as for a group that does not exist);
4. the handler for the frame type.

Too many error replies in a window close the connection with 4429 (see
``gateway.connection`` for every close code).

Replies: ``subscribe`` → ``group_update {action: "subscribed"}`` then the
replayed and live envelopes; chat → ``ack`` once the message is stored;
group management → ``group_update {action, group, requestId?}``
(``list_groups`` → ``{action: "list", group: {}, groups: [...]}``);
``ask_user_answer`` for an unknown request → ``error not_found``;
``ping`` → ``pong``; ``unsubscribe`` and ``cancel_execution`` → no reply
(the cancelled turns end with their ``result`` envelopes).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from starlette.websockets import WebSocket

from gateway.auth import AuthError, AuthFailure, check_origin, find_token, verify_token
from gateway.connection import CloseCode, Connection
from gateway.errors import GatewayError
from gateway.limits import AbuseMeter, TokenBucket
from gateway.views import group_update, group_view
from protocol import (
    Ack,
    AddVp,
    AskUserAnswer,
    CancelExecution,
    ClientFrame,
    CreateGroup,
    DeleteGroup,
    ErrorCode,
    ErrorFrame,
    ListGroups,
    Ping,
    Pong,
    ProtocolError,
    RemoveVp,
    RenameGroup,
    SetDefaultVp,
    Subscribe,
    Unsubscribe,
    YeaftSessionChat,
    parse_client_frame,
)

if TYPE_CHECKING:
    from gateway.context import GatewayContext

log = logging.getLogger(__name__)

# Error codes that do not count as abuse: our own failures, and a gap the
# client could not have avoided.
_NOT_ABUSE = frozenset({ErrorCode.INTERNAL, ErrorCode.GAP})


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
        self.abuse = AbuseMeter(settings.abuse_max_errors, settings.abuse_window_s)
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
            Ping: self._ping,
        }

    @property
    def username(self) -> str:
        return self.conn.username

    # -- lifecycle ---------------------------------------------------------------
    async def authenticate(self) -> tuple[str | None, int, str]:
        """The user of this handshake, or the close code and reason to refuse it."""
        ws = self.conn.websocket
        token, from_cookie = find_token(ws.headers, ws.query_params, ws.cookies)
        try:
            if from_cookie:
                check_origin(self.ctx.settings, ws.headers)
            username = verify_token(self.ctx.settings, token)
            if await (await self.ctx.runtime.store()).get_user(username) is None:
                raise AuthError(AuthFailure.UNKNOWN_USER, "the user of this token does not exist")
        except AuthError as exc:
            code = CloseCode.BAD_ORIGIN if exc.reason is AuthFailure.BAD_ORIGIN else None
            return None, code or CloseCode.UNAUTHORIZED, exc.message
        return username, 0, ""

    def on_close(self) -> None:
        for sub in list(self.conn.subscriptions.values()):
            self.ctx.hub.drop(sub)

    async def on_frame(self, raw: str | bytes) -> None:
        """Check and handle one frame; every refusal becomes an ``error`` frame."""
        self.ctx.metrics.frames_received.inc()
        if not self.bucket.take():
            retry_ms = int(self.bucket.retry_after() * 1000) + 1
            self.error(
                ErrorFrame(
                    code=ErrorCode.RATE_LIMITED,
                    message=(
                        f"more than {self.ctx.settings.rate_limit_per_s:g} frames per second: "
                        "this frame was dropped"
                    ),
                    detail={"retryAfterMs": retry_ms},
                )
            )
            return
        try:
            frame = parse_client_frame(raw, max_bytes=self.ctx.settings.frame_max_bytes)
        except ProtocolError as exc:
            self.error(exc.to_error_frame())
            return
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

    def error(self, frame: ErrorFrame) -> None:
        """Send an error frame, and close the connection when errors pile up."""
        self.ctx.metrics.error_frames.labels(code=frame.code.value).inc()
        self.conn.send(frame)
        if frame.code not in _NOT_ABUSE and self.abuse.hit():
            log.warning("closing %s's connection: too many bad frames", self.username)
            self.conn.request_close(CloseCode.ABUSE, "too many bad frames")

    def reply(self, group: dict[str, Any], action: str, request_id: str | None = None) -> None:
        extra = {"requestId": request_id} if request_id is not None else {}
        self.conn.send(group_update(group, action, **extra))

    # -- subscriptions -----------------------------------------------------------
    async def _subscribe(self, frame: Subscribe) -> None:
        group = await self.ctx.groups.member_group(self.username, frame.group_id)
        old = self.conn.subscriptions.get(frame.group_id)
        if old is not None:
            self.ctx.hub.drop(old)
        elif len(self.conn.subscriptions) >= self.ctx.settings.max_subscriptions:
            raise GatewayError(
                ErrorCode.CONFLICT,
                f"at most {self.ctx.settings.max_subscriptions} groups can be watched at once",
                detail={"limit": self.ctx.settings.max_subscriptions},
            )
        self.reply(group_view(group), "subscribed")
        await self.ctx.hub.subscribe(self.conn, frame.group_id, frame.last_seq, frame.vp_ids)

    async def _unsubscribe(self, frame: Unsubscribe) -> None:
        sub = self.conn.subscriptions.get(frame.group_id)
        if sub is not None:
            self.ctx.hub.drop(sub)

    # -- conversation ------------------------------------------------------------
    async def _chat(self, frame: YeaftSessionChat) -> None:
        if frame.attachments:
            raise GatewayError(
                ErrorCode.INVALID_FRAME,
                "attachments are not supported by this server yet",
                field="attachments",
            )
        result = await self.ctx.groups.ingest(
            self.username, frame.group_id, frame.text, frame.mentions, frame.client_message_id
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
        if frame.group_id is None:
            raise GatewayError(
                ErrorCode.INVALID_FRAME,
                "this server cancels group turns: groupId is required",
                field="groupId",
            )
        await self.ctx.groups.cancel(self.username, frame.group_id, frame.vp_id)

    async def _answer(self, frame: AskUserAnswer) -> None:
        if frame.group_id is None:
            raise GatewayError(
                ErrorCode.INVALID_FRAME, "groupId is required to answer a question", field="groupId"
            )
        answer = frame.answer if isinstance(frame.answer, str) else ", ".join(frame.answer)
        delivered = await self.ctx.groups.answer(
            self.username, frame.group_id, frame.request_id, answer
        )
        if not delivered:
            raise GatewayError(
                ErrorCode.NOT_FOUND,
                f"no open question {frame.request_id}: it was answered, expired or never asked",
                field="requestId",
            )

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

    async def _ping(self, frame: Ping) -> None:
        self.conn.send(Pong())


def _request_id(frame: ClientFrame) -> str | None:
    """The id a reply to ``frame`` should echo, when it has one."""
    for name in ("request_id", "client_message_id"):
        value = getattr(frame, name, None)
        if isinstance(value, str):
            return value
    return None
