"""OpenAI and OpenAI-compatible servers through the ``openai`` SDK.

Speaks Chat Completions, the one API that vLLM, Ollama, LM Studio, llama.cpp
and most hosted gateways implement as well, so the same class serves all of
them through ``base_url``. This is the only module that imports ``openai``.

The SDK's own retries are off (``max_retries=0``): the engine retries with
its own backoff and fallback chain, and two retry layers would multiply.
The SDK sends through its aiohttp transport (see :mod:`engine.providers.wire`).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import openai
from openai import AsyncOpenAI
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
    list_of,
    parse_arguments,
    retry_after_from,
    text_of,
    tls_context,
    transport_message,
)

# Chat Completions ``finish_reason`` values; any other one is END_TURN.
FINISH_REASONS: dict[str, ModelStop] = {
    "stop": ModelStop.END_TURN,
    "length": ModelStop.MAX_TOKENS,
    "tool_calls": ModelStop.TOOL_USE,
    "function_call": ModelStop.TOOL_USE,
    # Content omitted under the provider's content policy: never an answer.
    "content_filter": ModelStop.CONTENT_FILTER,
}

# Reasoning text is not part of the official schema; vLLM and DeepSeek send
# ``reasoning_content``, OpenRouter and newer vLLM send ``reasoning``. Some
# servers send both with the same text, so only the first one found is used.
_REASONING_FIELDS = ("reasoning_content", "reasoning")

# A mid-stream error payload has no HTTP status of its own. These are the
# statuses its error type or code would have had before the stream began, so
# that classify() sees the same input for the same failure either way.
_STREAM_ERROR_STATUS = {
    "server_error": 500,
    "internal_error": 500,
    "rate_limit_exceeded": 429,
    "rate_limit_error": 429,
    "requests": 429,
    "tokens": 429,
    "overloaded_error": 529,
    "service_unavailable": 503,
    "timeout": 504,
}

# Local servers ignore the key, but the SDK refuses to start without one.
_LOCAL_KEY = "not-needed"
# Given explicitly so the SDK never falls back to OPENAI_BASE_URL: which
# server a provider talks to is its caller's choice, not the environment's.
_OPENAI_URL = "https://api.openai.com/v1"


class OpenAIProvider:
    """A :class:`~engine.providers.base.Provider` for OpenAI-compatible Chat Completions.

    ``api_key`` falls back to ``OPENAI_API_KEY``; with a ``base_url`` (a local
    server) a missing key is replaced by a placeholder, since such servers do
    not check it. ``timeout`` is the SDK's timeout in seconds for each read,
    write and wait for a pooled connection, ``connect_timeout`` for opening a
    connection.
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        name: str = "openai",
        timeout: float = 600.0,
        extra_headers: Mapping[str, str] | None = None,
        connect_timeout: float = 10.0,
    ) -> None:
        self.name = name
        key = api_key or os.environ.get("OPENAI_API_KEY") or (_LOCAL_KEY if base_url else None)
        if key is None:
            raise ModelError(
                ErrorKind.AUTH,
                "no OpenAI API key: pass api_key, set OPENAI_API_KEY, or give a base_url",
                provider=name,
            )
        # The official API wants ``max_completion_tokens`` (reasoning models
        # reject ``max_tokens``); compatible servers reliably know only
        # ``max_tokens``. ``options["max_tokens_field"]`` overrides the guess.
        self._max_tokens_field = "max_tokens" if base_url else "max_completion_tokens"
        self._client = AsyncOpenAI(
            api_key=key,
            base_url=base_url or _OPENAI_URL,
            timeout=openai.Timeout(timeout, connect=connect_timeout),
            max_retries=0,
            default_headers=dict(extra_headers) if extra_headers else None,
            http_client=openai.DefaultAioHttpClient(verify=tls_context()),
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Stream one Chat Completions call as engine stream items.

        Ends with exactly one :class:`StopItem`; raises :class:`ModelError`
        for every failure. Cancellation propagates untouched.
        """
        reader = _ChunkReader()
        streaming = False  # the reply began: a broken connection is a cut stream
        max_tokens_field = request.options.get("max_tokens_field", self._max_tokens_field)
        try:
            # The SDK's own post, with the body built here: create() first walks
            # every message and tool against the SDK's typed-dict hints, about
            # 0.15 ms a message, so a 200-message history cost 30 ms of CPU
            # before each call. The body goes as bytes (``content``), encoded by pydantic-core
            # (a 130 KB history in 0.12 ms; the stdlib encoder the SDK would
            # use takes 0.6 ms).
            stream = await self._client.post(
                "/chat/completions",
                cast_to=object,
                content=to_json(request_body(request, max_tokens_field)),
                stream=True,
                # Chunks as parsed JSON: the SDK builds no model per chunk
                # (100 -> 25 us of CPU a chunk); _ChunkReader reads the fields.
                stream_cls=openai.AsyncStream[object],
            )
            async with stream:
                streaming = True
                async for chunk in stream:
                    for item in reader.feed(chunk):
                        yield item
        except Exception as exc:
            # SDK errors, transport errors, and malformed payloads (ValueError
            # from JSON decoding) are the server's doing; anything else is a
            # bug here and propagates as itself. CancelledError is not an
            # Exception, so it always passes through untouched.
            if not (
                isinstance(exc, openai.OpenAIError | ValueError | OSError)
                or is_transport_error(exc)
            ):
                raise
            raise cut_off(self._error(exc, request.model), exc, streaming) from exc
        for item in reader.finish(self.name, request.model):
            yield item

    async def embed(self, model: str, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text from the ``/embeddings`` endpoint, in order.

        Floats are asked for explicitly (the SDK would ask for base64, which
        some compatible servers do not speak); failures are ModelErrors.
        """
        try:
            reply = await self._client.embeddings.create(
                model=model, input=list(texts), encoding_format="float"
            )
        except Exception as exc:
            raise self._error(exc, model) from exc
        ordered = sorted(reply.data, key=lambda item: item.index)
        return [list(item.embedding) for item in ordered]

    async def aclose(self) -> None:
        """Close the SDK client and its connection pool."""
        await self._client.close()

    def _error(self, exc: Exception, model: str) -> ModelError:
        """Translate an SDK (or transport) exception into a classified ModelError."""
        status: int | None = None
        retry_after: float | None = None
        code: str | None = None
        if isinstance(exc, openai.APIConnectionError | OSError) or is_transport_error(exc):
            # APITimeoutError is a subclass: both mean the server never answered
            # in full, which is worth a retry like any other timeout.
            return ModelError(
                ErrorKind.TIMEOUT,
                transport_message(exc, exc.message if isinstance(exc, openai.APIError) else ""),
                provider=self.name,
                model=model,
            )
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            message = _body_message(exc.body) or exc.message
            code = exc.code
            retry_after = retry_after_from(exc.response.headers)
        elif isinstance(exc, openai.APIError):
            # An error payload inside an otherwise successful stream.
            message = exc.message
            code = exc.code
            by_type = _STREAM_ERROR_STATUS.get(exc.type or "")
            status = _STREAM_ERROR_STATUS.get(code or "", by_type)
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


def request_body(request: ModelRequest, max_tokens_field: str) -> dict[str, Any]:
    """The JSON body of one streamed Chat Completions call."""
    body: dict[str, Any] = {
        "model": request.model,
        "messages": to_openai_messages(request.system, request.messages),
        "stream": True,
        "stream_options": {"include_usage": True},
        # The field's name is chosen at run time (see the constructor).
        max_tokens_field: request.max_tokens,
    }
    if request.tools:
        body["tools"] = [to_openai_tool(t) for t in request.tools]
    if request.temperature is not None:
        body["temperature"] = request.temperature
    effort = request.options.get("reasoning_effort")
    if effort is not None:
        body["reasoning_effort"] = effort
    return body


def to_openai_tool(spec: ToolSpec) -> dict[str, Any]:
    """A tool spec as a Chat Completions function tool."""
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        },
    }


