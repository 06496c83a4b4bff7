"""Threads in an export (``gateway.export``): replies under the message that started them.

The JSON export keeps the group log's order and marks each reply with its
``threadId`` and each root with its ``thread`` summary (as a page of
history does). The Markdown export reads as the web UI shows it: the main
timeline, and each thread's replies right under its root, headed
"Thread". A thread whose root was deleted keeps its replies, under a
heading that says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from store.base import GroupMessage
from store.threads import summarize, thread_of


def threads_of(messages: list[GroupMessage]) -> dict[str, list[GroupMessage]]:
    """Each thread's replies among ``messages`` (oldest first), by root id."""
    found: dict[str, list[GroupMessage]] = {}
    for m in messages:
        root = thread_of(m.meta)
        if root is not None:
            found.setdefault(root, []).append(m)
    return found


def mark_threads(views: list[dict[str, Any]], messages: list[GroupMessage]) -> None:
    """Give the JSON export's views their ``threadId`` and their roots' ``thread``."""
    threads = threads_of(messages)
    for view in views:
        root = thread_of(view.get("meta") or {})
        if root is not None:
            view["threadId"] = root
        summary = summarize(view["id"], threads.get(view["id"], ()))
        if summary is not None:
            view["thread"] = summary.view()


def markdown_with_threads(
    kept: list[GroupMessage], section: Callable[[GroupMessage, str], list[str]]
) -> list[str]:
    """The Markdown sections of ``kept``: each root's thread follows it.

    ``section(message, level)`` gives one message's lines under a heading of
    ``level`` (``###`` on the main timeline, ``####`` in a thread).
    """
    threads = threads_of(kept)
    shown = {m.id for m in kept}
    lines: list[str] = []
    for m in kept:
        if thread_of(m.meta) is not None:
            continue
        lines += section(m, "###")
        lines += _thread(threads.get(m.id, []), section)
    for root, replies in threads.items():
        if root not in shown:
            lines += ["---", "", "### _(a deleted message)_", ""]
            lines += _thread(replies, section)
    return lines


def _thread(
    replies: list[GroupMessage], section: Callable[[GroupMessage, str], list[str]]
) -> list[str]:
    if not replies:
        return []
    count = len(replies)
    lines = [f"**Thread** ({count} {'reply' if count == 1 else 'replies'})", ""]
    for reply in replies:
        lines += section(reply, "####")
    return lines
