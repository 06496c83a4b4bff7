"""Threads in the terminal client (``yeaft chat``): ``/thread`` lists, opens and leaves them.

- ``/thread`` lists the recent messages of the main timeline, numbered, each
  with its thread's reply count;
- ``/thread N`` (a number of that list, or a message id) opens the thread
  under that message: its root and replies are printed, and every line
  typed after goes to the thread (``threadId`` on the chat frame), its VP
  answers streaming here;
- ``/main`` (or ``/thread off``) goes back to the main timeline.

While a thread is open only its frames are shown; something said
elsewhere is one short line ("a new message on the main timeline").
On the main timeline a thread's frames are not shown either: a reply in a
thread is one line naming the thread it went to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_LISTED = 10
EXCERPT = 48


def _excerpt(text: str) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= EXCERPT else flat[: EXCERPT - 1] + "…"


@dataclass
class ThreadView:
    """Which place the terminal shows: the main timeline, or one thread."""

    open_id: str | None = None
    # Main-timeline messages seen (history and live), oldest first: id -> (author, text).
    roots: dict[str, tuple[str, str]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    # A turn's thread, learnt from its first frame that says (a result may come late).
    turn_threads: dict[str, str | None] = field(default_factory=dict)

    def seen(self, message: dict[str, Any]) -> None:
        """A stored message (a page of history, as ``GET .../messages`` has it)."""
        meta = message.get("meta") or {}
        if meta.get("threadId") or message.get("role") == "system" or meta.get("deleted"):
            return
        mid = str(message.get("id"))
        self.roots[mid] = (str(message.get("author", "?")), str(message.get("text", "")))
        if message.get("thread"):
            self.counts[mid] = int(message["thread"].get("count", 0))

    def listing(self) -> str:
        """The numbered list ``/thread`` prints."""
        recent = list(self.roots.items())[-MAX_LISTED:]
        if not recent:
            return "  no message to start a thread under yet"
        lines = ["  threads: /thread N opens one, /main goes back"]
        for n, (mid, (author, text)) in enumerate(recent, 1):
            count = self.counts.get(mid, 0)
            replies = f" ({count} {'reply' if count == 1 else 'replies'})" if count else ""
            lines.append(f"  {n}. {author}: {_excerpt(text)}{replies}")
        return "\n".join(lines)

    def pick(self, ref: str) -> str | None:
        """The root a ``/thread`` argument names: a number of the list, or a message id."""
        recent = list(self.roots)[-MAX_LISTED:]
        if ref.isdigit() and 1 <= int(ref) <= len(recent):
            return recent[int(ref) - 1]
        return ref if ref.startswith("msg_") else None

    def header(self, thread: dict[str, Any]) -> list[str]:
        root = thread.get("root") or {}
        author, text = root.get("author", "?"), root.get("text", "")
        return [f"── thread on {author}: {_excerpt(text)} (/main to leave) ──"]

    def place_of(self, frame: dict[str, Any]) -> str | None:
        """The thread a frame belongs to (None: the main timeline)."""
        thread = frame.get("threadId")
        turn = frame.get("turnId")
        if turn and frame.get("type") in ("yeaft_output", "agent_status", "ask_user_question"):
            if thread or turn not in self.turn_threads:
                self.turn_threads[str(turn)] = thread
            thread = self.turn_threads.get(str(turn))
        return str(thread) if thread else None

    def route(self, frame: dict[str, Any]) -> tuple[bool, str | None]:
        """Whether to show ``frame`` here, and a one-line note when it is not shown."""
        if "seq" not in frame or frame.get("type") not in (
            "group_message",
            "yeaft_output",
            "agent_status",
        ):
            return True, None
        place = self.place_of(frame)
        if frame.get("type") == "group_message" and place is None:
            self.seen({**frame, "id": frame.get("messageId")})
        counted = frame.get("type") == "group_message" or _is_result(frame)
        if place is not None and counted and frame.get("role") != "system":
            self.counts[place] = self.counts.get(place, 0) + 1
        if place == self.open_id:
            return True, None
        if not counted:
            return False, None
        who = frame.get("author") or f"@{frame.get('vpId', '?')}"
        if place is None:
            return False, f"  (a new message on the main timeline from {who}: /main to read it)"
        root = self.roots.get(place, ("?", ""))
        return False, f"  ↳ {who} replied in the thread on {root[0]}: {_excerpt(root[1])}"


def _is_result(frame: dict[str, Any]) -> bool:
    data = frame.get("data") or {}
    return frame.get("type") == "yeaft_output" and data.get("type") == "result"
