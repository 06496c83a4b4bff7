"""Transcript hygiene applied before every model request.

Providers reject a tool call without its result and a result without its
call; an abort or a crash can leave either behind. ``repair`` makes every
transcript well formed; ``truncate_tool_result`` keeps oversized results
from eating the context window.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.messages import Message

SYNTHETIC_RESULT = "[no result: the tool call was interrupted before it finished]"


@dataclass(slots=True)
class RepairReport:
    added: int = 0
    dropped_orphans: int = 0
    dropped_duplicates: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.added or self.dropped_orphans or self.dropped_duplicates)


def repair(messages: list[Message]) -> tuple[list[Message], RepairReport]:
    """Pair every tool call with exactly one result, right after its call.

    Missing results get a synthetic error result; results whose call is not
    the open one are dropped as orphans (or duplicates, when already answered).
    """
    out: list[Message] = []
    report = RepairReport()
    pending: dict[str, str] = {}  # call id -> tool name, for the open assistant turn
    answered: set[str] = set()

    def close_pending() -> None:
        for call_id, name in pending.items():
            out.append(Message.tool_result(call_id, SYNTHETIC_RESULT, name=name, is_error=True))
            report.added += 1
            answered.add(call_id)
        pending.clear()

    for msg in messages:
        if msg.role == "tool":
            cid = msg.tool_call_id or ""
            if cid in pending:
                pending.pop(cid)
                answered.add(cid)
                out.append(msg)
            elif cid in answered:
                report.dropped_duplicates += 1
            else:
                report.dropped_orphans += 1
            continue
        if pending:
            close_pending()
        out.append(msg)
        if msg.role == "assistant":
            for call in msg.tool_calls:
                pending[call.id] = call.name
    close_pending()
    return out, report


def truncate_tool_result(text: str, max_chars: int) -> str:
    """Keep the head and the tail of an oversized result, say what was cut.

    The tail often holds the error or the summary line, so it is kept too.
    """
    if len(text) <= max_chars:
        return text
    keep = max(200, max_chars - 80)
    head = keep * 2 // 3
    tail = keep - head
    omitted = len(text) - head - tail
    return f"{text[:head]}\n[… {omitted} characters omitted …]\n{text[-tail:]}"


def turn_starts(messages: list[Message]) -> list[int]:
    """Indexes of the messages that start a turn (user messages).

    Cutting only at these indexes can never separate a tool call from its
    result, because results always follow their call inside one turn.
    """
    return [i for i, m in enumerate(messages) if m.role == "user"]
