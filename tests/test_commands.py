"""Every command has exactly one handler, and a command crosses a process as a value."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import pytest

import actors.vp_commands as vp_commands
import coordinator.commands as coordinator_commands
from actors.commands import Command, GroupCommand, Handlers, UnknownCommand
from actors.vp_actor import VP_OPS
from coordinator.coordinator import FRONT
from coordinator.membership import GroupEdit
from coordinator.shard import OPS


def command_types(module: Any) -> set[type[Command[Any]]]:
    return {
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, Command)
        and dataclasses.is_dataclass(value)
        # Not the bases: Command itself is a dataclass (its ``trace``).
        and value not in (Command, GroupCommand, vp_commands.VPCommand)
    }


def test_every_coordinator_command_has_one_handler() -> None:
    kinds = command_types(coordinator_commands)
    assert kinds, "no command types found"
    handled = OPS.kinds() | FRONT.kinds()
    assert kinds - handled == set(), "commands without a handler"
    assert OPS.kinds() & FRONT.kinds() == set(), "a command with two handlers"


def test_every_vp_command_has_one_handler() -> None:
    kinds = command_types(vp_commands)
    assert kinds == VP_OPS.kinds()


def test_commands_are_frozen_values_that_pickle() -> None:
    command = coordinator_commands.EditGroup("grp_1", GroupEdit(name="core"), "ann")
    assert pickle.loads(pickle.dumps(command)) == command
    with pytest.raises(dataclasses.FrozenInstanceError):
        command.actor = "bob"  # type: ignore[misc]


async def test_a_table_refuses_a_command_it_has_no_handler_for_and_a_second_handler() -> None:
    table: Handlers[object] = Handlers("test")

    @dataclasses.dataclass(frozen=True)
    class Known(Command[int]):
        n: int

    @dataclasses.dataclass(frozen=True)
    class Unknown(Command[int]):
        pass

    @table.on(Known)
    async def double(state: object, cmd: Known) -> int:
        return cmd.n * 2

    assert await table.run(object(), Known(21)) == 42
    with pytest.raises(UnknownCommand, match="test takes no Unknown"):
        await table.run(object(), Unknown())
    with pytest.raises(ValueError, match="has a handler already"):
        table.on(Known)(double)
