"""Small helpers the skill components share: one bounded model call, text cutting.

Every model call of this package goes through :func:`ask`, which bounds it by
the call's own ``timeout_s`` whatever the :class:`~team.calls.Complete` does,
so a caller's fallback always comes in time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from team.calls import Complete, ModelCall

__all__ = ["ask", "describe_error", "excerpt", "join_non_empty", "one_line"]


async def ask(complete: Complete, call: ModelCall) -> str:
    """The model's text for ``call``; raises on failure, or TimeoutError after ``timeout_s``."""
    async with asyncio.timeout(call.timeout_s):
        return await complete(call)


def excerpt(text: str, limit: int) -> str:
    """``text`` trimmed and cut to at most ``limit`` characters, marked with "…" when cut."""
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)].rstrip() + "…"


def one_line(text: str, limit: int = 300) -> str:
    """``text`` on one line (runs of whitespace become one space), cut to ``limit``."""
    return excerpt(" ".join(text.split()), limit)


def join_non_empty(parts: Iterable[str], separator: str = "\n") -> str:
    """The parts that are not blank, trimmed and joined."""
    return separator.join(part.strip() for part in parts if part and part.strip())


def describe_error(exc: BaseException) -> str:
    """An exception in words for a log line; a timeout's message is empty, so name the type."""
    return str(exc) or type(exc).__name__
