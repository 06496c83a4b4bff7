"""docs/http-api.md: every HTTP route of the gateway, from the app's OpenAPI document.

The app is built as ``yeaft serve`` builds it (``gateway.server.create_app``)
on a runtime that is never started: making the routes needs no Ray, no store
and no network, and nothing is written to the scratch directory it is given.
"""

from __future__ import annotations

import inspect
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docs.gen.markdown import generated_note, table

if TYPE_CHECKING:
    from fastapi import FastAPI

INTRO = """\
# HTTP API

{note}

Requests and answers are JSON unless said otherwise. Every route under
`/api` but `POST /api/login`, the sign-in routes under `/api/auth` and
following an invite link (`POST /api/invites/lookup`, `POST
/api/invites/accept`) needs the session: an `Authorization: Bearer
TOKEN` header, or the `yeaft_session` cookie that login sets (a cookie
request from another site's page is refused). A refusal is
`{{"error": {{"code", "message", "field"?, "retryAfter"?, "detail"?}}}}` with the status that
fits (401, 403, 404, 409, 413, 422, 429). A running server serves the same
description at `/api/openapi.json` and an interactive page at `/api/docs`.
What each route means, beyond its line here: [web-api.md](web-api.md).
"""

# The bodies FastAPI describes for its own validation errors: the gateway
# answers those with its error shape instead (see the introduction).
_SKIPPED_SCHEMAS = {"HTTPValidationError", "ValidationError"}


def gateway_app() -> FastAPI:
    """The gateway app as ``yeaft serve`` builds it, on a runtime that is never started."""
    from actors.config import RuntimeConfig
    from coordinator.runtime import Runtime
    from gateway.server import create_app
    from gateway.settings import GatewaySettings
    from store.config import StoreConfig

    with tempfile.TemporaryDirectory() as scratch:
        # model_construct: the defaults, whatever YEAFT_* variables this shell has.
        settings = GatewaySettings.model_construct(data_dir=Path(scratch))
        runtime = Runtime(RuntimeConfig(store=StoreConfig(None, Path(scratch))))
        return create_app(settings, runtime)


def openapi() -> dict[str, Any]:
    """The OpenAPI document of the gateway app, built without starting anything."""
    return gateway_app().openapi()


def render(spec: dict[str, Any] | None = None) -> str:
    """The whole page."""
    spec = spec or openapi()
    parts = [INTRO.format(note=generated_note("`gateway.server.create_app().openapi()`")).strip()]
    operations = [
        (method.upper(), path, op)
        for path, methods in spec["paths"].items()
        for method, op in methods.items()
    ]
    parts.append("## Routes")
    parts.append(
        table(
            ("method", "path", "what it does"),
            ((m, f"`{p}`", _first_line(op) or op.get("summary", "")) for m, p, op in operations),
        )
    )
    parts += [_operation(method, path, op) for method, path, op in operations]
    parts.append("## Request bodies")
    schemas = spec.get("components", {}).get("schemas", {})
    for name, schema in schemas.items():
        if name not in _SKIPPED_SCHEMAS:
            parts.append(_schema_section(name, schema))
    return "\n\n".join(parts) + "\n"


def _first_line(op: dict[str, Any]) -> str:
    return inspect.cleandoc(op.get("description", "")).split("\n\n")[0].replace("\n", " ")


def _operation(method: str, path: str, op: dict[str, Any]) -> str:
    lines = [f"### {method} {path}", f"*{op.get('summary', '')}*"]
    description = op.get("description")
    if description:
        lines.append(inspect.cleandoc(description))
    parameters = op.get("parameters", [])
    if parameters:
        rows = (
            (
                f"`{p['name']}`",
                p["in"],
                _type(p.get("schema", {})),
                "yes" if p.get("required") else "no",
            )
            for p in parameters
        )
        lines.append(table(("parameter", "in", "type", "required"), rows))
    body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
    if body:
        lines.append(f"Body: {_type(body.get('schema', {}))}.")
    codes = ", ".join(f"{code} {r.get('description', '')}" for code, r in op["responses"].items())
    lines.append(f"Answers: {codes}.")
    return "\n\n".join(lines)


def _schema_section(name: str, schema: dict[str, Any]) -> str:
    lines = [f"### {name}"]
    if schema.get("description"):
        lines.append(inspect.cleandoc(schema["description"]))
    if "enum" in schema:
        lines.append("Values: " + ", ".join(f"`{v}`" for v in schema["enum"]) + ".")
        return "\n\n".join(lines)
    required = set(schema.get("required", []))
    rows = (
        (
            f"`{field}`",
            _type(prop),
            "yes" if field in required else "no",
            prop.get("description", ""),
        )
        for field, prop in schema.get("properties", {}).items()
    )
    lines.append(table(("field", "type", "required", "meaning"), rows))
    return "\n\n".join(lines)


def _type(schema: dict[str, Any]) -> str:
    """A JSON Schema in a few words; references link to their section."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "anyOf" in schema:
        return " or ".join(_type(s) for s in schema["anyOf"] if s.get("type") != "null")
    if "enum" in schema:
        return " or ".join(f"`{v}`" for v in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {_type(schema.get('items', {}))}"
    return str(kind)
