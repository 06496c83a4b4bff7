"""Turn hooks: code that runs before each VP turn (and may add to its prompt) and after it.

A hook is an object with two coroutine methods (either may do nothing)::

    class MyHook:
        name = "my-hook"

        async def before_turn(self, turn: BeforeTurn) -> list[str]:
            return ["- a line of context for the system prompt"]

        async def after_turn(self, turn: AfterTurn) -> None:
            ...

made by a factory ``factory(services: HookServices) -> hook``. Factories
are named in ``RuntimeConfig.turn_hooks`` as ``"package.module:factory"``
(the setting travels to every VP actor with the rest of the config) or
published by an installed package under the entry-point group
``yeaft.turn_hooks`` (loaded when ``RuntimeConfig.entry_point_hooks`` is
on). Each VP actor builds its hooks once, after the built-in ones: memory
recall (``actors.memory_tier.RecallHook``) and dream scheduling
(``actors.dream.DreamHook``) are hooks themselves.

Lines returned by the before hooks go into the system prompt's memory and
context section, in hook order. A hook that raises is logged and skipped:
a hook is a help, never a reason to fail a turn.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Protocol

from engine.engine import Engine
from engine.events import StopReason
from personas.model import Persona
from store.base import Store
from store.memory import MemoryBackend

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "yeaft.turn_hooks"


@dataclass(frozen=True, slots=True)
class BeforeTurn:
    """A turn about to run: who, where, for whom, on what message, with how big a window."""

    group_id: str
    vp_id: str
    turn_id: str
    user_id: str | None
    query: str
    # The context window of the model the turn runs on, in tokens.
    context_window: int


@dataclass(frozen=True, slots=True)
class AfterTurn:
    """A turn that has ended (its result is out)."""

    group_id: str
    vp_id: str
    turn_id: str
    reason: StopReason
    text: str
    message_id: str | None


class TurnHook(Protocol):
    name: str

    async def before_turn(self, turn: BeforeTurn) -> list[str]: ...

    async def after_turn(self, turn: AfterTurn) -> None: ...


@dataclass(frozen=True, slots=True)
class HookServices:
    """What a hook factory is given: the VP it serves and that VP's engine, store and memory."""

    persona: Persona
    engine: Engine
    store: Store
    memory: MemoryBackend


HookFactory = Callable[[HookServices], TurnHook]


def load_factory(spec: str) -> HookFactory:
    """The factory ``"package.module:name"`` names; ValueError when there is none."""
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise ValueError(f"turn hook {spec!r}: expected 'package.module:factory'")
    try:
        found = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"turn hook {spec!r} cannot be loaded: {exc}") from exc
    if not callable(found):
        raise ValueError(f"turn hook {spec!r} is not callable")
    factory: HookFactory = found
    return factory


def configured_factories(specs: Sequence[str], entry_point_hooks: bool) -> list[HookFactory]:
    """The factories the settings name, then those installed packages publish (if on)."""
    factories = [load_factory(spec) for spec in specs]
    if entry_point_hooks:
        factories += [ep.load() for ep in entry_points(group=ENTRY_POINT_GROUP)]
    return factories


def context_window(engine: Engine, model: str | None = None) -> int:
    """The context window, in tokens, of the model a turn of ``engine`` runs on.

    From the model registry (``YEAFT_CONTEXT_WINDOW`` overrides it for every model).
    """
    return engine.window_for(model)


class TurnHooks:
    """The hooks of one VP actor, run in order around each turn."""

    def __init__(self, hooks: Sequence[TurnHook]) -> None:
        self.hooks = list(hooks)

    async def before(self, turn: BeforeTurn) -> list[str]:
        """Every hook's context lines, in hook order (run concurrently)."""
        found = await asyncio.gather(
            *(h.before_turn(turn) for h in self.hooks), return_exceptions=True
        )
        lines: list[str] = []
        for hook, got in zip(self.hooks, found, strict=True):
            if isinstance(got, BaseException):
                log.warning("before-turn hook %s failed: %r", hook.name, got)
            else:
                lines.extend(got)
        return lines

    async def after(self, turn: AfterTurn) -> None:
        for hook in self.hooks:
            try:
                await hook.after_turn(turn)
            except Exception:
                log.warning("after-turn hook %s failed", hook.name, exc_info=True)
