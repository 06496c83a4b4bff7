"""AnthropicProvider's errors, cancellation and lifecycle, with the real ``anthropic``
SDK against the fake LLM server.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.errors import ErrorKind, ModelError
from engine.events import TextDelta
from engine.providers.anthropic import AnthropicProvider
from engine.providers.base import ModelStop, StopItem, StreamItem
from tests.anthropic_helpers import MODEL, collect, failure, of_type, request
from tests.fixtures.llm_server import FakeLLM, Reply, ScriptedToolCall, refused_port


@pytest.fixture
async def provider(fake_llm: FakeLLM) -> AsyncIterator[AnthropicProvider]:
    p = AnthropicProvider(api_key="sk-ant-test", base_url=fake_llm.anthropic_base_url)
    yield p
    await p.aclose()


# --- errors --------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "kind", "retry_after"),
    [
        (Reply(status=429, headers={"retry-after": "12"}), ErrorKind.RATE_LIMIT, 12.0),
        (
            Reply(status=429, headers={"retry-after-ms": "250", "retry-after": "1"}),
            ErrorKind.RATE_LIMIT,
            0.25,
        ),
        (Reply(status=529), ErrorKind.OVERLOADED, None),
        (Reply(status=503), ErrorKind.OVERLOADED, None),
        (Reply(status=401), ErrorKind.AUTH, None),
        (Reply(status=404, error_message="model: claude-nope"), ErrorKind.MODEL_NOT_FOUND, None),
        (Reply(status=400, context_overflow=True), ErrorKind.CONTEXT_OVERFLOW, None),
        (Reply(status=413), ErrorKind.CONTEXT_OVERFLOW, None),
        (Reply(status=500), ErrorKind.SERVER_ERROR, None),
        (Reply(status=502, error_message="Bad gateway"), ErrorKind.SERVER_ERROR, None),
        # Anthropic sends an empty balance as a 400 invalid request: it is billing.
        (
            Reply(status=400, error_message="Your credit balance is too low"),
            ErrorKind.BILLING,
            None,
        ),
        (Reply(status=400, error_message="messages: field required"), ErrorKind.FORMAT, None),
        (
            Reply(status=400, error_message="Output blocked by content filtering policy"),
            ErrorKind.CONTENT_POLICY,
            None,
        ),
    ],
    ids=[
        "429",
        "429-ms",
        "529",
        "503",
        "401",
        "404",
        "overflow",
        "413",
        "500",
        "502",
        "credit",
        "400",
        "policy",
    ],
)
async def test_http_errors_are_classified(
    fake_llm: FakeLLM,
    provider: AnthropicProvider,
    reply: Reply,
    kind: ErrorKind,
    retry_after: float | None,
) -> None:
    fake_llm.push(reply)

    err = await failure(provider)

    assert err.kind is kind
    assert err.status == reply.status
    assert err.retry_after == retry_after
    assert err.provider == "anthropic"
    assert err.model == MODEL


async def test_context_overflow_keeps_the_server_message(
    fake_llm: FakeLLM, provider: AnthropicProvider
) -> None:
    fake_llm.context_overflow()

    err = await failure(provider)

    assert err.message.startswith("prompt is too long")


@pytest.mark.parametrize(
    ("error_type", "kind", "status"),
    [
        ("overloaded_error", ErrorKind.OVERLOADED, 529),
        ("rate_limit_error", ErrorKind.RATE_LIMIT, 429),
        ("api_error", ErrorKind.SERVER_ERROR, 500),
    ],
)
async def test_error_event_mid_stream(
    fake_llm: FakeLLM,
    provider: AnthropicProvider,
    error_type: str,
    kind: ErrorKind,
    status: int,
) -> None:
    fake_llm.push(
        Reply(text="partial", chunks=2, stream_error="Overloaded", stream_error_type=error_type)
    )
    received: list[StreamItem] = []

    with pytest.raises(ModelError) as info:
        async for item in provider.stream(request()):
            received.append(item)

    assert "".join(t.text for t in of_type(received, TextDelta)) == "partial"
    assert not of_type(received, StopItem)
    assert info.value.kind is kind
    # The event rode on a 200 response; the status is the one its type stands for.
    assert info.value.status == status
    assert info.value.message == "Overloaded"


async def test_a_refusal_stop_is_a_content_policy_stop_with_its_details(
    fake_llm: FakeLLM, provider: AnthropicProvider
) -> None:
    explanation = "This request was declined because it could enable cyber harm."
    fake_llm.push(
        Reply(text="Hello..", stop="refusal", refusal=explanation, refusal_category="cyber")
    )
    fake_llm.push(Reply(tool_calls=[ScriptedToolCall("search", {"q": "x"})], stop="refusal"))

    refused, calling = await collect(provider), await collect(provider)

    assert "".join(t.text for t in of_type(refused, TextDelta)) == "Hello.."
    assert refused[-1] == StopItem(
        ModelStop.CONTENT_FILTER, f'stop_reason "refusal" (category cyber): {explanation}'
    )
    # A refused reply is no tool round, even when it had begun a call.
    assert calling[-1] == StopItem(ModelStop.CONTENT_FILTER, 'stop_reason "refusal"')


async def test_stream_cut_short_is_reported_as_cut_not_timeout(
    fake_llm: FakeLLM, provider: AnthropicProvider
) -> None:
    fake_llm.push(Reply(text="half", truncate=True))

    err = await failure(provider)

    assert err.kind is ErrorKind.STREAM_CUT
    assert "cut off" in err.message
    assert "timed out" not in err.message


async def test_connection_refused_is_a_timeout() -> None:
    with refused_port() as down:
        provider = AnthropicProvider(api_key="k", base_url=f"http://127.0.0.1:{down}")
        try:
            err = await failure(provider)
        finally:
            await provider.aclose()

    assert err.kind is ErrorKind.TIMEOUT
    assert err.status is None
    assert err.provider == "anthropic"


async def test_slow_first_byte_hits_the_client_timeout(fake_llm: FakeLLM) -> None:
    fake_llm.push(Reply(text="late", delay=5.0))
    provider = AnthropicProvider(api_key="k", base_url=fake_llm.anthropic_base_url, timeout=0.3)
    try:
        err = await failure(provider)
    finally:
        await provider.aclose()

    assert err.kind is ErrorKind.TIMEOUT


def _no_ambient_credentials(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    # Keep the SDK from finding credentials anywhere on this machine.
    for var in (
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_PROFILE",
        "ANTHROPIC_CONFIG_DIR",
        "ANTHROPIC_IDENTITY_TOKEN",
        "ANTHROPIC_IDENTITY_TOKEN_FILE",
        "ANTHROPIC_FEDERATION_RULE_ID",
        "ANTHROPIC_ORGANIZATION_ID",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))


async def test_no_credentials_is_an_auth_error(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _no_ambient_credentials(monkeypatch, tmp_path)
    provider = AnthropicProvider(api_key=None, base_url=fake_llm.anthropic_base_url)
    try:
        err = await failure(provider)
    finally:
        await provider.aclose()

    assert err.kind is ErrorKind.AUTH
    assert fake_llm.requests == []


async def test_broken_credential_profile_is_an_auth_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A named config directory without a profile in it: the SDK raises while
    # constructing, and the provider reports that as an auth error.
    _no_ambient_credentials(monkeypatch, tmp_path)
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "anthropic"))

    with pytest.raises(ModelError) as info:
        AnthropicProvider(api_key=None, base_url="http://127.0.0.1:9")

    assert info.value.kind is ErrorKind.AUTH


# --- cancellation and lifecycle -----------------------------------------


async def test_cancelling_a_slow_stream_propagates(
    fake_llm: FakeLLM, provider: AnthropicProvider
) -> None:
    fake_llm.push(Reply(text="one two three four", chunks=4, chunk_delay=5.0))
    first = asyncio.Event()
    received: list[StreamItem] = []

    async def consume() -> None:
        async for item in provider.stream(request()):
            received.append(item)
            first.set()

    task = asyncio.create_task(consume())
    await first.wait()
    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(of_type(received, TextDelta)) == 1


async def test_cancelling_before_the_first_byte_propagates(
    fake_llm: FakeLLM, provider: AnthropicProvider
) -> None:
    fake_llm.push(Reply(text="late", delay=5.0))

    # wait_for turns the inner cancellation into TimeoutError only if the
    # provider lets CancelledError through instead of converting it.
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(collect(provider), timeout=0.3)


async def test_aclose_closes_the_client(fake_llm: FakeLLM) -> None:
    provider = AnthropicProvider(api_key="k", base_url=fake_llm.anthropic_base_url)
    fake_llm.text("ok")
    await collect(provider)

    await provider.aclose()

    assert provider._client.is_closed()
