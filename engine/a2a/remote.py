"""One remote A2A agent: its card read lazily in the background, its calls streamed.

A :class:`RemoteAgent` belongs to one process (a VP host) and serves every
turn of it. Nothing is fetched when it is made: the card is read in the
background when a turn that may call the agent starts, or when a call
needs it, under ``card_timeout_s``; a card that cannot be read is retried
after a back-off that doubles. A turn never waits for a card unless it
calls the agent, so an agent that is down or slow costs the other turns
nothing.

The SDK (``a2a-sdk``) is imported here only: a process without agents
configured never loads it.

States: ``idle`` (card never asked for) → ``fetching`` → ``ready``; a card
that cannot be read is ``failed`` with the reason, ``closed`` is final.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum

import httpx
from a2a.client import A2AClientTimeoutError, ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.types.a2a_pb2 import (
    AgentCard,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)
from a2a.utils.errors import A2AError

from engine.a2a.config import AgentSpec

log = logging.getLogger(__name__)

# Remote conversations remembered per agent (one per VP conversation that called it).
MAX_CONTEXTS = 1000
_FAILED = {TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_REJECTED}
_ASKS = {TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}


class AgentState(StrEnum):
    IDLE = "idle"
    FETCHING = "fetching"
    READY = "ready"
    FAILED = "failed"
    CLOSED = "closed"


class AgentUnavailable(Exception):
    """The agent cannot be called now; the message says why (shown to the model)."""


class RemoteFailed(Exception):
    """The call reached the agent and failed; the message says why (shown to the model)."""


@dataclass(frozen=True, slots=True)
class CallResult:
    """What one call gave back: its text, and how the remote task ended."""

    text: str
    state: str
    # The agent asks for more input (or for authorisation) before it goes on.
    needs_input: bool = False


OnText = Callable[[str], Awaitable[None]]


def describe(exc: BaseException) -> str:
    """A short, secret-free account of an error (request headers are never part of it)."""
    if isinstance(exc, httpx.ConnectError):
        return "not reachable (connection refused)"
    if isinstance(exc, httpx.TimeoutException | A2AClientTimeoutError):
        return "it did not answer in time"
    if isinstance(exc, httpx.HTTPStatusError):
        return f"HTTP {exc.response.status_code}"
    if isinstance(exc, A2AError):
        text = str(getattr(exc, "message", None) or exc).split("\n", 1)[0]
    else:
        text = str(exc) or type(exc).__name__
    return text if len(text) <= 300 else text[:300] + "..."


def _text(parts: Iterable[Part]) -> str:
    out = []
    for part in parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            out.append(part.text)
        elif kind == "data":
            from google.protobuf.json_format import MessageToJson

            out.append(MessageToJson(part.data, indent=None))
        elif kind == "url":
            out.append(f"[file {part.filename or ''} <{part.url}>]".replace("  ", " "))
        elif kind == "raw":
            mime = part.media_type or "binary"
            out.append(f"[file {part.filename or ''}: {mime}, {len(part.raw):,} bytes]")
    return "".join(out)


class RemoteAgent:
    """One configured agent (see the module notes)."""

    def __init__(
        self,
        name: str,
        spec: AgentSpec,
        *,
        card_timeout_s: float,
        backoff_s: tuple[float, float],
    ) -> None:
        self.name = name
        self.spec = spec
        self.card_timeout_s = card_timeout_s
        self.backoff_s = backoff_s
        self.state = AgentState.IDLE
        self.error: str | None = None
        self.card: AgentCard | None = None
        self.failures = 0
        self._retry_at = 0.0
        self._lock = asyncio.Lock()
        self._fetch: asyncio.Task[None] | None = None
        self._http: httpx.AsyncClient | None = None
        # The remote conversation each caller's conversation continues.
        self._contexts: OrderedDict[str, str] = OrderedDict()

    def __repr__(self) -> str:
        return f"RemoteAgent({self.name!r}, {self.state})"

    def retry_in(self) -> float:
        """Seconds until the next attempt to read a failed card may start (0: now)."""
        if self.state is not AgentState.FAILED:
            return 0.0
        return max(0.0, self._retry_at - time.monotonic())

    # -- the card --------------------------------------------------------------------
    def start(self) -> None:
        """Read the card in the background, unless it is read, being read, or in back-off."""
        if self.state in (AgentState.READY, AgentState.CLOSED) or self.retry_in() > 0:
            return
        if self._fetch is not None and not self._fetch.done():
            return
        self._fetch = asyncio.get_running_loop().create_task(
            self._quietly(), name=f"a2a-card:{self.name}"
        )

    async def _quietly(self) -> None:
        with contextlib.suppress(AgentUnavailable):
            await self.ensure()

    async def settled(self) -> None:
        """Wait until a background read of the card has ended (read or failed)."""
        if self._fetch is not None:
            await asyncio.gather(self._fetch, return_exceptions=True)

    async def ensure(self) -> AgentCard:
        """The card, read first when needed; raises AgentUnavailable saying why not."""
        if self.card is not None and self.state is AgentState.READY:
            return self.card
        async with self._lock:
            if self.card is not None and self.state is AgentState.READY:
                return self.card
            if self.state is AgentState.CLOSED:
                raise AgentUnavailable(f"A2A agent '{self.name}' is shut down")
            if self.retry_in() > 0:
                raise AgentUnavailable(self.why_not())
            self.state = AgentState.FETCHING
            try:
                async with asyncio.timeout(self.card_timeout_s):
                    card = await self._read_card()
            except TimeoutError:
                self._failed(f"its card did not come within {self.card_timeout_s:g}s")
                raise AgentUnavailable(self.why_not()) from None
            except Exception as exc:
                self._failed(f"its card could not be read: {describe(exc)}")
                raise AgentUnavailable(self.why_not()) from None
            self.card, self.state, self.error, self.failures = card, AgentState.READY, None, 0
            log.info("A2A agent %s ready: %s, %d skills", self.name, card.name, len(card.skills))
            return card

    def why_not(self) -> str:
        """Why the agent cannot be called now, as the model and the listing read it."""
        if self.state is AgentState.CLOSED:
            return f"A2A agent '{self.name}' is shut down"
        wait = self.retry_in()
        later = f"; next attempt in {wait:.0f}s" if wait >= 1 else ""
        return f"A2A agent '{self.name}' is unavailable: {self.error}{later}"

    def http(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(
                headers=self.spec.request_headers(),
                timeout=httpx.Timeout(self.card_timeout_s, read=None),
            )
        return self._http

    async def _read_card(self) -> AgentCard:
        response = await self.http().get(self.spec.card_url)
        response.raise_for_status()
        return parse_agent_card(response.json())

    def _failed(self, reason: str) -> None:
        self.failures += 1
        first, most = self.backoff_s
        self._retry_at = time.monotonic() + min(most, first * 2 ** (self.failures - 1))
        self.state = AgentState.FAILED
        self.error = reason
        log.warning("A2A agent %s failed: %s", self.name, reason)

    # -- calls -----------------------------------------------------------------------
    async def call(self, text: str, conversation: str, on_text: OnText) -> CallResult:
        """Send ``text`` and stream the answer to ``on_text``; the whole answer at the end.

        Raises AgentUnavailable (no card, or the agent cannot be reached) or
        RemoteFailed (the agent answered with an error or a failed task).
        """
        card = await self.ensure()
        client = ClientFactory(ClientConfig(httpx_client=self.http(), streaming=True)).create(card)
        message = Message(
            message_id=uuid.uuid4().hex,
            role=Role.ROLE_USER,
            parts=[Part(text=text)],
            context_id=self._contexts.get(conversation, ""),
        )
        stream = _Stream(on_text)
        try:
            async for event in client.send_message(SendMessageRequest(message=message)):
                await stream.take(event)
        except httpx.ConnectError:
            raise AgentUnavailable(
                f"A2A agent '{self.name}' is not reachable (connection refused)"
            ) from None
        except (A2AError, httpx.HTTPError) as exc:
            raise RemoteFailed(f"A2A agent '{self.name}' failed: {_http_reason(exc)}") from None
        if stream.context_id:
            self._remember(conversation, stream.context_id)
        return stream.result(self.name)

    def _remember(self, conversation: str, context_id: str) -> None:
        self._contexts[conversation] = context_id
        self._contexts.move_to_end(conversation)
        while len(self._contexts) > MAX_CONTEXTS:
            self._contexts.popitem(last=False)

    async def aclose(self) -> None:
        self.state = AgentState.CLOSED
        if self._fetch is not None and not self._fetch.done():
            self._fetch.cancel()
            await asyncio.gather(self._fetch, return_exceptions=True)
        if self._http is not None:
            await self._http.aclose()
            self._http = None


def _http_reason(exc: BaseException) -> str:
    text = describe(exc)
    if "401" in text or "403" in text:
        return f"{text} (the agent refused its credentials: check its token or headers)"
    return text


class _Stream:
    """The events of one call, folded into its answer as they come."""

    def __init__(self, on_text: OnText) -> None:
        self._on_text = on_text
        self.artifacts: OrderedDict[str, str] = OrderedDict()
        self.status_text = ""
        self.state = TaskState.TASK_STATE_UNSPECIFIED
        self.context_id = ""
        self.message = ""

    async def take(self, event: StreamResponse) -> None:
        kind = event.WhichOneof("payload")
        if kind == "message":
            self.context_id = event.message.context_id or self.context_id
            self.message += _text(event.message.parts)
            self.state = TaskState.TASK_STATE_COMPLETED
            await self._on_text(_text(event.message.parts))
        elif kind == "task":
            task = event.task
            self.context_id = task.context_id or self.context_id
            self._status(task.status)
            for artifact in task.artifacts:
                self.artifacts[artifact.artifact_id] = _text(artifact.parts)
        elif kind == "artifact_update":
            update = event.artifact_update
            self.context_id = update.context_id or self.context_id
            piece = _text(update.artifact.parts)
            key = update.artifact.artifact_id
            before = self.artifacts.get(key, "") if update.append else ""
            self.artifacts[key] = before + piece
            await self._on_text(piece)
        elif kind == "status_update":
            self.context_id = event.status_update.context_id or self.context_id
            said = self._status(event.status_update.status)
            if said and self.state not in _FAILED:
                await self._on_text(said + "\n")

    def _status(self, status: object) -> str:
        self.state = status.state  # type: ignore[attr-defined]
        said = _text(status.message.parts) if status.HasField("message") else ""  # type: ignore[attr-defined]
        if said:
            self.status_text = said
        return said

    def result(self, name: str) -> CallResult:
        state = TaskState.Name(self.state).removeprefix("TASK_STATE_").lower()
        if self.state in _FAILED:
            why = self.status_text or "no reason given"
            raise RemoteFailed(f"A2A agent '{name}' reported the task {state}: {why}")
        if self.state == TaskState.TASK_STATE_CANCELED:
            raise RemoteFailed(f"A2A agent '{name}' cancelled the task")
        text = self.message or "".join(self.artifacts.values()) or self.status_text
        return CallResult(text.strip("\n"), state, needs_input=self.state in _ASKS)