def to_openai_messages(system: str, messages: list[Message]) -> list[dict[str, Any]]:
    """The system prompt and transcript as Chat Completions messages.

    Thinking is dropped: OpenAI does not accept reasoning back, and
    compatible servers differ on whether they do.
    """
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    tool_images: list[dict[str, Any]] = []
    for msg in messages:
        if msg.role != "tool" and tool_images:
            out.append(_tool_images_message(tool_images))
            tool_images = []
        if msg.role == "user" and msg.images:
            parts: list[dict[str, Any]] = [{"type": "text", "text": msg.content or " "}]
            parts += [_image_part(i) for i in msg.images]
            out.append({"role": "user", "content": parts})
        elif msg.role == "user":
            out.append({"role": "user", "content": msg.content})
        elif msg.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": msg.content}
            if msg.tool_calls:
                # ``content`` stays even when empty: several compatible servers
                # reject an assistant message that lacks the key.
                entry["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": _dump_args(call.arguments)},
                    }
                    for call in msg.tool_calls
                ]
            out.append(entry)
        else:
            content = msg.content
            if msg.is_error and not content.lower().startswith("error"):
                # Chat Completions has no error flag on tool results; say it in words.
                content = f"Error: {content}"
            out.append({"role": "tool", "tool_call_id": msg.tool_call_id or "", "content": content})
            if msg.images:
                label = f"[images returned by {msg.tool_name or 'a tool'}]"
                tool_images.append({"type": "text", "text": label})
                tool_images += [_image_part(i) for i in msg.images]
    if tool_images:
        out.append(_tool_images_message(tool_images))
    return out


