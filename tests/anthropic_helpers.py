"""Helpers shared by the tests of AnthropicProvider (``tests/test_provider_anthropic*.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from engine.errors import ModelError
from engine.messages import Message
from engine.providers.anthropic import AnthropicProvider
from engine.providers.base import ModelRequest, StreamItem, ToolSpec

MODEL = "claude-test"  # not a real model name, so the SDK has no deprecation warning for it

SEARCH = ToolSpec(
    name="search",
    description="Search the notes.",
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["query"],
    },
)


def request(**kw: Any) -> ModelRequest:
    kw.setdefault("model", MODEL)
    kw.setdefault("system", "You are terse.")
    kw.setdefault("messages", [Message.user("hi")])
    return ModelRequest(**kw)


async def collect(provider: AnthropicProvider, req: ModelRequest | None = None) -> list[StreamItem]:
    return [item async for item in provider.stream(req or request())]


def of_type(items: list[StreamItem], kind: type) -> list[Any]:
    return [i for i in items if isinstance(i, kind)]


async def failure(provider: AnthropicProvider, req: ModelRequest | None = None) -> ModelError:
    with pytest.raises(ModelError) as info:
        await collect(provider, req)
    return info.value
