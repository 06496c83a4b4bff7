"""Helpers shared by the wire-model tests (``tests/test_protocol*.py``)."""

from __future__ import annotations

import json
import typing
from typing import Any


def member_types(union: Any) -> set[str]:
    """The wire type names of every member of an annotated discriminated union."""
    members = typing.get_args(typing.get_args(union)[0])
    names: set[str] = set()
    for member in members:
        names.update(typing.get_args(member.model_fields["type"].annotation))
    return names


def client_json(**fields: Any) -> str:
    """A client frame's JSON text from its wire fields."""
    return json.dumps(fields)
