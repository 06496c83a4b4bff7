"""Every HTTP body takes from parsed JSON what its WebSocket twin takes from JSON text.

FastAPI validates a request body from the dict it parsed the JSON into, in
Python mode. The client models are strict, and strict Python validation
takes only an enum's own members, a tuple only as a tuple, a date only as a
date: such a field refuses over HTTP what the same model takes in a frame.
The first test walks every body of every route of the real app, field by
field down through nested models, and validates each enum value from its
JSON form the way FastAPI does; the second changes each enum-valued group
setting over real HTTP, on real Ray.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import types
import typing
import uuid
from pathlib import PurePath
from typing import Any

from pydantic import BaseModel

from protocol.settings import GroupSettings
from tests.fixtures.gateway import StartGateway, every_route

# Types strict Python validation takes only as themselves, never in their JSON form.
NOT_FROM_JSON = (
    tuple,
    set,
    frozenset,
    bytes,
    datetime.datetime,
    datetime.date,
    datetime.time,
    datetime.timedelta,
    uuid.UUID,
    PurePath,
    decimal.Decimal,
)


def _body_models() -> dict[str, type[BaseModel]]:
    """The body model of every route of the app ``yeaft serve`` builds, by route."""
    from fastapi.routing import APIRoute

    from docs.gen.http_doc import gateway_app

    app = gateway_app()
    bodies: dict[str, type[BaseModel]] = {}
    for route in every_route(app.routes):
        if not isinstance(route, APIRoute):
            continue
        for param in route.dependant.body_params:
            kind = param.field_info.annotation
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                bodies[f"{sorted(route.methods)[0]} {route.path}"] = kind
    return bodies


def _leaves(kind: Any) -> typing.Iterator[Any]:
    """The types inside an annotation (unions, containers, Annotated), models kept whole."""
    origin = typing.get_origin(kind)
    if origin is typing.Annotated:
        yield from _leaves(typing.get_args(kind)[0])
    elif origin in (typing.Union, types.UnionType, list, dict, typing.Literal):
        if origin is not typing.Literal:
            for arg in typing.get_args(kind):
                yield from _leaves(arg)
    elif origin is not None:
        yield origin
        for arg in typing.get_args(kind):
            yield from _leaves(arg)
    else:
        yield kind


def _fields(
    model: type[BaseModel], path: str, seen: set[type[BaseModel]]
) -> typing.Iterator[tuple[type[BaseModel], str, Any]]:
    """(model, dotted path, leaf type) for every field, nested models walked once."""
    if model in seen:
        return
    seen.add(model)
    for name, info in model.model_fields.items():
        for leaf in _leaves(info.annotation):
            yield model, f"{path}.{name}", leaf
            if isinstance(leaf, type) and issubclass(leaf, BaseModel):
                yield from _fields(leaf, f"{path}.{name}", seen)


def test_every_body_field_takes_its_json_form() -> None:
    bodies = _body_models()
    assert "PATCH /api/groups/{group_id}/settings" in bodies, sorted(bodies)
    refused: list[str] = []
    checked: set[str] = set()
    for route, body in sorted(bodies.items()):
        for model, path, leaf in _fields(body, route, set()):
            if not isinstance(leaf, type):
                continue
            where = f"{path} ({model.__name__})"
            if issubclass(leaf, enum.Enum):
                checked.add(path)
                for member in leaf:
                    # As FastAPI validates a body: the parsed JSON, in Python mode.
                    instance = model.model_construct()
                    try:
                        model.__pydantic_validator__.validate_assignment(
                            instance, _name(path), member.value
                        )
                    except ValueError as exc:
                        refused.append(f"{where} = {member.value!r}: {exc}")
            elif issubclass(leaf, NOT_FROM_JSON) and model.model_config.get("strict"):
                refused.append(f"{where}: {leaf.__name__} is taken only as itself")
    assert "PATCH /api/groups/{group_id}/settings.settings.queue_mode" in checked, checked
    conversation = "PATCH /api/conversations/{conversation_id}/settings.settings.queue_mode"
    assert conversation in checked, checked
    assert not refused, "\n".join(refused)


def _name(path: str) -> str:
    return path.rsplit(".", 1)[1]


def _enum_settings() -> dict[str, list[Any]]:
    """Each group setting whose values are a closed set, by wire name, with those values."""
    found: dict[str, list[Any]] = {}
    for name, info in GroupSettings.model_fields.items():
        kind = info.annotation
        values: list[Any] = []
        if isinstance(kind, type) and issubclass(kind, enum.Enum):
            values = [m.value for m in kind]
        elif typing.get_origin(kind) is typing.Literal:
            values = list(typing.get_args(kind))
        if values:
            found[info.alias or name] = values
    return found


async def test_each_enum_valued_setting_changes_over_http(start_gateway: StartGateway) -> None:
    settings = _enum_settings()
    assert "queueMode" in settings and "language" in settings, settings
    gw = await start_gateway()
    await gw.user("ann")
    made = await gw.http.post(
        "/api/groups", json={"name": "knobs", "roster": ["linus"]}, headers=gw.auth("ann")
    )
    assert made.status_code == 201, made.text
    url = f"/api/groups/{made.json()['id']}/settings"
    for wire, values in settings.items():
        for value in values:
            patched = await gw.http.patch(
                url, json={"settings": {wire: value}}, headers=gw.auth("ann")
            )
            assert patched.status_code == 200, (wire, value, patched.text)
            assert patched.json()["settings"][wire] == value
        bad = await gw.http.patch(
            url, json={"settings": {wire: "no-such-value"}}, headers=gw.auth("ann")
        )
        assert bad.status_code == 422, (wire, bad.text)
        assert bad.json()["error"]["field"] == f"settings.{wire}"