def _image_part(image: ImagePart) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{image.mime};base64,{image.data}"}}


def _tool_images_message(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Chat Completions takes only text in a tool result: a tool's images follow the
    results (every result of the call round first, as the API requires) as a user message."""
    return {"role": "user", "content": parts}


def _dump_args(arguments: dict[str, Any]) -> str:
    # Arguments that did not parse are sent back exactly as the model wrote them.
    if set(arguments) == {"_raw"} and isinstance(arguments["_raw"], str):
        return arguments["_raw"]
    return json.dumps(arguments, ensure_ascii=False)


# --- response translation ------------------------------------------------


@dataclass
class _PendingCall:
    id: str = ""
    name: str = ""
    parts: list[str] = field(default_factory=list)


class _ChunkReader:
    """Turns streamed chunks into stream items, accumulating tool-call fragments."""

    def __init__(self) -> None:
        self._calls: dict[int, _PendingCall] = {}
        self._last_key: int | None = None
        self._finish: str | None = None
        self._usage: Usage | None = None
        self._emitted_calls = False
        # The model's own refusal text (``delta.refusal``), which OpenAI sends
        # apart from the content; it says why, on a content-filter stop.
        self._refusal: list[str] = []

    def feed(self, chunk: object) -> list[StreamItem]:
        """The items of one chunk, a JSON object as the server sent it."""
        items: list[StreamItem] = []
        usage = field_of(chunk, "usage")
        if isinstance(usage, dict):
            self._usage = _usage(usage)
        for choice in list_of(field_of(chunk, "choices")):
            if field_of(choice, "index"):
                continue  # only one choice is ever requested
            delta = field_of(choice, "delta")
            if isinstance(delta, dict):
                reasoning = _reasoning(delta)
                if reasoning:
                    items.append(ThinkingDelta(reasoning))
                content = delta.get("content")
                if isinstance(content, str) and content:
                    items.append(TextDelta(content))
                refusal = delta.get("refusal")
                if isinstance(refusal, str) and refusal:
                    self._refusal.append(refusal)
                calls = list_of(delta.get("tool_calls"))
                legacy = delta.get("function_call")
                if calls or isinstance(legacy, dict):
                    # The call is yielded once whole; until then, say it is growing.
                    items.append(PROGRESS)
                for fragment in calls:
                    fn = field_of(fragment, "function")
                    index = field_of(fragment, "index")
                    self._add(
                        index if isinstance(index, int) else None,
                        text_of(field_of(fragment, "id")),
                        text_of(field_of(fn, "name")),
                        text_of(field_of(fn, "arguments")),
                    )
                if isinstance(legacy, dict):
                    # The deprecated single-function form, still sent by some servers.
                    self._add(
                        -1, None, text_of(legacy.get("name")), text_of(legacy.get("arguments"))
                    )
            finish = field_of(choice, "finish_reason")
            if isinstance(finish, str) and finish:
                self._finish = finish
                items.extend(self._flush())
        return items

    def finish(self, provider: str, model: str) -> list[StreamItem]:
        """The closing items; raises if the stream ended before the model did."""
        if self._finish is None:
            # Without a finish reason the reply may be cut short; a retry is
            # better than taking half an answer for a whole one.
            raise ModelError(
                ErrorKind.STREAM_CUT,
                "the stream ended before the model finished (no finish_reason)",
                provider=provider,
                model=model,
            )
        items: list[StreamItem] = list(self._flush())
        if self._usage is not None:
            items.append(UsageItem(self._usage))
        reason = FINISH_REASONS.get(self._finish, ModelStop.END_TURN)
        if reason is ModelStop.CONTENT_FILTER:
            # A filtered reply ends so even when it had begun a tool call.
            refusal = "".join(self._refusal).strip()
            said = f'finish_reason "{self._finish}"' + (f": {refusal}" if refusal else "")
            items.append(StopItem(reason, said))
            return items
        items.append(StopItem(ModelStop.TOOL_USE if self._emitted_calls else reason))
        return items

    def _add(
        self, index: int | None, call_id: str | None, name: str | None, arguments: str | None
    ) -> None:
        if index is None:
            # Servers that omit the index send each call whole; a new id is a new call.
            if call_id or self._last_key is None:
                index = max(self._calls, default=-1) + 1
            else:
                index = self._last_key
        pending = self._calls.setdefault(index, _PendingCall())
        self._last_key = index
        if call_id:
            pending.id = call_id
        if name and name != pending.name:
            # The name normally arrives once. A few gateways repeat it whole in
            # every fragment (equal, so kept once); fragments of it are joined.
            pending.name = pending.name + name if pending.name else name
        if arguments:
            pending.parts.append(arguments)

    def _flush(self) -> list[StreamItem]:
        items: list[StreamItem] = []
        for key in sorted(self._calls):
            call = self._calls[key]
            items.append(
                ToolCallEvent(
                    id=call.id or f"call_{uuid.uuid4().hex[:24]}",
                    name=call.name,
                    arguments=parse_arguments("".join(call.parts)),
                )
            )
        self._emitted_calls = self._emitted_calls or bool(items)
        self._calls.clear()
        self._last_key = None
        return items


def _reasoning(delta: dict[str, Any]) -> str | None:
    for name in _REASONING_FIELDS:
        value = delta.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def _usage(raw: dict[str, Any]) -> Usage:
    details = raw.get("prompt_tokens_details")
    cached = int_of(field_of(details, "cached_tokens")) or 0
    written = int_of(field_of(details, "cache_write_tokens")) or 0
    prompt = int_of(raw.get("prompt_tokens")) or 0
    # OpenAI counts cached tokens inside prompt_tokens; the engine's Usage
    # counts them apart (as Anthropic does), so pricing never charges twice.
    return Usage(
        input_tokens=max(0, prompt - cached - written),
        output_tokens=int_of(raw.get("completion_tokens")) or 0,
        cache_read_tokens=cached,
        cache_write_tokens=written,
    )


# --- errors --------------------------------------------------------------


def _body_message(body: object) -> str | None:
    # The SDK hands over the inner ``error`` object; some servers send a bare string.
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    if isinstance(body, str) and body:
        return body
    return None
