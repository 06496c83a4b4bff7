"""docs/protocol.md: every WebSocket frame and ``yeaft_output`` payload, from ``protocol``.

Frames are read off the three discriminated unions (``ClientFrame``,
``ServerFrame``, ``DataPayload``); every model and enum a field refers to
gets a section of its own, so the page covers the protocol transitively.
"""

from __future__ import annotations

import enum
import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from docs.gen.markdown import docstring, field_comments, generated_note, table
from protocol.client import ClientFrame
from protocol.data import DataPayload
from protocol.server import ServerFrame

INTRO = """\
# The WebSocket protocol

{note}

Every frame is a JSON object whose `type` names it. Wire names are
camelCase (the `data` payloads inside `yeaft_output` and `claude_output`
keep snake_case). Client frames are strict: an unknown field, a wrong type
or a value out of bounds is refused with an `error` frame naming the field.
Server frames may gain fields; clients ignore the ones they do not know.
Optional fields the server has no value for are left out. `yeaft schema`
prints the same protocol as JSON Schema.
"""


def members(union: Any) -> list[type[BaseModel]]:
    """The models of a discriminated union, in their declared order."""
    inner = get_args(union)[0] if get_origin(union) is Annotated else union
    return list(get_args(inner))


UNIONS = (
    ("Client frames", ClientFrame),
    ("Server frames", ServerFrame),
    ("`data` payloads of `yeaft_output` and `claude_output`", DataPayload),
)


def render() -> str:
    """The whole page."""
    return _Page().render()


class _Page:
    """One rendering: the anchors of the sections, and the models still to describe."""

    def __init__(self) -> None:
        self.queue: list[type] = []
        self.anchors: dict[type, str] = {}
        used: dict[str, int] = {}
        # GitHub numbers repeated headings: the second "mcp_servers_list" is "-1".
        for _, union in UNIONS:
            for model in members(union):
                slug = _frame_type(model)
                count = used.get(slug, 0)
                used[slug] = count + 1
                self.anchors[model] = f"{slug}-{count}" if count else slug

    def render(self) -> str:
        parts = [INTRO.format(note=generated_note("the `protocol` package")).strip()]
        done: set[type] = set()
        for title, union in UNIONS:
            parts.append(f"## {title}")
            for model in members(union):
                done.add(model)
                parts.append(self.model_section(model, heading=_frame_type(model)))
        parts.append("## Shared models and values")
        while self.queue:
            item = self.queue.pop(0)
            if item in done:
                continue
            done.add(item)
            if issubclass(item, enum.Enum):
                parts.append(_enum_section(item))
            elif issubclass(item, BaseModel):
                parts.append(self.model_section(item, heading=item.__name__))
        return "\n\n".join(parts) + "\n"

    def model_section(self, model: type[BaseModel], *, heading: str) -> str:
        lines = [f"### {heading}"]
        if heading != model.__name__:
            lines.append(f"`{model.__module__}.{model.__name__}`")
        text = docstring(model)
        if text:
            lines.append(text)
        notes = field_comments(model)
        rows = []
        for name, field in model.model_fields.items():
            if name == "type" and get_origin(field.annotation) is Literal:
                others = get_args(field.annotation)[1:]
                if others:
                    lines.append("Also accepted as: " + ", ".join(f"`{v}`" for v in others) + ".")
                continue
            rows.append(
                (
                    f"`{field.alias or name}`",
                    self.type_text(field.annotation) + _bounds(field, _is_list(field.annotation)),
                    "yes" if field.is_required() else "no",
                    field.description or notes.get(name, ""),
                )
            )
        if rows:
            lines.append(table(("field", "type", "required", "meaning"), rows))
        elif heading != model.__name__:
            lines.append("No fields besides `type`.")
        return "\n\n".join(lines)

    def type_text(self, annotation: Any) -> str:
        """A type in wire terms; models and enums are linked (and queued for a section)."""
        origin = get_origin(annotation)
        args = get_args(annotation)
        if origin is Annotated:
            return self.type_text(args[0])
        if origin in (Union, types.UnionType):
            return " or ".join(self.type_text(a) for a in args if a is not type(None))
        if origin is Literal:
            return " or ".join(f'`"{a}"`' if isinstance(a, str) else f"`{a}`" for a in args)
        if origin in (list, tuple, set, frozenset):
            return f"list of {self.type_text(args[0])}" if args else "list"
        if origin is dict or annotation is dict:
            return "object"
        if annotation in _NAMES:
            return _NAMES[annotation]
        if isinstance(annotation, type) and issubclass(annotation, BaseModel | enum.Enum):
            if annotation not in self.anchors:
                self.queue.append(annotation)
            anchor = self.anchors.get(annotation, annotation.__name__.lower())
            return f"[{annotation.__name__}](#{anchor})"
        return "any"


def _frame_type(model: type[BaseModel]) -> str:
    values = get_args(model.model_fields["type"].annotation)
    return str(values[0])


def _enum_section(kind: type[enum.Enum]) -> str:
    lines = [f"### {kind.__name__}"]
    text = docstring(kind)
    if text:
        lines.append(text)
    lines.append("Values: " + ", ".join(f"`{member.value}`" for member in kind) + ".")
    return "\n\n".join(lines)


_NAMES = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


def _is_list(annotation: Any) -> bool:
    """Whether a field holds a list (``None`` aside), so that a length counts items."""
    if get_origin(annotation) in (Union, types.UnionType):
        return any(_is_list(a) for a in get_args(annotation) if a is not type(None))
    return get_origin(annotation) in (list, tuple, set, frozenset)


def _bounds(field: FieldInfo, is_list: bool) -> str:
    limits = []
    for item in field.metadata:
        for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            if hasattr(item, attr):
                limits.append(f"{sign} {getattr(item, attr)}")
        if getattr(item, "max_length", None) is not None:
            unit = "items" if is_list else "characters"
            limits.append(f"at most {item.max_length} {unit}")
    return f" ({', '.join(limits)})" if limits else ""
