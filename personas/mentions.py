"""Finding ``@mentions`` in text (DESIGN.md, "Group chat rules").

``@name`` counts only at the start of the text or after whitespace, so an
e-mail address is not a mention; names are ``[A-Za-z0-9_-]``. Resolving a
name to a persona is the library's job (ids and aliases, any case).
"""

from __future__ import annotations

import re

MENTION = re.compile(r"(?:^|(?<=\s))@([A-Za-z0-9_][A-Za-z0-9_-]*)")


def extract_mentions(text: str) -> list[str]:
    """Mention names in first-seen order, unique case-insensitively."""
    seen: dict[str, str] = {}
    for name in MENTION.findall(text or ""):
        seen.setdefault(name.lower(), name)
    return list(seen.values())
