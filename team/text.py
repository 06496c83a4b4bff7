"""Text helpers team mode shares: cutting text to a bound, and naming a group's language.

Every prompt of team mode shows text it did not write (messages, skill
bodies, a model's answers), so each piece is cut to a bound first; these
are the one way to do it. :func:`language_name` is the one place a
language code becomes the word a prompt asks a model to write in.
"""

from __future__ import annotations

__all__ = [
    "TRUNCATED",
    "cut_at_line",
    "excerpt",
    "is_chinese",
    "language_name",
    "one_line",
]

# The mark a text cut at a line boundary ends with, on a line of its own.
TRUNCATED = "[…truncated]"

_LANGUAGE_NAMES = {"en": "English", "zh": "Chinese"}


def excerpt(text: str, limit: int) -> str:
    """``text`` trimmed and cut to at most ``limit`` characters, marked with "…" when cut."""
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)].rstrip() + "…"


def one_line(text: str, limit: int = 300) -> str:
    """``text`` on one line (runs of whitespace become one space), cut to ``limit``."""
    return excerpt(" ".join(text.split()), limit)


def cut_at_line(text: str, limit: int) -> str:
    """``text`` with at most ``limit`` characters, cut after a whole line and marked.

    A cut text keeps the whole lines that fit before a last line
    :data:`TRUNCATED`, so a reader (person or model) sees that something is
    missing and never acts on half a step. A first line longer than the room
    is cut inside it, as nothing else would be left.
    """
    if len(text) <= limit:
        return text
    room = max(limit - len(TRUNCATED) - 1, 0)  # the mark and the newline before it
    head = text[:room]
    newline = head.rfind("\n")
    head = head[:newline] if newline > 0 else head
    head = head.rstrip()
    return f"{head}\n{TRUNCATED}" if head else TRUNCATED[:limit]


def _base(code: str) -> str:
    """The language of ``code`` without its region: "zh-CN" and "zh_TW" are "zh"."""
    return code.strip().lower().replace("_", "-").split("-", 1)[0]


def language_name(code: str) -> str:
    """The English name of language ``code`` ("zh" and "zh-CN" are "Chinese") for a prompt.

    A code without a known name is given back as it is (stripped), and an
    empty one is English, the groups' default.
    """
    return _LANGUAGE_NAMES.get(_base(code), code.strip() or "English")


def is_chinese(code: str) -> bool:
    """True when ``code`` is Chinese in any region ("zh", "zh-CN", "ZH_tw")."""
    return _base(code) == "zh"
