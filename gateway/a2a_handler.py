"""The A2A request handler: each A2A method as what a person may do in a group.

The SDK's ``JsonRpcDispatcher`` parses the JSON-RPC, checks the
``A2A-Version`` header and answers every error in the protocol's own terms;
this handler does the work, for the person and the group (or VP) the
request's URL and bearer token named (``gateway.a2a_serve`` checked both,
as the WebSocket checks them: a stranger to a group never gets this far).

- ``SendMessage`` / ``SendStreamingMessage``: the message's text parts are
  sent as the person's message (``GroupService.ingest``, the WebSocket's
  path; ``@mentions`` address VPs, and a VP's own agent addresses that VP).
  A message naming a task waiting for input answers its question instead.
  The stream subscribes to the group's tail before the message is sent, so
  nothing it causes is missed; ``SendMessage`` waits for the turns to end
  (or for input, or ``SEND_WAIT_S``) unless told ``returnImmediately``.
- ``GetTask`` / ``SubscribeToTask``: the task read again from the store (the
  message, its turn records and the event log from the task's position), so
  they work from any connection and any gateway sharing the store.
- ``CancelTask``: stops the task's VPs that are still at work (as the web
  UI's stop button does) and answers once their turns have ended.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import (
    A2AError,
    ContentTypeNotSupportedError,
    ExtendedAgentCardNotConfiguredError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict

from gateway.a2a_tasks import TERMINAL, TaskEvent, TaskRef, TaskTracker, user_message
from gateway.context import GatewayContext
from gateway.errors import GatewayError
from gateway.run_stream import ROUTING_WAIT_S, RunSink, StreamEnded, envelope_reader
from gateway.tail import Subscription
from protocol import MAX_TEXT_LENGTH, Channel, ErrorCode
from protocol.common import is_id
from store.base import Group

# The longest a (not streaming) SendMessage waits for the turns before it
# answers with the task as it stands (GetTask reads it later).
SEND_WAIT_S = 300.0
# The longest CancelTask waits for the stopped turns to end.
CANCEL_WAIT_S = 30.0
# The most events one read of the log returns while a task is read again.
_REPLAY_BATCH = 500
# Where the request's person and agent ride in the call context's state.
TARGET_KEY = "yeaft.target"


@dataclass(frozen=True, slots=True)
class Target:
    """Whom a request acts for and which agent it calls: a group, or one VP in it."""

    user: str
    group: Group
    vp_id: str | None = None


def _target(context: ServerCallContext) -> Target:
    target = context.state.get(TARGET_KEY)
    if not isinstance(target, Target):
        raise InternalError("the request reached the handler without its caller")
    return target


def a2a_error(exc: GatewayError) -> A2AError:
    """The A2A error for a refusal of the group service (the gateway's code in ``data``)."""
    data: dict[str, Any] = {"code": exc.code.value}
    if exc.retry_after is not None:
        data["retryAfter"] = exc.retry_after
    if exc.code in (ErrorCode.INVALID_FRAME, ErrorCode.NOT_FOUND):
        return InvalidParamsError(exc.message, data)
    if exc.code is ErrorCode.INTERNAL:
        return InternalError(exc.message, data)
    return InvalidRequestError(exc.message, data)


def _text(message: Message) -> str:
    """The text a message sends: its text parts joined; other parts are refused."""
    texts = []
    for part in message.parts:
        if part.WhichOneof("content") != "text":
            raise ContentTypeNotSupportedError(
                "only text parts are accepted: send files through the group's attachments"
            )
        texts.append(part.text)
    text = "\n".join(texts)
    if not text.strip():
        raise InvalidParamsError("the message has no text")
    if len(text) > MAX_TEXT_LENGTH:
        raise InvalidParamsError(
            f"the message is longer than {MAX_TEXT_LENGTH} characters",
            {"limit": MAX_TEXT_LENGTH},
        )
    return text


def _metadata(message: Message) -> dict[str, Any]:
    return MessageToDict(message.metadata) if message.HasField("metadata") else {}


class YeaftRequestHandler(RequestHandler):
    """A2A's methods on a gateway's groups (see the module's docstring)."""

    def __init__(self, ctx: GatewayContext) -> None:
        self.ctx = ctx

    # -- sending -------------------------------------------------------------------
    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        target = _target(context)
        tracker, sub, sink = await self._send(target, params)
        try:
            if params.configuration.return_immediately:
                return await self._task(target, tracker, params)
            try:
                async with asyncio.timeout(SEND_WAIT_S):
                    async for _ in self._follow(tracker, sink):
                        pass
            except TimeoutError:
                pass  # the task as it stands; GetTask reads the rest
            return await self._task(target, tracker, params)
        finally:
            self.ctx.hub.drop(sub)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Task | TaskEvent]:
        target = _target(context)
        tracker, sub, sink = await self._send(target, params)
        try:
            yield await self._task(target, tracker, params)
            async for event in self._follow(tracker, sink):
                yield event
        finally:
            self.ctx.hub.drop(sub)

    async def _send(
        self, target: Target, params: SendMessageRequest
    ) -> tuple[TaskTracker, Subscription, RunSink]:
        """Send the message (or the answer it carries); subscribed before it is sent."""
        message = params.message
        group_id = target.group.id
        if message.context_id and message.context_id != group_id:
            raise InvalidParamsError(
                f"this agent's context is its group: contextId must be {group_id!r} or empty"
            )
        if message.task_id:
            return await self._answer(target, message)
        text = _text(message)
        mentions = self._mentions(target, message)
        after = await self.ctx.groups.head_seq(group_id)
        sink, sub = await self._subscribe(target, after)
        try:
            sent = await self.ctx.groups.ingest(
                target.user,
                group_id,
                text,
                mentions,
                message.message_id if is_id(message.message_id) else None,
                channel=Channel.API,
            )
        except GatewayError as exc:
            self.ctx.hub.drop(sub)
            raise a2a_error(exc) from None
        except BaseException:
            self.ctx.hub.drop(sub)
            raise
        ref = TaskRef(group_id, sent.message_id, after)
        turns = list(sent.turns.items())
        if sent.duplicate:
            # The same message sent again: the task it started, as the store has it.
            turns = [(r.vp_id, r.turn_id) for r in await self._records(ref)]
        return TaskTracker(ref, turns, team=sent.trigger == "task"), sub, sink

    def _mentions(self, target: Target, message: Message) -> list[str] | None:
        """VPs to address besides the @mentions: a VP agent's own, or ``metadata.mentions``."""
        if target.vp_id is not None:
            return [target.vp_id]
        given = _metadata(message).get("mentions")
        if given is None:
            return None
        if not isinstance(given, list) or not all(isinstance(m, str) and is_id(m) for m in given):
            raise InvalidParamsError("metadata.mentions must be a list of VP ids")
        return list(given)

    async def _answer(
        self, target: Target, message: Message
    ) -> tuple[TaskTracker, Subscription, RunSink]:
        """A message to a task waiting for input: the answer to its open question."""
        tracker, head = await self._replay(target, message.task_id)
        if tracker.state in TERMINAL:
            raise InvalidParamsError(
                f"task {tracker.ref.id} has ended ({_state(tracker.state)}): "
                "send a new message without taskId"
            )
        questions = tracker.questions()
        if not questions:
            raise InvalidParamsError(f"task {tracker.ref.id} is not waiting for input")
        meta = _metadata(message)
        wanted = meta.get("requestId")
        asked = next((q for q in questions if q.get("requestId") == wanted), None)
        if asked is None and wanted is not None:
            raise InvalidParamsError(f"the task has no open question {wanted!r}")
        asked = asked or questions[0]
        given = meta.get("answer")
        answer: str | list[str]
        if isinstance(given, list) and given and all(isinstance(a, str) for a in given):
            answer = list(given)
        else:
            answer = _text(message)
        sink, sub = await self._subscribe(target, head)
        try:
            await self.ctx.conversations.answer(
                target.user, target.group.id, str(asked["requestId"]), answer
            )
        except GatewayError as exc:
            self.ctx.hub.drop(sub)
            raise a2a_error(exc) from None
        tracker.answered(str(asked["requestId"]))
        return tracker, sub, sink

    async def _subscribe(self, target: Target, after: int) -> tuple[RunSink, Subscription]:
        sink = RunSink(target.user, self.ctx.settings.client_queue_size)
        try:
            sub = await self.ctx.hub.subscribe(sink, target.group.id, after, None)
        except GatewayError as exc:
            raise a2a_error(exc) from None
        return sink, sub

    async def _follow(self, tracker: TaskTracker, sink: RunSink) -> AsyncIterator[TaskEvent]:
        """The task's events as the group's envelopes arrive, until it ends or waits for input."""
        reader = envelope_reader(sink, tracker.ref.group_id)
        try:
            while not tracker.done and not tracker.blocked:
                # Once every turn has ended, only word of a hand-off is awaited, for a while.
                within = ROUTING_WAIT_S if tracker.turns_over else None
                try:
                    envelope = await reader.next(within)
                except StreamEnded as ended:
                    raise InternalError(
                        f"{ended.message}; GetTask reads the task", {"reason": ended.code}
                    ) from None
                for event in (
                    tracker.give_up_routing() if envelope is None else tracker.feed(envelope)
                ):
                    yield event
        finally:
            await reader.aclose()

    # -- reading a task again -----------------------------------------------------------
    async def _records(self, ref: TaskRef) -> list[Any]:
        store = await self.ctx.runtime.store()
        return list(await store.turns_of(ref.group_id, ref.message_id))

    async def _replay(self, target: Target, task_id: str) -> tuple[TaskTracker, int]:
        """The task ``task_id`` read again from the store, and the log position read up to."""
        ref = TaskRef.parse(target.group.id, task_id)
        store = await self.ctx.runtime.store()
        stored = await store.get_message(ref.group_id, ref.message_id) if ref else None
        if ref is None or stored is None or stored.author != target.user or stored.role != "user":
            raise TaskNotFoundError(f"task {task_id!r} not found")
        head = await store.head(ref.group_id)
        if ref.after_seq > head:
            raise TaskNotFoundError(f"task {task_id!r} not found")
        records = await self._records(ref)
        team = stored.meta.get("trigger") == "task"  # the team took it (coordinator.team)
        tracker = TaskTracker(ref, [(r.vp_id, r.turn_id) for r in records], team=team)
        after = ref.after_seq
        while not tracker.done and after < head:
            batch = await store.read_events(ref.group_id, after, limit=_REPLAY_BATCH)
            if batch.gap:
                break
            for event in batch.events:
                tracker.feed(event.envelope())
                after = event.seq
            if not batch.events:
                break
        # Turns the records call finished whose end the log no longer holds.
        finished = {r.turn_id: r.finished for r in records}
        if not tracker.done and after >= head and any(finished.values()):
            settled = {t: f for t, f in finished.items() if t not in _ended(tracker)}
            if any(settled.values()):
                tracker.end_from_records(settled)
        return tracker, max(after, ref.after_seq)

    async def _task(
        self, target: Target, tracker: TaskTracker, params: SendMessageRequest | None = None
    ) -> Task:
        config = params.configuration if params else None
        history_length = (
            config.history_length if config and config.HasField("history_length") else None
        )
        return tracker.task(await self._history(tracker.ref, history_length))

    async def _history(self, ref: TaskRef, history_length: int | None) -> list[Message]:
        if history_length == 0:
            return []
        stored = await (await self.ctx.runtime.store()).get_message(ref.group_id, ref.message_id)
        return [user_message(ref, stored.text)] if stored is not None else []

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        target = _target(context)
        tracker, _ = await self._replay(target, params.id)
        length = params.history_length if params.HasField("history_length") else None
        return tracker.task(await self._history(tracker.ref, length))

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Task | TaskEvent]:
        target = _target(context)
        tracker, head = await self._replay(target, params.id)
        if tracker.state in TERMINAL:
            raise UnsupportedOperationError(
                f"task {tracker.ref.id} has ended ({_state(tracker.state)}): GetTask reads it"
            )
        sink, sub = await self._subscribe(target, head)
        try:
            yield tracker.task(await self._history(tracker.ref, None))
            async for event in self._follow(tracker, sink):
                yield event
        finally:
            self.ctx.hub.drop(sub)

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        target = _target(context)
        tracker, head = await self._replay(target, params.id)
        if tracker.state in TERMINAL:
            raise TaskNotCancelableError(
                f"task {tracker.ref.id} has already ended ({_state(tracker.state)})"
            )
        sink, sub = await self._subscribe(target, head)
        try:
            running = {t.vp_id for t in tracker.turns.values() if not t.ended}
            for vp_id in sorted(running):
                try:
                    await self.ctx.groups.cancel(target.user, target.group.id, vp_id)
                except GatewayError as exc:
                    raise a2a_error(exc) from None
            # A stopped turn that waited on a question ends all the same.
            tracker.answered(None)
            try:
                async with asyncio.timeout(CANCEL_WAIT_S):
                    async for _ in self._follow(tracker, sink):
                        pass
            except TimeoutError:
                pass  # the task as it stands: GetTask reads its end later
        finally:
            self.ctx.hub.drop(sub)
        return tracker.task(await self._history(tracker.ref, None))

    # -- what this server does not offer -----------------------------------------------
    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        raise UnsupportedOperationError(
            "ListTasks is not offered: a task's id comes with the answer to SendMessage"
        )

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError


def _ended(tracker: TaskTracker) -> set[str]:
    return {t.turn_id for t in tracker.turns.values() if t.ended}


def _state(state: TaskState) -> str:
    return TaskState.Name(state).removeprefix("TASK_STATE_").lower()
