"""Compaction: a model-written summary replaces older turns.

The last turns are kept verbatim and the cut is made only at turn starts, so
a tool call is never separated from its result. The summary lives on the
:class:`Conversation` and is persisted with it by the owner.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from engine.history import turn_starts
from engine.messages import Conversation, Message

SUMMARY_SYSTEM = (
    "You compress conversations. Write a faithful summary of the transcript you are "
    "given so the conversation can continue without it: who asked what, decisions made, "
    "facts established, open questions, promises made, and any identifiers (names, ids, "
    "numbers, paths) exactly as written. Do not add anything that is not in the "
    "transcript. Use short paragraphs or bullet points; at most 600 words."
)
_RESULT_CHARS = 1500
_MAX_TRANSCRIPT_CHARS = 200_000

Summarize = Callable[[str, str], Awaitable[str]]


def render_transcript(previous: str | None, messages: list[Message]) -> str:
    """Plain-text rendering of older turns for the summariser."""
    lines: list[str] = []
    if previous:
        lines.append(f"[Summary of what came before]\n{previous}\n")
    for m in messages:
        who = m.speaker or m.role
        if m.role == "tool":
            body = m.content[:_RESULT_CHARS]
            lines.append(
                f"[tool result {m.tool_name or ''}{' (error)' if m.is_error else ''}] {body}"
            )
            continue
        if m.content:
            lines.append(f"{who}: {m.content}")
        for call in m.tool_calls:
            lines.append(f"{who} called {call.name}({call.arguments})")
    text = "\n".join(lines)
    # Keep the newest part when even the rendering is too large for one call.
    return text[-_MAX_TRANSCRIPT_CHARS:]


async def compact(conv: Conversation, keep_turns: int, summarize: Summarize) -> bool:
    """Summarise all but the last ``keep_turns`` turns. False if nothing can be cut."""
    starts = turn_starts(conv.messages)
    keep = max(1, keep_turns)
    if len(starts) <= keep:
        # Fewer turns than we would keep: keep only the newest turn if there
        # is anything before it to summarise.
        keep = 1
    if len(starts) < 2 and not (starts and starts[0] > 0):
        return False
    cut = starts[-keep] if len(starts) >= keep else starts[-1]
    if cut <= 0:
        return False
    older = conv.messages[:cut]
    summary = await summarize(SUMMARY_SYSTEM, render_transcript(conv.summary, older))
    conv.summary = summary.strip() or conv.summary
    conv.messages = conv.messages[cut:]
    conv.compactions += 1
    return True
