"""A model that says only what a test scripts: the project's test double.

A :class:`ScriptedModel` answers each call with the next step of its
script: a :class:`~engine.providers.replies.Reply` (text, thinking, tool
calls, a delay, a hang), a :class:`Fail` (a :class:`~engine.errors.ModelError`
of any :class:`~engine.errors.ErrorKind`, before or after some output), or
plain text. The script is a list of steps, a function of the request, or
both: listed steps come first, then the function answers the rest. A call
with no step left is an error, never an improvised reply, and
:meth:`ScriptedModel.assert_complete` fails a test whose listed steps were
not all used or whose calls ran past them.

A script function reads what it needs about a call from
``request.context`` (:class:`~engine.call_context.CallContext`): the
speaking VP, the mode, a team call's purpose. Tests install the model in
place of a vendor (``ProviderRegistry(config, {"offline": model})`` or
``RuntimeConfig.provider_overrides``); the model string's ``ttft`` and
``tps`` still pace its replies. The model pickles (with its script
function, by cloudpickle), so it crosses into Ray actors; each actor then
holds its own copy, and only the test's own copy can be asserted on.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass

from engine.errors import ErrorKind, ModelError
from engine.events import TextDelta, ToolCallEvent
from engine.providers.base import ModelRequest, StreamItem
from engine.providers.replies import Pace, Reply, stream_reply

__all__ = ["Fail", "Reply", "ScriptFn", "ScriptedModel", "Step"]


@dataclass(slots=True)
class Fail:
    """A scripted failure, raised as a :class:`ModelError`.

    ``after_text`` streams that text first, to exercise failures mid-stream;
    ``after_tool_call`` emits a tool call first (the engine must not retry).
    """

    kind: ErrorKind
    message: str = "scripted failure"
    status: int | None = None
    retry_after: float | None = None
    after_text: str = ""
    after_tool_call: bool = False


Step = Reply | Fail | str
ScriptFn = Callable[[ModelRequest], Step]


class ScriptedModel:
    """A provider that plays a script; every request it got is in ``requests``."""

    def __init__(
        self,
        script: Iterable[Step] | ScriptFn = (),
        *,
        then: ScriptFn | None = None,
        name: str = "scripted",
    ) -> None:
        self.name = name
        self._queue: deque[Step] = deque() if callable(script) else deque(script)
        self._fn: ScriptFn | None = script if callable(script) else then
        self._overrun: list[int] = []
        self.requests: list[ModelRequest] = []

    def push(self, *steps: Step) -> None:
        """Add steps to the end of the listed script."""
        self._queue.extend(steps)

    @property
    def calls(self) -> int:
        """How many calls the model has had."""
        return len(self.requests)

    @property
    def remaining(self) -> int:
        """Listed steps not used yet."""
        return len(self._queue)

    def assert_complete(self) -> None:
        """Fail unless every listed step was used and no call ran past the script."""
        problems = []
        if self._queue:
            problems.append(f"{len(self._queue)} scripted steps unused: {list(self._queue)!r}")
        if self._overrun:
            problems.append(f"calls {self._overrun} came after the script ran out")
        if problems:
            raise AssertionError("; ".join(problems))

    def _next_step(self, request: ModelRequest) -> Step:
        if self._queue:
            return self._queue.popleft()
        if self._fn is not None:
            return self._fn(request)
        self._overrun.append(len(self.requests))
        raise ModelError(
            ErrorKind.UNKNOWN,
            f"script exhausted at call {len(self.requests)}",
            provider=self.name,
            model=request.model,
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        pace = Pace.parse(request.model).for_request(request)
        self.requests.append(request)
        step = self._next_step(request)
        if isinstance(step, str):
            step = Reply(step)
        if isinstance(step, Reply):
            async for item in stream_reply(step, request, pace, len(self.requests)):
                yield item
            return
        if pace.ttft > 0:
            await asyncio.sleep(pace.ttft)
        if step.after_text:
            yield TextDelta(step.after_text)
        if step.after_tool_call:
            yield ToolCallEvent("call_failed", "rethink", {"reason": "scripted"})
        raise ModelError(
            step.kind,
            step.message,
            status=step.status,
            retry_after=step.retry_after,
            provider=self.name,
            model=request.model,
        )

    async def aclose(self) -> None:
        return None
