"""How ``yeaft chat`` lays out a group's live output on a terminal.

Several VPs answer at once, but a terminal has one cursor: word-by-word
interleaving of two replies is unreadable. So one reply streams live at a
time, under its VP's coloured label; a reply that starts meanwhile is held,
with its tool chips and errors, and shown (at once, then live) when the
reply before it ends. Lines that belong to no reply (what people write,
hand-offs, notices, the client's own messages) are printed as they come;
the live reply then carries on under its label again.
"""

from __future__ import annotations

import json
from typing import Any, TextIO

COLOURS = ["36", "35", "33", "32", "34", "31", "96", "95", "93", "92"]

Key = tuple[str, str]
"""A reply: (VP id, turn id)."""


class Screen:
    """Writes the replies of a group one at a time, and a prompt when idle.

    With a ``prompt``, it is shown whenever no reply is streaming and wiped
    (from the start of its line) before anything else is written.
    """

    def __init__(self, out: TextIO, colour: bool, prompt: str | None = None) -> None:
        self.out = out
        self.colour = colour
        self.prompt = prompt
        self.prompt_shown = False
        self.owner: Key | None = None
        self.at_line_start = True
        # Replies waiting for the live one to end, in the order they began:
        # ("text", words) and ("line", a chip or an error) pieces.
        self.waiting: dict[Key, list[tuple[str, str]]] = {}
        self.ended: set[Key] = set()
        self.palette: dict[str, str] = {}

    # -- the prompt ------------------------------------------------------------
    def show_prompt(self) -> None:
        if self.prompt and not self.prompt_shown and self.owner is None and not self.waiting:
            self._write(self.paint(self.prompt, "1"))
            self.prompt_shown = True

    def typed(self) -> None:
        """The person pressed Enter: the terminal has moved past the prompt's line."""
        self.prompt_shown = False

    def _wipe_prompt(self) -> None:
        if self.prompt_shown:
            self.out.write("\r\033[K" if self.colour else "\n")
            self.prompt_shown = False

    # -- styling -----------------------------------------------------------------
    def paint(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.colour else text

    def label(self, vp: str) -> str:
        code = self.palette.setdefault(vp, COLOURS[len(self.palette) % len(COLOURS)])
        return self.paint(f"{vp}›", f"1;{code}")

    # -- output ------------------------------------------------------------------
    def stream(self, vp: str, turn: str, text: str) -> None:
        """Words of one reply."""
        self._piece((vp, turn), ("text", text))

    def turn_line(self, vp: str, turn: str, text: str) -> None:
        """A line that belongs to one reply (a tool call, its result, an error)."""
        self._piece((vp, turn), ("line", text))

    def end(self, vp: str, turn: str) -> None:
        """A reply is complete; the next waiting one (if any) goes live."""
        key = (vp, turn)
        if key == self.owner:
            self._close_owner()
        elif key in self.waiting:
            self.ended.add(key)
        self._next()

    def line(self, text: str) -> None:
        """A line that belongs to no reply: printed at once."""
        self._wipe_prompt()
        self._write(("" if self.at_line_start else "\n") + text + "\n")
        self.at_line_start = True

    def _piece(self, key: Key, piece: tuple[str, str]) -> None:
        if self.owner is None and not self.waiting:
            self.owner = key
        if key == self.owner:
            self._show(key, piece)
        else:
            self.waiting.setdefault(key, []).append(piece)

    def _show(self, key: Key, piece: tuple[str, str]) -> None:
        self._wipe_prompt()
        kind, text = piece
        if kind == "text":
            if self.at_line_start:  # a fresh line: the label, then the words
                text = f"{self.label(key[0])} {text.lstrip(' ')}"
            self._write(text)
            self.at_line_start = False
        else:
            self.line(text)

    def _next(self) -> None:
        while self.owner is None and self.waiting:
            key = next(iter(self.waiting))
            self.owner = key
            for piece in self.waiting.pop(key):
                self._show(key, piece)
            if key in self.ended:
                self.ended.discard(key)
                self._close_owner()

    def _close_owner(self) -> None:
        if not self.at_line_start:
            self._write("\n")
            self.at_line_start = True
        self.owner = None

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()


def said_line(screen: Screen, author: str, text: str, handoff: dict[str, Any] | None) -> str:
    """How a message of the group reads: ``ann: text``, or a hand-off between two VPs."""
    if handoff:
        route = f"  {handoff.get('from', author)} → {handoff.get('to', '?')}"
        return screen.paint(f"{route}: {text}", "2")
    return f"{author}: {text}"


def files_line(attachments: list[dict[str, Any]]) -> str:
    """A message's files, by name and size, under its line."""
    names = [f"{a.get('name', 'file')} ({a.get('size', '?')} bytes)" for a in attachments]
    return "  files: " + ", ".join(names)


def question_line(question: dict[str, Any]) -> str:
    """How a VP's question reads: its choices numbered, and how to answer it."""
    choices = [str(c) for c in question.get("choices") or []]
    listed = "".join(f"  {n}) {choice}" for n, choice in enumerate(choices, 1))
    if not choices:
        how = "answer with /answer <text>"
    elif question.get("multiSelect"):
        how = "pick one or more: /answer 1,3"
    else:
        how = "pick one: /answer <number>"
    if choices and question.get("allowOther"):
        how += " (or your own words)"
    who = question.get("vpId") or "a VP"
    return f"? {who} asks: {question.get('prompt')}{listed} — {how}"


def typed_answer(text: str, choices: list[str], multi_select: bool) -> str | list[str]:
    """The answer a person typed: a choice's number stands for the choice.

    For a multi-select question the answer is a list, its parts separated by
    commas (``1,3`` or ``1, blue``). Anything that is not a number of a
    choice is sent as typed; the VP refuses what is not a choice unless the
    question allows the person's own words.
    """

    def one(part: str) -> str:
        part = part.strip()
        if part.isdigit() and 1 <= int(part) <= len(choices):
            return choices[int(part) - 1]
        return part

    if multi_select:
        return [one(part) for part in text.split(",") if part.strip()]
    return one(text)


def render(screen: Screen, frame: dict[str, Any]) -> None:
    """Show one server frame."""
    kind = frame.get("type")
    if kind == "group_message":
        author, text = str(frame.get("author", "?")), str(frame.get("text", ""))
        screen.line(said_line(screen, author, text, frame.get("handoff")))
        if frame.get("attachments"):
            screen.line(files_line(frame["attachments"]))
    elif kind == "yeaft_output":
        _render_output(screen, frame)
    elif kind == "ask_user_question":
        screen.line(screen.paint(question_line(frame), "1;33"))
    elif kind == "error":
        screen.line(screen.paint(f"  error {frame.get('code')}: {frame.get('message')}", "31"))
    elif kind == "removed" or (kind == "group_update" and frame.get("action") == "deleted"):
        # The group is no longer this user's to watch: nothing more will come.
        screen.line(screen.paint(f"  {frame.get('message') or 'this group was deleted'}", "31"))


def _render_output(screen: Screen, frame: dict[str, Any]) -> None:
    vp, turn = str(frame.get("vpId", "?")), str(frame.get("turnId", ""))
    data = frame.get("data", {})
    dtype = data.get("type")
    if dtype == "assistant":
        for block in data.get("message", {}).get("content", []):
            if block.get("type") == "text":
                screen.stream(vp, turn, block.get("text", ""))
            elif block.get("type") == "tool_use":
                args = json.dumps(block.get("input", {}), ensure_ascii=False)[:120]
                chip = screen.paint(f"  {vp} ⚙ {block.get('name')} {args}", "2")
                screen.turn_line(vp, turn, chip)
    elif dtype == "user":
        for block in data.get("message", {}).get("content", []):
            body = str(block.get("content", "")).replace("\n", " ")[:120]
            colour = "31" if block.get("is_error") else "2"
            screen.turn_line(vp, turn, screen.paint(f"  → {body}", colour))
    elif dtype == "result":
        if data.get("is_error"):
            why = data.get("error") or data.get("stop_reason") or data.get("subtype")
            screen.turn_line(vp, turn, screen.paint(f"  {vp}: {why}", "31"))
        screen.end(vp, turn)
    elif dtype == "system" and data.get("subtype") == "tool_output":
        for line in str(data.get("message", "")).splitlines():
            screen.turn_line(vp, turn, screen.paint(f"  │ {line[:120]}", "2"))
    elif dtype == "system" and data.get("subtype") != "init":  # a turn's start says nothing
        screen.turn_line(vp, turn, screen.paint(f"  ! {data.get('message', '')}", "33"))
