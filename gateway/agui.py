"""``POST /api/groups/{group_id}/agui``: a person's message run as an AG-UI run, over SSE.

The body is AG-UI's ``RunAgentInput`` (``threadId``, ``runId``,
``messages``, ``state``, ``tools``, ``context``, ``forwardedProps``). The
last ``user`` message is the person's text (its @mentions address VPs, as
in the web UI); it goes into the group through ``GroupService.ingest``, the
same path as the WebSocket's ``yeaft_session_chat``, with the ``runId`` as
its ``clientMessageId`` (a repeated run stores nothing twice). The earlier
messages, ``state``, ``tools`` and ``context`` are not used: the group's
log is the conversation, and the VPs have their own tools.

Order of work, so that nothing is missed: the caller must be a member (a
stranger gets the same 404 as for a group that does not exist); the body
is checked; the stream subscribes to the group's tail; the message is
sent. Any refusal up to there is a JSON error with its status (400 bad
JSON, 413 too large, 422 invalid, 404, 503 busy). Then the answer is
``text/event-stream``: ``RUN_STARTED``, the events of each addressed VP's
turn as ``gateway.agui_events`` translates them, and ``RUN_FINISHED``
(its ``result`` lists each turn's stored reply) once every turn has
ended (a team task: once its attempt has, its cards streamed as
``STATE_SNAPSHOT``), or, when every running turn waits on a question, with
an interrupt outcome that a later run resumes; or ``RUN_ERROR`` if the
stream cannot go on (the client fell too far behind, the group was
deleted, the caller left it).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
)
from ag_ui.encoder import EventEncoder
from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from pydantic import ValidationError
from starlette.background import BackgroundTask

from gateway.agui_events import RunTranslator, parse_interrupt_id
from gateway.context import GatewayContext
from gateway.errors import GatewayError
from gateway.http import Ctx, User
from gateway.run_stream import (
    ROUTING_WAIT_S,
    RunSink,
    StreamEnded,
    envelope_reader,
    keep_alive,
    read_body,
)
from gateway.tail import Subscription
from protocol import MAX_TEXT_LENGTH, Channel, ErrorCode
from protocol.common import is_id

router = APIRouter()


def parse_run(raw: bytes, max_bytes: int) -> tuple[RunAgentInput, str]:
    """The checked ``RunAgentInput`` and the person's text; a ``GatewayError`` otherwise.

    A run that resumes interrupts sends no new message: its text is empty.
    """
    if len(raw) > max_bytes:
        raise GatewayError(
            ErrorCode.FRAME_TOO_LARGE,
            f"the request body is larger than {max_bytes} bytes",
            detail={"limit": max_bytes},
        )
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise GatewayError(ErrorCode.BAD_JSON, f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise GatewayError(ErrorCode.INVALID_FRAME, "the body must be a RunAgentInput object")
    try:
        run = RunAgentInput.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise GatewayError(
            ErrorCode.INVALID_FRAME, f"'{where}' is invalid: {first['msg']}", field=where or None
        ) from None
    if run.resume:
        return run, ""
    text = _last_user_text(run)
    if not text.strip():
        raise GatewayError(
            ErrorCode.INVALID_FRAME,
            "messages has no user message with text: the last user message is what is sent",
            field="messages",
        )
    if len(text) > MAX_TEXT_LENGTH:
        raise GatewayError(
            ErrorCode.INVALID_FRAME,
            f"the message is longer than {MAX_TEXT_LENGTH} characters",
            field="messages",
            detail={"limit": MAX_TEXT_LENGTH},
        )
    return run, text


def _last_user_text(run: RunAgentInput) -> str:
    for message in reversed(run.messages):
        if message.role != "user":
            continue
        content = getattr(message, "content", "")
        if isinstance(content, str):
            return content
        parts = [getattr(p, "text", None) for p in content or []]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


def _mentions(run: RunAgentInput) -> list[str] | None:
    """``forwardedProps.mentions``: VP ids to address besides the text's @mentions."""
    props = run.forwarded_props
    given = props.get("mentions") if isinstance(props, dict) else None
    if given is None:
        return None
    if not isinstance(given, list) or not all(isinstance(m, str) and is_id(m) for m in given):
        raise GatewayError(
            ErrorCode.INVALID_FRAME,
            "forwardedProps.mentions must be a list of VP ids",
            field="forwardedProps.mentions",
        )
    return list(given)


def _resumed(run: RunAgentInput) -> list[tuple[str, str, str]]:
    """``(requestId, vpId, turnId)`` of each interrupt the run resumes (none: a new message)."""
    out = []
    for i, entry in enumerate(run.resume or []):
        parsed = parse_interrupt_id(entry.interrupt_id)
        if parsed is None:
            raise GatewayError(
                ErrorCode.INVALID_FRAME,
                f"resume[{i}].interruptId is not an interrupt of this endpoint",
                field=f"resume.{i}.interruptId",
            )
        out.append(parsed)
    return out


