"""Anthropic's Messages API through the ``anthropic`` SDK.

This is the only module that imports ``anthropic``. It streams a Messages
call through the SDK's ``post`` and reads the raw events itself: the SDK's
higher-level stream helper would accumulate a full message the engine does
not need and hide the per-block boundaries that tell when a tool call is
complete.

The SDK's own retries are off (``max_retries=0``): the engine retries with
its own backoff and fallback chain, and two retry layers would multiply.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import anthropic
from anthropic import AsyncAnthropic
from anthropic import types as wire
from pydantic_core import to_json

from engine.errors import ErrorKind, ModelError, classify
from engine.events import TextDelta, ThinkingDelta, ToolCallEvent
from engine.messages import ImagePart, Message, Usage
from engine.providers.base import (
    PROGRESS,
    ModelRequest,
    ModelStop,
    StopItem,
    StreamItem,
    ToolSpec,
    UsageItem,
)
from engine.providers.wire import (
    cut_off,
    field_of,
    int_of,
    is_transport_error,
    parse_arguments,
    retry_after_from,
    text_of,
    tls_context,
    transport_message,
)

# Messages API ``stop_reason`` values; any other one (``pause_turn``...) is END_TURN.
STOP_REASONS: dict[str, ModelStop] = {
    "end_turn": ModelStop.END_TURN,
    "stop_sequence": ModelStop.END_TURN,
    "max_tokens": ModelStop.MAX_TOKENS,
    "tool_use": ModelStop.TOOL_USE,
    # Anthropic's streaming classifiers stopped the reply under its usage
    # policy; ``stop_details`` may say which category and why.
    "refusal": ModelStop.CONTENT_FILTER,
    # The context window filled while generating: to the engine that is a
    # length stop, and continuing then overflows into compaction as it should.
    "model_context_window_exceeded": ModelStop.MAX_TOKENS,
}

# An ``error`` event arrives inside a 200 response, so its HTTP status says
# nothing. These are the statuses Anthropic uses for the same error types
# before a stream starts, so classify() sees the same input either way.
_ERROR_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


class AnthropicProvider:
    """A :class:`~engine.providers.base.Provider` for Anthropic's Messages API.

    ``api_key`` falls back to what the SDK finds (``ANTHROPIC_API_KEY`` and
    its other credential sources). Request options understood:
    ``thinking_budget`` (int, enables extended thinking with that budget) and
    ``thinking="adaptive"``. ``timeout`` is the SDK's timeout in seconds for
    each read, write and wait for a pooled connection, ``connect_timeout`` for
    opening a connection.
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        name: str = "anthropic",
        timeout: float = 600.0,
        extra_headers: Mapping[str, str] | None = None,
        connect_timeout: float = 10.0,
    ) -> None:
        self.name = name
        try:
            self._client = AsyncAnthropic(
                api_key=api_key or None,
                base_url=base_url,
                timeout=anthropic.Timeout(timeout, connect=connect_timeout),
                max_retries=0,
                default_headers=dict(extra_headers) if extra_headers else None,
                http_client=anthropic.DefaultAioHttpClient(verify=tls_context()),
            )
        except anthropic.AnthropicError as exc:
            # Without an api_key the SDK reads credential profiles from disk
            # and raises on a broken one; to the engine that is an auth problem.
            raise ModelError(ErrorKind.AUTH, str(exc), provider=name) from exc

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Stream one Messages call as engine stream items.

        Ends with exactly one :class:`StopItem`; raises :class:`ModelError`
        for every failure. Cancellation propagates untouched.
        """
        self._check_credentials(request.model)
        reader = _EventReader()
        streaming = False  # the reply began: a broken connection is a cut stream
        try:
            # The SDK's own post, with the body built and encoded here:
            # messages.create() would copy the whole request (every message
            # of the history) into a fresh tree and encode it with the stdlib
            # encoder, at every model call. The events are still the SDK's.
            stream = await self._client.post(
                "/v1/messages",
                cast_to=wire.Message,
                content=to_json(request_body(request)),
                stream=True,
                # Events as parsed JSON: the SDK builds no model per event
                # (16 -> 0.1 us an event); _EventReader reads the fields.
                stream_cls=anthropic.AsyncStream[object],
            )
            async with stream:
                streaming = True
                async for event in stream:
                    for item in reader.feed(event):
                        yield item
        except Exception as exc:
            # SDK errors, transport errors, and malformed payloads (ValueError
            # from JSON decoding) are the server's doing; anything else is a
            # bug here and propagates as itself. CancelledError is not an
            # Exception, so it always passes through untouched.
            if not (
                isinstance(exc, anthropic.AnthropicError | ValueError | OSError)
                or is_transport_error(exc)
            ):
                raise
            raise cut_off(self._error(exc, request.model), exc, streaming) from exc
        for item in reader.finish(self.name, request.model):
            yield item

    async def aclose(self) -> None:
        """Close the SDK client and its connection pool."""
        await self._client.close()

    def _check_credentials(self, model: str) -> None:
        # Without any credential the SDK raises a bare TypeError at request
        # time; saying so here gives the engine an auth error it can report.
        client = self._client
        if not (client.api_key or client.auth_token or getattr(client, "credentials", None)):
            raise ModelError(
                ErrorKind.AUTH,
                "no Anthropic API key: pass api_key or set ANTHROPIC_API_KEY",
                provider=self.name,
                model=model,
            )

    def _error(self, exc: Exception, model: str) -> ModelError:
        """Translate an SDK (or transport) exception into a classified ModelError."""
        if isinstance(exc, anthropic.APIConnectionError | OSError) or is_transport_error(exc):
            # APITimeoutError is a subclass: both mean the server never answered
            # in full, which is worth a retry like any other timeout.
            sdk_message = ""
            if isinstance(exc, anthropic.APIError):
                # The SDK's timeout text is a paragraph with a link; keep it short.
                timed_out = isinstance(exc, anthropic.APITimeoutError)
                sdk_message = "request timed out" if timed_out else "connection error"
            return ModelError(
                ErrorKind.TIMEOUT,
                transport_message(exc, sdk_message),
                provider=self.name,
                model=model,
            )
        status: int | None = None
        retry_after: float | None = None
        code: str | None = None
        if isinstance(exc, anthropic.APIStatusError):
            error_type, message = _error_fields(exc.body)
            message = message or exc.message
            code = getattr(exc, "error_code", None)
            if exc.status_code >= 400:
                status = exc.status_code
                retry_after = retry_after_from(exc.response.headers)
            else:
                status = _ERROR_TYPE_STATUS.get(error_type or "")
        else:
            message = f"{type(exc).__name__}: {exc}"
        return ModelError(
            classify(status, message, code),
            message,
            status=status,
            retry_after=retry_after,
            provider=self.name,
            model=model,
        )


# --- request translation -------------------------------------------------


def to_anthropic_tool(spec: ToolSpec) -> dict[str, Any]:
    """A tool spec in the Messages API shape."""
    return {"name": spec.name, "description": spec.description, "input_schema": spec.parameters}


def to_anthropic_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """The transcript as Messages API content blocks.

    Tool results become ``tool_result`` blocks in user messages. Consecutive
    messages of one role are merged, because the API requires user and
    assistant to alternate, and in a merged user message the tool results
    come first, because the API requires that too.
    """
    out: list[dict[str, Any]] = []
    for msg in messages:
        role = "assistant" if msg.role == "assistant" else "user"
        blocks = _assistant_blocks(msg) if role == "assistant" else _user_blocks(msg)
        if not blocks:
            continue  # the API rejects empty content, and an empty turn says nothing
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    for entry in out:
        if entry["role"] == "user":
            blocks = entry["content"]
            results = [b for b in blocks if b["type"] == "tool_result"]
            entry["content"] = results + [b for b in blocks if b["type"] != "tool_result"]
    return out


def _user_blocks(msg: Message) -> list[dict[str, Any]]:
    if msg.role == "tool":
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": msg.tool_call_id or "",
            "content": msg.content,
        }
        if msg.images:
            text = [{"type": "text", "text": msg.content}] if msg.content else []
            block["content"] = text + [_image_block(i) for i in msg.images]
        if msg.is_error:
            block["is_error"] = True
        return [block]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": msg.content}] if msg.content else []
    blocks += [_image_block(i) for i in msg.images]
    return blocks


def _image_block(image: ImagePart) -> dict[str, Any]:
    source = {"type": "base64", "media_type": image.mime, "data": image.data}
    return {"type": "image", "source": source}


def _assistant_blocks(msg: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    # Thinking goes back first and only with its signature: the API verifies
    # it, and thinking from another provider has none to verify.
    for thought in msg.thinking:
        if thought.signature:
            blocks.append(
                {"type": "thinking", "thinking": thought.text, "signature": thought.signature}
            )
    if msg.content:
        blocks.append({"type": "text", "text": msg.content})
    for call in msg.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        )
    return blocks


def request_body(request: ModelRequest) -> dict[str, Any]:
    """The JSON body of one streamed Messages call."""
    max_tokens, thinking = _thinking(request)
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": max_tokens,
        "messages": to_anthropic_messages(request.messages),
        "stream": True,
    }
    if request.system:
        body["system"] = request.system
    if request.tools:
        body["tools"] = [to_anthropic_tool(t) for t in request.tools]
    if thinking is not None:
        body["thinking"] = thinking
    elif request.temperature is not None:
        # The API refuses a temperature together with thinking.
        body["temperature"] = request.temperature
    return body


def _thinking(request: ModelRequest) -> tuple[int, dict[str, Any] | None]:
    """``max_tokens`` and the ``thinking`` parameter for this request."""
    max_tokens = request.max_tokens
    if request.options.get("thinking") == "adaptive":
        return max_tokens, {"type": "adaptive"}
    budget = request.options.get("thinking_budget")
    if not budget:
        return max_tokens, None
    budget = int(budget)
    if budget >= max_tokens:
        # The API requires budget < max_tokens. Treat max_tokens as the room
        # left for the answer, on top of the thinking budget.
        max_tokens = budget + max_tokens
    return max_tokens, {"type": "enabled", "budget_tokens": budget}


# --- response translation ------------------------------------------------


@dataclass
class _ToolBlock:
    id: str
    name: str
    initial: dict[str, Any]
    parts: list[str] = field(default_factory=list)


class _EventReader:
    """Turns stream events (parsed JSON) into stream items, accumulating tool input per block."""

    def __init__(self) -> None:
        self._tools: dict[int, _ToolBlock] = {}
        self._usage = Usage()
        self._stop: str | None = None
        # The ``stop_details`` of the stop (a refusal's category and explanation).
        self._details: object = None
        self._emitted_calls = False

    def feed(self, event: object) -> list[StreamItem]:
        """The items of one event, a JSON object as the server sent it."""
        kind = field_of(event, "type")
        # A content block's index; a block without one is block 0.
        index = int_of(field_of(event, "index")) or 0
        if kind == "content_block_delta":
            return self._delta(index, field_of(event, "delta"))
        if kind == "content_block_start":
            return self._start(index, field_of(event, "content_block"))
        if kind == "content_block_stop":
            return self._stop_block(index)
        if kind == "message_start":
            self._usage = _merge_usage(self._usage, field_of(field_of(event, "message"), "usage"))
        elif kind == "message_delta":
            delta = field_of(event, "delta")
            self._stop = text_of(field_of(delta, "stop_reason")) or self._stop
            self._details = field_of(delta, "stop_details") or self._details
            self._usage = _merge_usage(self._usage, field_of(event, "usage"))
        return []

    def finish(self, provider: str, model: str) -> list[StreamItem]:
        """The closing items; raises if the stream ended before the model did."""
        if self._stop is None:
            # No stop reason means the stream was cut; a retry is better than
            # taking half an answer for a whole one.
            raise ModelError(
                ErrorKind.STREAM_CUT,
                "the stream ended before the model finished (no stop_reason)",
                provider=provider,
                model=model,
            )
        reason = STOP_REASONS.get(self._stop, ModelStop.END_TURN)
        if reason is ModelStop.CONTENT_FILTER:
            # A refused reply ends so even when it had begun a tool call.
            return [UsageItem(self._usage), StopItem(reason, self._refusal())]
        return [
            UsageItem(self._usage),
            StopItem(ModelStop.TOOL_USE if self._emitted_calls else reason),
        ]

    def _refusal(self) -> str:
        """The stop in the API's words: its reason, and the category and explanation if given."""
        said = f'stop_reason "{self._stop}"'
        category = text_of(field_of(self._details, "category"))
        if category:
            said += f" (category {category})"
        explanation = text_of(field_of(self._details, "explanation"))
        return f"{said}: {explanation}" if explanation else said

    def _start(self, index: int, block: object) -> list[StreamItem]:
        kind = field_of(block, "type")
        if kind == "tool_use":
            initial = field_of(block, "input")
            self._tools[index] = _ToolBlock(
                text_of(field_of(block, "id")) or "",
                text_of(field_of(block, "name")) or "",
                dict(initial) if isinstance(initial, dict) else {},
            )
            # The call is yielded once whole; until then, say it is growing.
            return [PROGRESS]
        if kind == "text":
            text = text_of(field_of(block, "text"))
            return [TextDelta(text)] if text else []
        if kind == "thinking":
            thinking = text_of(field_of(block, "thinking")) or ""
            signature = text_of(field_of(block, "signature"))
            return (
                [ThinkingDelta(thinking, signature=signature or None)]
                if thinking or signature
                else []
            )
        # Redacted thinking and server-side tool blocks have no engine form; skipped.
        return []

    def _delta(self, index: int, delta: object) -> list[StreamItem]:
        kind = field_of(delta, "type")
        if kind == "text_delta":
            text = text_of(field_of(delta, "text"))
            return [TextDelta(text)] if text else []
        if kind == "thinking_delta":
            thinking = text_of(field_of(delta, "thinking"))
            return [ThinkingDelta(thinking)] if thinking else []
        if kind == "signature_delta":
            return [ThinkingDelta("", signature=text_of(field_of(delta, "signature")) or "")]
        if kind == "input_json_delta":
            tool = self._tools.get(index)
            if tool is not None:
                tool.parts.append(text_of(field_of(delta, "partial_json")) or "")
                return [PROGRESS]
        return []

    def _stop_block(self, index: int) -> list[StreamItem]:
        tool = self._tools.pop(index, None)
        if tool is None:
            return []
        raw = "".join(tool.parts)
        arguments = parse_arguments(raw) if raw.strip() else tool.initial
        self._emitted_calls = True
        return [ToolCallEvent(id=tool.id, name=tool.name, arguments=arguments)]


def _merge_usage(current: Usage, raw: object) -> Usage:
    """``current`` updated with the counts ``raw`` (a usage object) carries.

    ``message_start`` has the input side, ``message_delta`` the output and,
    on newer servers, final input counts too; whichever came last wins.
    """

    def pick(name: str, old: int) -> int:
        value = int_of(field_of(raw, name))
        return old if value is None else value

    return Usage(
        input_tokens=pick("input_tokens", current.input_tokens),
        output_tokens=pick("output_tokens", current.output_tokens),
        cache_read_tokens=pick("cache_read_input_tokens", current.cache_read_tokens),
        cache_write_tokens=pick("cache_creation_input_tokens", current.cache_write_tokens),
    )


# --- errors --------------------------------------------------------------


def _error_fields(body: object) -> tuple[str | None, str | None]:
    """``(error.type, error.message)`` from an Anthropic error body."""
    if isinstance(body, dict):
        inner = body.get("error")
        if isinstance(inner, dict):
            kind, message = inner.get("type"), inner.get("message")
            return (
                kind if isinstance(kind, str) else None,
                message if isinstance(message, str) else None,
            )
    if isinstance(body, str) and body:
        return None, body
    return None, None
