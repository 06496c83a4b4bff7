"""docs/configuration.md: every setting of the pydantic-settings classes.

A setting's description is its ``Field(description=...)`` or, failing
that, the comment above it in the class; a secret's value is never printed.
"""

from __future__ import annotations

import enum
import types
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import AliasChoices, SecretStr
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from docs.gen.markdown import field_comments, generated_note, table
from engine.settings import EngineSettings
from gateway.settings import GatewaySettings
from store import StoreSettings

# Each class with the title of its section; a setting shown in an earlier
# section (a field a later class inherits or repeats) is not shown again.
SECTIONS: tuple[tuple[str, type[BaseSettings]], ...] = (
    ("Store", StoreSettings),
    ("Gateway", GatewaySettings),
    ("Engine and models", EngineSettings),
)

INTRO = """\
# Configuration

{note}

Every setting is an environment variable with a default; nothing is
required. `yeaft serve`, `yeaft ask` and the `yeaft user`/`yeaft token`
commands read them when they start; every actor gets them from the process
that started the deployment, never from its own environment. Lists and
objects are JSON (`YEAFT_FALLBACK_MODELS='["openai:gpt-4o-mini"]'`).
Secrets are shown as `secret`: their values are never printed.

Budgets and quotas are not environment settings: they change while the
server runs. A group's day, month and per-message limits are group settings
(`budgetTokensPerDay`, `budgetUsdPerDay`, `budgetTokensPerMonth`,
`budgetUsdPerMonth`, `budgetTokensPerMessage`, `budgetUsdPerMessage`, set by
its owner: `PATCH /api/groups/{{id}}/settings`); a person's own daily and
monthly limits, which count their spending in every group, are set by an
administrator (`PUT /api/admin/users/{{username}}/quota`). Both are kept in
the store; see [web-api.md](web-api.md#quotas-and-usage).
"""


def render() -> str:
    """The whole page."""
    names = ", ".join(f"`{cls.__module__}.{cls.__name__}`" for _, cls in SECTIONS)
    parts = [INTRO.format(note=generated_note(names)).strip()]
    seen: set[str] = set()
    for title, cls in SECTIONS:
        rows = []
        notes = _notes(cls)
        for name, field in cls.model_fields.items():
            variables = env_names(cls, name, field)
            if variables[0] in seen:
                continue
            seen.update(variables)
            rows.append(
                (
                    " or ".join(f"`{v}`" for v in variables),
                    type_name(field),
                    default_text(field),
                    field.description or notes.get(name, ""),
                )
            )
        header = f"## {title}\n\nFrom `{cls.__module__}.{cls.__name__}`.\n"
        parts.append(header + "\n" + table(("variable", "type", "default", "meaning"), rows))
    return "\n\n".join(parts) + "\n"


def _notes(cls: type) -> dict[str, str]:
    """The field comments of ``cls`` and of its bases (a field's own class wins)."""
    notes: dict[str, str] = {}
    for base in reversed(cls.__mro__):
        notes.update(field_comments(base) if base.__module__.split(".")[0] != "pydantic" else {})
    return notes


def env_names(cls: type[BaseSettings], name: str, field: FieldInfo) -> list[str]:
    """The environment variables that set a field, the preferred one first."""
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        return [str(choice) for choice in alias.choices]
    if isinstance(alias, str):
        return [alias]
    prefix = str(cls.model_config.get("env_prefix", ""))
    return [(prefix + name).upper()]


def _members(annotation: Any) -> tuple[Any, bool]:
    """The annotation without ``None``, and whether ``None`` was allowed."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return (args[0] if len(args) == 1 else annotation), len(args) < len(get_args(annotation))
    return annotation, False


_SIMPLE = {str: "string", int: "integer", float: "number", bool: "boolean", Path: "path"}


def _plain_type(annotation: Any) -> str:
    origin = get_origin(annotation)
    if annotation in _SIMPLE:
        return _SIMPLE[annotation]
    if annotation is SecretStr:
        return "secret"
    if annotation is timedelta:
        return "duration"
    if origin is Literal:
        return " / ".join(str(a) for a in get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " / ".join(str(member.value) for member in annotation)
    if origin in (list, tuple, set, frozenset):
        return "JSON list"
    if origin is dict:
        return "JSON object"
    return getattr(annotation, "__name__", str(annotation))


def type_name(field: FieldInfo) -> str:
    """A field's type in words, with its bounds (``integer ≥ 1``)."""
    annotation, _ = _members(field.annotation)
    text = _plain_type(annotation)
    bounds = {
        annotated_types.Ge: "≥",
        annotated_types.Gt: ">",
        annotated_types.Le: "≤",
        annotated_types.Lt: "<",
    }
    limits = [
        f"{sign} {getattr(item, kind.__name__.lower()):g}"
        for item in field.metadata
        for kind, sign in bounds.items()
        if isinstance(item, kind)
    ]
    return ", ".join([text, *limits])


def default_text(field: FieldInfo) -> str:
    """A field's default as it would be written in the environment; secrets masked."""
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True, validated_data={})
    if value is None:
        return "unset"
    annotation, _ = _members(field.annotation)
    if annotation is SecretStr:
        return "secret"
    return f"`{_value_text(value)}`"


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, timedelta):
        return _duration(value)
    if isinstance(value, list | tuple | set | frozenset):
        return "[" + ", ".join(f'"{v}"' for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f'"{k}": {v}' for k, v in value.items()) + "}"
    return str(value)


def _duration(value: timedelta) -> str:
    seconds = int(value.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
