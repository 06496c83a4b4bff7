"""What a model call is for, beside its prompt: who calls, in which mode, about what.

The engine sets a :class:`CallContext` on every :class:`~engine.providers.base.ModelRequest`
it builds. Real vendors never see it; the offline demo voice, team mode's
offline stand-in and the tests' scripted models read it instead of parsing
the prompt. Provider options (a thinking budget, a reasoning effort) stay
in ``ModelRequest.options``; nothing here is sent over the wire.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from personas.model import Persona

Language = Literal["en", "zh"]


class CallMode(StrEnum):
    """Why the engine calls the model.

    ``CHAT`` answers people (a group turn, the command line); ``DREAM``
    writes a VP's resident memory from the recent conversation; ``TASK``
    is one of team mode's narrow calls, whose ``purpose`` says which.
    """

    CHAT = "chat"
    DREAM = "dream"
    TASK = "task"


@dataclass(frozen=True, slots=True)
class Speaker:
    """The persona a call speaks as, in the few fields a stand-in model uses."""

    id: str
    name: str = ""
    name_zh: str | None = None
    role: str = ""
    traits: tuple[str, ...] = ()

    @classmethod
    def of(cls, persona: Persona) -> Speaker:
        """The speaker fields of ``persona``."""
        return cls(
            id=persona.id,
            name=persona.name,
            name_zh=persona.name_zh,
            role=persona.role,
            traits=tuple(persona.traits),
        )


@dataclass(frozen=True, slots=True)
class CallContext:
    """The facts about one call that are not its prompt.

    ``speaker`` is None for a call made on no persona's behalf; ``purpose``
    is set for ``TASK`` calls (``team.router``, ``team.planner``, ...) and for
    the ``CHAT`` turns of a task's runs (``team.run.node``, ``team.run.synthesis``,
    ``team.run.single``), None otherwise;
    ``language`` is the group's, None when it has none; ``memory`` holds the
    recalled lines the system prompt already carries, one fact a line.
    """

    speaker: Speaker | None = None
    mode: CallMode = CallMode.CHAT
    purpose: str | None = None
    language: Language | None = None
    memory: tuple[str, ...] = ()

    @property
    def speaker_id(self) -> str | None:
        """The calling persona's id, None when no persona calls."""
        return self.speaker.id if self.speaker is not None else None
