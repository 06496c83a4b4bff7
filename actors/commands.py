"""Operations sent to an actor as typed commands, dispatched by one handler table.

An operation is a small frozen dataclass, a :class:`Command` whose type
parameter is what it answers with. The caller sends it through one generic
call (``send``); the actor finds its handler in a :class:`Handlers` table by
the command's type. Adding an operation is one command type and one handler:
no method is written again on a client, a Ray front and the class behind it.

The coordinator's own commands are in ``coordinator.commands``; the VPs' in
``actors.vp_commands``. The two a VP's turn sends its coordinator are here,
below both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, cast

from actors.turns import ForwardRequest
from engine.tools.handoff import ForwardResult
from telemetry import tracing

R = TypeVar("R")
S = TypeVar("S")
C = TypeVar("C", bound="Command[Any]")


@dataclass(frozen=True, slots=True)
class Command(Generic[R]):
    """An operation that answers with ``R``; subclasses are frozen dataclasses.

    ``trace`` is the W3C ``traceparent`` of the span current where the
    command was made (``telemetry.tracing``), filled in by itself; its
    handler runs in that trace, in whichever process takes it.
    """

    trace: str | None = field(default=None, kw_only=True, compare=False)

    def __post_init__(self) -> None:
        if self.trace is None and tracing.active():
            object.__setattr__(self, "trace", tracing.traceparent())


class GroupCommand(Command[R]):
    """A command about one group: it goes to the coordinator shard that owns the group."""

    __slots__ = ()
    # A field of every subclass (an annotation here, so no dataclass sees a default).
    group_id: str


Handler = Callable[[S, C], Awaitable[Any]]


class UnknownCommand(TypeError):
    """A command type that no handler of the table takes."""


class Handlers(Generic[S]):
    """The handler of each command type, on a state of type ``S`` (a shard, a VP)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._table: dict[type[Command[Any]], Handler[S, Any]] = {}

    def on(self, kind: type[C]) -> Callable[[Handler[S, C]], Handler[S, C]]:
        """Register the decorated ``async def handler(state, command)`` for ``kind``."""

        def register(handler: Handler[S, C]) -> Handler[S, C]:
            if kind in self._table:
                raise ValueError(f"{self.name}: {kind.__name__} has a handler already")
            self._table[kind] = handler
            return handler

        return register

    async def run(self, state: S, command: Command[R]) -> R:
        """Carry out ``command`` on ``state`` with its handler."""
        handler = self._table.get(type(command))
        if handler is None:
            raise UnknownCommand(f"{self.name} takes no {type(command).__name__}")
        if command.trace is None:
            return cast("R", await handler(state, command))
        with tracing.resumed(command.trace):
            return cast("R", await handler(state, command))

    def kinds(self) -> frozenset[type[Command[Any]]]:
        """Every command type with a handler (tests check none is missing)."""
        return frozenset(self._table)


class CommandTaker(Protocol):
    """An actor that takes commands (a coordinator shard, as a VP's turn sees it)."""

    async def call(self, command: Command[R]) -> R: ...


# -- what a VP's turn sends its coordinator --------------------------------------
@dataclass(frozen=True, slots=True)
class Forward(Command[ForwardResult]):
    """The ``route_forward`` tool: hand work to other VPs of the group. Never refused by raising.

    Sent by the turn to the coordinator that sent it (``ForwardRequest.group_id``
    names the group).
    """

    request: ForwardRequest


@dataclass(frozen=True, slots=True)
class AllowTool(GroupCommand[None]):
    """A person answered "always in this group" to ``vp_id``'s approval question."""

    group_id: str
    tool: str
    vp_id: str
