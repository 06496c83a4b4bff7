"""The session a VP's turn runs in, as its system prompt states it.

Where the VP is (a group or a one-to-one conversation, by name), who writes,
the model it runs on and the channel the message came by (web, terminal,
API). The current time is stated by the base identity section.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from protocol import Channel

Place = Literal["group", "conversation"]

_PLACE = {
    "en": {"group": 'the group "{name}"', "conversation": 'a one-to-one conversation "{name}"'},
    "zh": {"group": "群组「{name}」", "conversation": "一对一会话「{name}」"},
}
_CHANNEL = {
    "en": {Channel.WEB: "the web app", Channel.TERMINAL: "the terminal", Channel.API: "the API"},
    "zh": {Channel.WEB: "网页端", Channel.TERMINAL: "终端", Channel.API: "API"},
}
_UNKNOWN = {"en": "unknown", "zh": "未知"}
_UNKNOWN_CHANNEL = {"en": "an unknown channel", "zh": "未知渠道"}


@dataclass(frozen=True, slots=True)
class Session:
    """What the session section says; ``person`` and ``channel`` may be unknown."""

    place: Place
    name: str
    model: str
    person: str | None = None
    channel: Channel | None = None

    def values(self, language: str) -> dict[str, str]:
        """The session template's placeholders in ``language``."""
        unknown = _UNKNOWN[language]
        # Names are one line: a newline in a group name must not start a section.
        name = " ".join(self.name.split())
        return {
            "place": _PLACE[language][self.place].format(name=name),
            "person": f"@{self.person}" if self.person else unknown,
            "model": self.model or unknown,
            "channel": (
                _CHANNEL[language][self.channel] if self.channel else _UNKNOWN_CHANNEL[language]
            ),
        }
