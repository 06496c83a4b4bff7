"""Helpers shared by the tests of OpenAIProvider (``tests/test_provider_openai*.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from engine.errors import ModelError
from engine.messages import Message
from engine.providers.base import ModelRequest, StreamItem
from engine.providers.openai import OpenAIProvider


def request(**kw: Any) -> ModelRequest:
    kw.setdefault("model", "gpt-test")
    kw.setdefault("system", "You are terse.")
    kw.setdefault("messages", [Message.user("hi")])
    return ModelRequest(**kw)


async def collect(provider: OpenAIProvider, req: ModelRequest | None = None) -> list[StreamItem]:
    return [item async for item in provider.stream(req or request())]


def of_type(items: list[StreamItem], kind: type) -> list[Any]:
    return [i for i in items if isinstance(i, kind)]


async def failure(provider: OpenAIProvider, req: ModelRequest | None = None) -> ModelError:
    with pytest.raises(ModelError) as info:
        await collect(provider, req)
    return info.value