def _answer(payload: Any, where: str) -> str | list[str]:
    """The answer a resume entry's payload gives: a string, a list, or ``{answer}``."""
    value = payload.get("answer") if isinstance(payload, dict) else payload
    if isinstance(value, str) and value:
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return list(value)
    raise GatewayError(
        ErrorCode.INVALID_FRAME,
        f"{where}.payload must be the answer: a string, a list of strings, or {{answer}}",
        field=f"{where}.payload",
    )


async def _resume(
    ctx: GatewayContext,
    user: str,
    group_id: str,
    run: RunAgentInput,
    resumed: list[tuple[str, str, str]],
) -> None:
    """Answer each resolved interrupt's question; a cancelled one stops its VP's turn."""
    for i, (entry, (request_id, vp_id, _)) in enumerate(
        zip(run.resume or [], resumed, strict=True)
    ):
        if entry.status == "cancelled":
            await ctx.groups.cancel(user, group_id, vp_id)
            continue
        answer = _answer(entry.payload, f"resume.{i}")
        await ctx.conversations.answer(user, group_id, request_id, answer)


@router.post("/api/groups/{group_id}/agui")
async def agui_run(group_id: str, request: Request, user: User, ctx: Ctx) -> StreamingResponse:
    """Send the last user message of an AG-UI ``RunAgentInput``; stream the VPs' turns as SSE."""
    await ctx.groups.member_group(user, group_id)
    run, text = parse_run(
        await read_body(request, ctx.settings.frame_max_bytes), ctx.settings.frame_max_bytes
    )
    resumed = _resumed(run)
    mentions = None if resumed else _mentions(run)
    sink = RunSink(user, ctx.settings.client_queue_size)
    # Subscribed before anything is sent or answered: every envelope it causes is seen.
    sub = await ctx.hub.subscribe(sink, group_id, None, None)
    try:
        if resumed:
            await _resume(ctx, user, group_id, run, resumed)
            turns = {vp: turn for _, vp, turn in resumed}
            translator = RunTranslator(turns, resumed_by=run.run_id)
            extra: dict[str, Any] = {"groupId": group_id, "resumed": True}
        else:
            result = await ctx.groups.ingest(
                user,
                group_id,
                text,
                mentions,
                run.run_id if is_id(run.run_id) else None,
                channel=Channel.API,
            )
            task = result.message_id if result.trigger == "task" else None
            translator = RunTranslator(
                dict(result.turns), task_message=task, chain_id=result.message_id
            )
            extra = {
                "groupId": group_id,
                "messageId": result.message_id,
                "duplicate": result.duplicate,
                "unknownMentions": list(result.unknown),
            }
    except BaseException:
        ctx.hub.drop(sub)
        raise
    stream = _events(run, translator, sink, extra)
    return StreamingResponse(
        keep_alive(_encoded(stream, ctx, sub), ctx.settings.sse_keep_alive_s),
        media_type=EventEncoder().get_content_type(),
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        # Also after a stream that never started (the client left at once).
        background=BackgroundTask(ctx.hub.drop, sub),
    )


async def _encoded(
    events: AsyncIterator[BaseEvent], ctx: Any, sub: Subscription
) -> AsyncIterator[str]:
    encoder = EventEncoder()
    try:
        async for event in events:
            yield encoder.encode(event)
    finally:
        ctx.hub.drop(sub)


async def _events(
    run: RunAgentInput, translator: RunTranslator, sink: RunSink, extra: dict[str, Any]
) -> AsyncIterator[BaseEvent]:
    yield RunStartedEvent(
        thread_id=run.thread_id, run_id=run.run_id, protocol_version=PROTOCOL_VERSION
    )
    reader = envelope_reader(sink, extra["groupId"])
    try:
        while not translator.done:
            # Once every turn has ended, only word of a hand-off is awaited, for a while.
            within = ROUTING_WAIT_S if translator.turns_over else None
            try:
                envelope = await reader.next(within)
            except StreamEnded as ended:
                yield RunErrorEvent(message=ended.message, code=ended.code)
                return
            if envelope is None:
                translator.give_up_routing()
                continue
            for event in translator.feed(envelope):
                yield event
            if translator.blocked:
                # Every turn still running waits on a person: the run ends here,
                # and a run that resumes the interrupts continues those turns.
                for event in translator.suspend():
                    yield event
                yield RunFinishedEvent(
                    thread_id=run.thread_id,
                    run_id=run.run_id,
                    result={**extra, "turns": translator.outcomes()},
                    outcome=RunFinishedInterruptOutcome(interrupts=translator.interrupts()),
                )
                return
    finally:
        await reader.aclose()
    yield RunFinishedEvent(
        thread_id=run.thread_id,
        run_id=run.run_id,
        result={**extra, "turns": translator.outcomes()},
    )
