"""One model call with retries and a fallback chain across models and providers.

Retry on the same model only for transient failures (rate limit, overload,
timeout, server error), with exponential backoff and jitter that yields to
the server's ``Retry-After``. A rate limit on a pooled key is waited out
through the key's cooldown instead (as long as the provider asked): when
every key of the provider is cooling for a rate limit that ends within
``RetryPolicy.max_retry_after``, the call waits and says so (a QUEUED
notice), and past it the call moves on with a message saying when to try
again. Never retry, and never fail over, once the
failed attempt emitted a tool call: the call may already have had an effect.
User aborts and context overflow are never failed over either; the loop
handles them.

Every attempt runs under the deadlines of :mod:`engine.timeouts`: a model
that sends no first token in time, or falls silent mid-reply, fails the
attempt with a TIMEOUT, and the rules above take it from there.

Text streamed by an attempt that then fails (a stall halfway through a
reply, a cut connection, an error event) was provisional. The attempt is
still retried or failed over, as long as it emitted no tool call: the next
attempt answers from the start, the RETRY or FALLBACK notice carries
``discard_partial`` so clients drop the text they were shown, and
``on_discard`` tells the engine to drop what it kept for an abort. The
answer that is recorded is only ever the one attempt that completed.

A reply the provider's content policy stopped mid-stream (a
``content_filter`` stop) completes as a stream but is no answer: the call
raises :class:`ContentRefused`, a ``content_policy`` error like a refusal
before the stream, neither retried nor failed over (any model would refuse
it too). The error holds the call's result, so its usage is still counted
and what it streamed before the refusal stays the turn's text.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable
from contextlib import aclosing, nullcontext
from dataclasses import dataclass, field

from opentelemetry.trace import SpanKind

from engine.access import ProviderAccess
from engine.attachments import for_model
from engine.call_context import CallContext
from engine.credentials import ROTATE_ON, Credential
from engine.errors import (
    NO_FAILOVER,
    RETRYABLE,
    AllModelsFailed,
    Attempt,
    ErrorKind,
    ModelError,
    SinkFailed,
)
from engine.events import (
    EngineEvent,
    NoticeEvent,
    NoticeKind,
    TextDelta,
    ThinkingDelta,
    ToolCallEvent,
)
from engine.messages import Thinking, ToolCall, Usage
from engine.providers.base import (
    ModelRequest,
    ModelStop,
    ProgressItem,
    StopItem,
    ToolSpec,
    UsageItem,
)
from engine.providers.registry import ProviderRegistry
from engine.timeouts import StreamTimeouts, watch
from telemetry import tracing

log = logging.getLogger(__name__)

Emit = Callable[[EngineEvent], Awaitable[None]]
Sleep = Callable[[float], Awaitable[None]]


def try_again(wait: float, now: float) -> str:
    """When a person may try again, ``wait`` seconds after ``now`` (epoch seconds)."""
    at = time.strftime("%H:%M:%S UTC", time.gmtime(now + wait))
    if wait < 90:
        return f"try again in about {math.ceil(wait)} s (after {at})"
    return f"try again in about {math.ceil(wait / 60)} min (after {at})"


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 3
    base_delay: float = 1.0
    max_delay: float = 30.0
    jitter: float = 0.25
    # A Retry-After (or a rate limit on every key) longer than this is not
    # waited for: the next model is tried, or the turn ends saying when to try again.
    max_retry_after: float = 60.0

    def delay(self, retry: int, retry_after: float | None, rand: float) -> float | None:
        """Seconds before retry number ``retry`` (1-based); None means do not wait."""
        if retry_after is not None:
            return retry_after if retry_after <= self.max_retry_after else None
        base = min(self.max_delay, self.base_delay * (2 ** (retry - 1)))
        return max(0.0, base * (1 + self.jitter * (2 * rand - 1)))


@dataclass(slots=True)
class CallResult:
    """What one successful model call produced."""

    model: str  # provider:name of the candidate that answered
    text: str = ""
    thinking: list[Thinking] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop: ModelStop = ModelStop.END_TURN
    # The provider's account of the stop, where it gave one (see StopItem.message).
    stop_message: str | None = None
    attempts: list[Attempt] = field(default_factory=list)


@dataclass(slots=True)
class CallSpec:
    system: str
    messages: list
    tools: list[ToolSpec]
    max_tokens: int
    context: CallContext = field(default_factory=CallContext)


class ContentRefused(ModelError):
    """The provider's content policy stopped the reply of a call that streamed to its end.

    A ``content_policy`` error that names the provider and the model, gives
    the provider's own account of the stop and says how much of the reply came
    before it. ``result`` is the call as it ended (its text, usage and model),
    for the caller to count and to show. Across a process boundary it arrives
    as a plain :class:`ModelError` of the same kind and message.
    """

    def __init__(self, result: CallResult) -> None:
        vendor, _, name = result.model.partition(":")
        said = result.stop_message or "no reason given"
        message = (
            f"{vendor} refused the content: it stopped {name}'s reply "
            f"under its content policy ({said})."
        )
        if result.text:
            message += (
                f" The reply was cut off after {len(result.text)} characters;"
                " what it said before is kept."
            )
        message += " Not retried or sent to another model, which would refuse it too."
        super().__init__(ErrorKind.CONTENT_POLICY, message, provider=vendor, model=name)
        self.result = result


class _AttemptFailed(Exception):
    def __init__(self, error: ModelError, emitted_tool_call: bool) -> None:
        self.error = error
        self.emitted_tool_call = emitted_tool_call


class ModelCaller:
    """Runs a call against a chain of ``provider:model`` candidates.

    ``timeouts`` bounds each attempt's wait for the first token and every
    silence after it (the defaults of :class:`StreamTimeouts` when omitted).
    """

    def __init__(
        self,
        registry: ProviderRegistry,
        chain: list[str],
        policy: RetryPolicy | None = None,
        *,
        timeouts: StreamTimeouts | None = None,
        sleep: Sleep = asyncio.sleep,
        rand: Callable[[], float] = random.random,
        sees_images: Callable[[str], bool] = lambda model: False,
        access: ProviderAccess | None = None,
    ) -> None:
        if not chain:
            raise ValueError("the model chain is empty")
        # Deduplicate while keeping order: the same model twice is one candidate.
        self.chain = list(dict.fromkeys(chain))
        self.registry = registry
        self.policy = policy or RetryPolicy()
        self.timeouts = timeouts or StreamTimeouts()
        self._sleep = sleep
        self._rand = rand
        self.sees_images = sees_images
        self.access = access

    async def _credential(self, model: str, tried: set[str]) -> Credential | ModelError | None:
        """The credential for the next attempt on ``model``, or why there is none to use."""
        pool = self.access.pool(model) if self.access is not None else None
        if pool is None:
            return None
        picked = await pool.pick(frozenset(tried))
        if picked is None or isinstance(picked, Credential):
            return picked
        now = pool.clock()
        wait = max(0.0, picked.until - now)
        return ModelError(
            ErrorKind(picked.reason),
            f"every {pool.provider} credential is cooling down ({picked.reason}); "
            f"{try_again(wait, now)}",
            retry_after=wait,
            provider=pool.provider,
        )

    async def _wait_for_rate_limit(
        self, model: str, cooling: ModelError, emit: Emit | None
    ) -> bool:
        """Wait out a rate limit on every credential if it ends within the bound.

        The bound is ``RetryPolicy.max_retry_after`` (the ``rate_limit_wait``
        setting). While waiting the VP shows it (a QUEUED notice, as for a
        full provider lane). False when the turn must not wait.
        """
        wait = cooling.retry_after or 0.0
        if cooling.kind is not ErrorKind.RATE_LIMIT or wait > self.policy.max_retry_after:
            return False
        about = math.ceil(wait)
        await self._notice(
            emit,
            NoticeKind.QUEUED,
            f"waiting for the provider's rate limit (about {about} s)",
            {"model": model, "waiting": True, "reason": "rate_limit", "wait_s": about},
        )
        await self._sleep(wait)
        await self._notice(
            emit,
            NoticeKind.QUEUED,
            f"{model}: the rate limit is over; going on",
            {"model": model, "waiting": False, "reason": "rate_limit"},
        )
        return True

    async def _rotate(
        self, model: str, cred: Credential, err: ModelError, tried: set[str], emit: Emit | None
    ) -> bool:
        """Cool ``cred`` down after ``err``; True when another credential is there to try."""
        pool = self.access.pool(model) if self.access is not None else None
        if pool is None or err.kind not in ROTATE_ON:
            return False
        cooldown = await pool.failed(cred.label, err.kind, err.retry_after)
        tried.add(cred.label)
        nxt = await pool.pick(frozenset(tried))
        if not isinstance(nxt, Credential):
            return False
        await self._notice(
            emit,
            NoticeKind.ROTATE,
            f"{model}: credential {cred.label} {err.kind.value}; trying {nxt.label}",
            {
                "model": model,
                "reason": err.kind.value,
                "from": cred.label,
                "to": nxt.label,
                "cooldown_s": round(cooldown.until - pool.clock(), 3),
                "discard_partial": True,
            },
        )
        return True

    async def call(
        self,
        spec: CallSpec,
        emit: Emit | None,
        on_partial: Callable[[str], None],
        on_discard: Callable[[], None] | None = None,
    ) -> CallResult:
        """Stream one call, forwarding deltas to ``emit`` as they arrive.

        ``on_partial`` receives streamed text so an abort can keep what was
        said; ``on_discard`` is called when an attempt fails, since the text
        it streamed is no longer part of any answer. Raises
        :class:`ModelError` for no-failover kinds (:class:`ContentRefused`
        for a reply the provider stopped under its content policy) and
        :class:`AllModelsFailed` when every candidate failed.
        """
        attempts: list[Attempt] = []
        last: ModelError | None = None
        for index, model in enumerate(self.chain):
            retry = 0
            tried: set[str] = set()
            cooling_waits = 0  # bounded: another process may keep the keys cooling
            while True:
                cred = await self._credential(model, tried)
                if (
                    isinstance(cred, ModelError)
                    and cooling_waits <= self.policy.max_retries
                    and await self._wait_for_rate_limit(model, cred, emit)
                ):
                    cooling_waits += 1
                    continue
                try:
                    if isinstance(cred, ModelError):
                        raise _AttemptFailed(cred, False)
                    result = await self._traced(
                        model, spec, emit, on_partial, cred, len(attempts) + 1, index
                    )
                except _AttemptFailed as failed:
                    if on_discard is not None:
                        on_discard()
                    err = failed.error
                    vendor, _, name = model.partition(":")
                    label = cred.label if isinstance(cred, Credential) else None
                    attempts.append(
                        Attempt(vendor, name, err.kind.value, err.status, err.message, label)
                    )
                    last = err
                    if err.kind in NO_FAILOVER:
                        raise err from None
                    if failed.emitted_tool_call:
                        raise AllModelsFailed(attempts, err) from None
                    if isinstance(cred, Credential) and await self._rotate(
                        model, cred, err, tried, emit
                    ):
                        continue
                    if isinstance(cred, ModelError):
                        break  # every key cooling past the wait bound, or broken
                    if isinstance(cred, Credential) and err.kind is ErrorKind.RATE_LIMIT:
                        # Every key is cooling now, for as long as the provider
                        # asked: the next round waits that out (within the bound).
                        if retry >= self.policy.max_retries:
                            break
                        retry += 1
                        tried.clear()
                        await self._retry_notice(emit, model, err, retry, None)
                        continue
                    wait = self._retry_wait(err, retry)
                    if wait is None:
                        break
                    retry += 1
                    tried.clear()
                    await self._retry_notice(emit, model, err, retry, wait)
                    await self._sleep(wait)
                    continue
                result.attempts = attempts
                if result.stop is ModelStop.CONTENT_FILTER:
                    raise ContentRefused(result)
                return result
            if index + 1 < len(self.chain):
                nxt = self.chain[index + 1]
                await self._notice(
                    emit,
                    NoticeKind.FALLBACK,
                    f"{model} failed ({last.kind.value if last else 'error'}); trying {nxt}",
                    {
                        "from": model,
                        "to": nxt,
                        "reason": last.kind.value if last else None,
                        "discard_partial": True,
                    },
                )
        assert last is not None
        raise AllModelsFailed(attempts, last)

    async def _retry_notice(
        self, emit: Emit | None, model: str, err: ModelError, retry: int, wait: float | None
    ) -> None:
        """Say a call is tried again (after ``wait`` s; None: once the rate limit is over)."""
        when = f" in {wait:.1f}s" if wait is not None else " once the rate limit is over"
        await self._notice(
            emit,
            NoticeKind.RETRY,
            f"{model} failed ({err.kind.value}); retry {retry}{when}",
            {
                "model": model,
                "reason": err.kind.value,
                "retry": retry,
                "delay": wait,
                "discard_partial": True,
            },
        )

    def _retry_wait(self, err: ModelError, retry: int) -> float | None:
        if err.kind not in RETRYABLE or retry >= self.policy.max_retries:
            return None
        return self.policy.delay(retry + 1, err.retry_after, self._rand())

    async def _traced(
        self,
        model: str,
        spec: CallSpec,
        emit: Emit | None,
        on_partial: Callable[[str], None],
        credential: Credential | None,
        attempt: int,
        fallback: int,
    ) -> CallResult:
        """One attempt as the GenAI conventions' ``chat`` span (a no-op when not tracing)."""
        if not tracing.active():
            return await self._attempt(model, spec, emit, on_partial, credential)
        vendor, _, name = model.partition(":")
        attributes: dict[str, object] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": vendor,
            "gen_ai.request.model": name,
            "gen_ai.request.max_tokens": spec.max_tokens,
            "yeaft.attempt": attempt,
            "yeaft.fallback": fallback,
            "yeaft.credential": credential.label if credential is not None else None,
        }
        if tracing.capture_content():
            attributes["gen_ai.system_instructions"] = spec.system
            attributes["gen_ai.input.messages"] = _content(spec.messages)
        with tracing.span(f"chat {name}", attributes, SpanKind.CLIENT) as span:
            try:
                result = await self._attempt(model, spec, emit, on_partial, credential)
            except _AttemptFailed as failed:
                tracing.failed(span, failed.error.kind.value, failed.error.message)
                raise
            usage = result.usage
            span.set_attribute("gen_ai.response.model", name)
            span.set_attribute("gen_ai.response.finish_reasons", [str(result.stop)])
            span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
            if tracing.capture_content():
                span.set_attribute("gen_ai.output.messages", result.text)
            return result

    async def _attempt(
        self,
        model: str,
        spec: CallSpec,
        emit: Emit | None,
        on_partial: Callable[[str], None],
        credential: Credential | None = None,
    ) -> CallResult:
        emitted_tool_call = False
        try:
            provider, name = self.registry.resolve(model, credential)
            options = dict(self.access.options(model)) if self.access is not None else {}
            request = ModelRequest(
                model=name,
                system=spec.system,
                messages=for_model(spec.messages, self.sees_images(model)),
                tools=spec.tools,
                max_tokens=spec.max_tokens,
                options=options,
                context=spec.context,
            )
            result = CallResult(model=model)
            text: list[str] = []
            thinking: list[str] = []
            signature: str | None = None
            lane = self.access.lane if self.access is not None else None
            waited = False

            async def on_wait() -> None:
                nonlocal waited
                waited = True
                await self._notice(
                    emit,
                    NoticeKind.QUEUED,
                    f"{model}: waiting for a free slot at the provider",
                    {"model": model, "waiting": True},
                )

            async with lane.slot(model, on_wait) if lane is not None else nullcontext():
                if waited:
                    await self._notice(
                        emit,
                        NoticeKind.QUEUED,
                        f"{model}: slot free",
                        {"model": model, "waiting": False},
                    )
                stream = watch(provider.stream(request), self.timeouts, model)
                async with aclosing(stream) as items:
                    async for item in items:
                        if isinstance(item, TextDelta):
                            text.append(item.text)
                            on_partial(item.text)
                        elif isinstance(item, ThinkingDelta):
                            thinking.append(item.text)
                            signature = item.signature or signature
                        elif isinstance(item, ToolCallEvent):
                            emitted_tool_call = True
                            result.tool_calls.append(
                                ToolCall(id=item.id, name=item.name, arguments=item.arguments)
                            )
                        elif isinstance(item, UsageItem):
                            result.usage = result.usage + item.usage
                        elif isinstance(item, StopItem):
                            result.stop, result.stop_message = item.reason, item.message
                        if emit is not None and not isinstance(
                            item, UsageItem | StopItem | ProgressItem
                        ):
                            await emit(item)
        except ModelError as err:
            raise _AttemptFailed(err, emitted_tool_call) from err
        except (asyncio.CancelledError, KeyboardInterrupt, SinkFailed):
            raise  # a failing sink is the caller's trouble, not the model's
        except Exception as exc:  # a provider bug must not kill the turn unexplained
            log.exception("provider for %s raised an unclassified error", model)
            unknown = ModelError(ErrorKind.UNKNOWN, f"{type(exc).__name__}: {exc}")
            raise _AttemptFailed(unknown, emitted_tool_call) from exc
        result.text = "".join(text)
        if thinking:
            result.thinking = [Thinking(text="".join(thinking), signature=signature)]
        if result.tool_calls and result.stop is ModelStop.END_TURN:
            result.stop = ModelStop.TOOL_USE
        return result

    @staticmethod
    async def _notice(emit: Emit | None, kind: NoticeKind, message: str, detail: dict) -> None:
        if emit is not None:
            await emit(NoticeEvent(kind, message, detail))


def _content(messages: list) -> str:
    """The call's messages as JSON for a span (``tracing.clipped``)."""
    return tracing.clipped(
        json.dumps(
            [m.model_dump(mode="json") if hasattr(m, "model_dump") else str(m) for m in messages],
            ensure_ascii=False,
        )
    )
