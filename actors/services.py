"""What every turn of one VP works with, built once per VP actor.

:class:`VPServices` is handed to each :class:`~actors.runner.TurnRunner`
and to the pieces a turn is assembled from (``actors.turn_tools``); it sits
apart so that those pieces need not import the runner.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from actors.hooks import TurnHooks
from actors.questions import QuestionBox
from actors.transcripts import TranscriptCache
from engine.a2a import A2aConfig, A2aManager
from engine.engine import Engine
from engine.mcp import McpManager
from personas.directory import PersonaDirectory
from personas.model import Persona
from store.attachments import AttachmentStore
from store.base import Store
from store.memory import MemoryBackend


@dataclass(frozen=True, slots=True)
class VPServices:
    """What every turn of one VP works with; built once per VP actor."""

    persona: Persona
    personas: PersonaDirectory
    engine: Engine
    store: Store
    memory: MemoryBackend
    transcripts: TranscriptCache
    questions: QuestionBox
    # Before- and after-turn hooks (memory recall and dreams among them).
    hooks: TurnHooks
    # This actor's MCP connections, shared by all its turns.
    mcp: McpManager
    # The bytes of the files people send (store.attachments).
    attachments: AttachmentStore
    # Where the workspaces of groups and conversations are (store.workspaces).
    data_dir: Path | None = None
    # The time the prompt states (tests inject a fixed one).
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    # How often a running turn writes its busy heartbeat (actors.heartbeat; 0: never).
    heartbeat_s: float = 0.0
    # This actor's remote A2A agents, shared by all its turns.
    a2a: A2aManager = field(default_factory=lambda: A2aManager(A2aConfig()))

    @property
    def vp_id(self) -> str:
        """The id of the VP these services serve (its persona's)."""
        return self.persona.id
