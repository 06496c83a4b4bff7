"""The persona model: what one VP is, as read from its markdown file.

A persona file is YAML front matter followed by a markdown body. The front
matter is validated by :class:`PersonaMeta`, which forbids unknown keys so a
typo such as ``alias:`` is reported instead of silently ignored. The loaded
:class:`Persona` adds what is derived from the file: the body, where it came
from, whether it is built in, and a short hash of the text so a cached prompt
can tell when the file behind it changed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from protocol.settings import ToolPolicy

# Names that mean something other than one VP in a mention or a route target.
RESERVED_IDS = frozenset({"all", "user", "system", "everyone"})
MAX_ID_LENGTH = 40
_ID_CHARS = re.compile(r"[A-Za-z0-9_-]+")

ModelHint = Literal["primary", "fast"]


class PersonaError(Exception):
    """A mistake in a persona file, naming the file and, when known, the field.

    The message reads ``<path>: field '<field>': <problem>`` so a user who
    dropped a broken file into their data directory can fix it from the log
    line alone.
    """

    def __init__(self, path: str | Path, message: str, field: str | None = None) -> None:
        self.path = str(path)
        self.field = field
        self.message = message
        where = f"{self.path}: field '{field}'" if field else self.path
        super().__init__(f"{where}: {message}")


def id_problem(value: object) -> str | None:
    """Say what is wrong with a VP id or alias, or return None when it is valid.

    The rules match the mention parser: an id must be something a person can
    type after ``@`` and that cannot be mistaken for a broadcast or a number.
    """
    if not isinstance(value, str) or not value:
        return "must be a non-empty string"
    if len(value) > MAX_ID_LENGTH:
        return f"must be at most {MAX_ID_LENGTH} characters (got {len(value)})"
    if not _ID_CHARS.fullmatch(value):
        return "may only contain letters, digits, '_' and '-'"
    if value.startswith("_"):
        return "must not start with '_'"
    if value.isdigit():
        return "must not be all digits"
    if value.lower() in RESERVED_IDS:
        return f"'{value}' is reserved (all, user, system and everyone are)"
    return None


def _check_id(value: str) -> str:
    problem = id_problem(value)
    if problem:
        raise ValueError(problem)
    return value


class PersonaMeta(BaseModel):
    """The front matter of a persona file, exactly the keys a file may set."""

    # ``model`` and ``model_hint`` are file keys, not pydantic internals.
    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, protected_namespaces=()
    )

    id: str
    name: str = Field(min_length=1)
    name_zh: str | None = Field(default=None, alias="nameZh")
    role: str = Field(min_length=1)
    # A Chinese role is optional; prompts in Chinese fall back to ``role``.
    role_zh: str | None = Field(default=None, alias="roleZh")
    area: str = "general"
    aliases: tuple[str, ...] = ()
    traits: tuple[str, ...] = ()
    model_hint: ModelHint = Field(default="primary", alias="modelHint")
    # A concrete model name overrides the hint; None lets the engine choose.
    model: str | None = None
    # None means "whatever the mode offers"; a list narrows it to these names.
    tools: tuple[str, ...] | None = None
    # The MCP servers this VP may use, by name ("*": every configured one); a
    # group's own choice narrows it further.
    mcp_servers: tuple[str, ...] = Field(default=("*",), alias="mcpServers")
    # Approval policies of this VP's tools by name (or prefix ending in "*"):
    # auto, ask or deny; a group's own policies override them, except "deny".
    tool_policies: dict[str, ToolPolicy] = Field(default_factory=dict, alias="toolPolicies")

    @field_validator("mcp_servers", mode="before")
    @classmethod
    def _star_alone(cls, value: object) -> object:
        # ``mcpServers: "*"`` is the short form of ``["*"]``.
        return (value,) if isinstance(value, str) else value

    @field_validator("id")
    @classmethod
    def _valid_id(cls, value: str) -> str:
        return _check_id(value)

    @field_validator("aliases")
    @classmethod
    def _valid_aliases(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for alias in value:
            problem = id_problem(alias)
            if problem:
                raise ValueError(f"alias {alias!r}: {problem}")
        return value


class Persona(PersonaMeta):
    """A loaded persona: its front matter plus the body and where it came from."""

    body: str = Field(min_length=1)
    source: str
    builtin: bool
    persona_hash: str

    def display_name(self, language: str = "en") -> str:
        """The name to show in ``language``; Chinese falls back to ``name``."""
        if language == "zh" and self.name_zh:
            return self.name_zh
        return self.name

    def display_role(self, language: str = "en") -> str:
        """The role to show in ``language``; Chinese falls back to ``role``."""
        if language == "zh" and self.role_zh:
            return self.role_zh
        return self.role

    def names(self) -> tuple[str, ...]:
        """Every name this persona answers to: its id first, then its aliases."""
        return (self.id, *self.aliases)
