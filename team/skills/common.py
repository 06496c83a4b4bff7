"""Small helpers the skill components share: one bounded model call, joining text.

Every model call of this package goes through :func:`ask`, which bounds it by
the call's own ``timeout_s`` whatever the :class:`~team.calls.Complete` does,
so a caller's fallback always comes in time. Cutting text to a bound is
:mod:`team.text`'s, shared with the router and the planner.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from team.calls import Complete, ModelCall

__all__ = ["ask", "describe_error", "join_non_empty"]


async def ask(complete: Complete, call: ModelCall) -> str:
    """The model's text for ``call``; raises on failure, or TimeoutError after ``timeout_s``."""
    async with asyncio.timeout(call.timeout_s):
        return await complete(call)


def join_non_empty(parts: Iterable[str], separator: str = "\n") -> str:
    """The parts that are not blank, trimmed and joined."""
    return separator.join(part.strip() for part in parts if part and part.strip())


def describe_error(exc: BaseException) -> str:
    """An exception in words for a log line; a timeout's message is empty, so name the type."""
    return str(exc) or type(exc).__name__
