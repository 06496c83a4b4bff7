"""What ``yeaft chat`` reads from a terminal: whole lines, however long, and whole pastes.

A terminal in its usual (canonical) mode lets the kernel edit the line, and
the kernel keeps at most 4,095 characters of it: the rest of a long paste
was dropped without a word and the cut text sent. So on a terminal the
client reads keys itself (canonical mode and echo off, signals kept, so
Ctrl-C still stops it) and does the little editing a chat line needs:
Backspace, Ctrl-U (clear), Ctrl-W (word), Ctrl-D (leave on an empty line),
Enter (send). It turns on bracketed paste, so a paste arrives marked and is
taken whole, its newlines included, as one message. The terminal's own
settings come back when the client stops.
"""

from __future__ import annotations

import codecs
import os
import termios
from types import TracebackType
from typing import Any

PASTE_ON, PASTE_OFF = "\033[?2004h", "\033[?2004l"
PASTE_START, PASTE_END = "[200~", "[201~"
ERASE = ("\x7f", "\x08")


class TerminalLines:
    """Lines from the terminal on ``fd``; a context manager that restores it.

    ``readline`` blocks (it runs on the chat client's reader thread) and
    returns the line with its ``\\n``, or ``""`` at Ctrl-D on an empty line,
    like ``sys.stdin.readline``.
    """

    def __init__(self, fd: int, echo_fd: int | None = None) -> None:
        self.fd = fd
        self.echo_fd = fd if echo_fd is None else echo_fd
        self._saved: list[Any] | None = None
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""

    def __enter__(self) -> TerminalLines:
        self._saved = termios.tcgetattr(self.fd)
        mode = termios.tcgetattr(self.fd)
        mode[3] &= ~(termios.ICANON | termios.ECHO)  # lflag: keep ISIG for Ctrl-C
        mode[6][termios.VMIN], mode[6][termios.VTIME] = 1, 0
        termios.tcsetattr(self.fd, termios.TCSADRAIN, mode)
        self._echo(PASTE_ON)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.restore()

    def restore(self) -> None:
        """Give the terminal back as it was (idempotent)."""
        if self._saved is not None:
            self._echo(PASTE_OFF)
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)
            self._saved = None

    def _echo(self, text: str) -> None:
        try:
            os.write(self.echo_fd, text.encode())
        except OSError:
            pass  # the terminal went away: nothing to show it on

    def _char(self) -> str:
        """The next character typed (blocking); "" when the terminal is gone."""
        while not self._pending:
            try:
                data = os.read(self.fd, 4096)
            except OSError:
                return ""
            if not data:
                return ""
            self._pending = self._decoder.decode(data)
        char, self._pending = self._pending[0], self._pending[1:]
        return char

    def _escape(self) -> str:
        """The rest of an escape sequence after ESC (``[200~`` and the like)."""
        seq = self._char()
        if seq != "[":
            return seq
        while True:
            char = self._char()
            seq += char
            if not char or "@" <= char <= "~":  # a CSI sequence ends with its final byte
                return seq

    def readline(self) -> str:
        text: list[str] = []
        pasting = False
        while True:
            char = self._char()
            if char == "":
                return "".join(text)  # end of input: what was typed, then EOF
            if char == "\x1b":
                seq = self._escape()
                pasting = {PASTE_START: True, PASTE_END: False}.get(seq, pasting)
                continue  # arrows and other keys: not part of a chat line
            if pasting:
                text.append("\n" if char == "\r" else char)
                self._echo("\r\n" if char in "\r\n" else char)
            elif char in "\r\n":
                self._echo("\r\n")
                return "".join(text) + "\n"
            elif char == "\x04":
                if not text:
                    self._echo("\r\n")
                    return ""
            elif char in ERASE:
                if text and text[-1] != "\n":
                    text.pop()
                    self._echo("\b \b")
            elif char == "\x15":  # Ctrl-U: the whole line
                self._echo("\b \b" * sum(1 for c in text if c != "\n"))
                text.clear()
            elif char == "\x17":  # Ctrl-W: the last word
                while text and text[-1] == " ":
                    text.pop()
                    self._echo("\b \b")
                while text and text[-1] not in " \n":
                    text.pop()
                    self._echo("\b \b")
            elif char >= " " or char == "\t":
                text.append(char)
                self._echo(char)
