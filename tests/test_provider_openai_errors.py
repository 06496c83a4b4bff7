"""OpenAIProvider's errors, cancellation and lifecycle, with the real ``openai``
SDK against the fake LLM server.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from engine.errors import ErrorKind, ModelError
from engine.events import TextDelta
from engine.providers.base import ModelStop, StopItem, StreamItem
from engine.providers.openai import OpenAIProvider
from tests.fixtures.llm_server import FakeLLM, Reply, ScriptedToolCall, refused_port
from tests.openai_helpers import collect, failure, of_type, request


@pytest.fixture
async def provider(fake_llm: FakeLLM) -> AsyncIterator[OpenAIProvider]:
    p = OpenAIProvider(api_key="sk-test", base_url=fake_llm.openai_base_url)
    yield p
    await p.aclose()


# --- errors --------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "kind", "retry_after"),
    [
        (Reply(status=429, headers={"Retry-After": "7"}), ErrorKind.RATE_LIMIT, 7.0),
        (Reply(status=429, headers={"retry-after-ms": "1500"}), ErrorKind.RATE_LIMIT, 1.5),
        (
            Reply(
                status=429,
                error_message="You exceeded your current quota",
                error_code="insufficient_quota",
            ),
            ErrorKind.BILLING,
            None,
        ),
        (
            Reply(status=503, error_message="The engine is currently overloaded"),
            ErrorKind.OVERLOADED,
            None,
        ),
        (Reply(status=529), ErrorKind.OVERLOADED, None),
        (Reply(status=401, error_code="invalid_api_key"), ErrorKind.AUTH, None),
        (Reply(status=404, error_code="model_not_found"), ErrorKind.MODEL_NOT_FOUND, None),
        (Reply(status=400, context_overflow=True), ErrorKind.CONTEXT_OVERFLOW, None),
        (Reply(status=500), ErrorKind.SERVER_ERROR, None),
        (Reply(status=502, error_message="Bad gateway"), ErrorKind.SERVER_ERROR, None),
        (Reply(status=504), ErrorKind.TIMEOUT, None),
        (
            Reply(status=400, error_message="'messages' must be an array"),
            ErrorKind.FORMAT,
            None,
        ),
        (
            Reply(
                status=400,
                error_message="Your request was rejected by our safety system",
                error_code="content_policy_violation",
            ),
            ErrorKind.CONTENT_POLICY,
            None,
        ),
    ],
    ids=[
        "429",
        "429-ms",
        "quota",
        "503",
        "529",
        "401",
        "404",
        "overflow",
        "500",
        "502",
        "504",
        "400",
        "policy",
    ],
)
async def test_http_errors_are_classified(
    fake_llm: FakeLLM,
    provider: OpenAIProvider,
    reply: Reply,
    kind: ErrorKind,
    retry_after: float | None,
) -> None:
    fake_llm.push(reply)

    err = await failure(provider)

    assert err.kind is kind
    assert err.status == reply.status
    assert err.retry_after == retry_after
    assert err.provider == "openai"
    assert err.model == "gpt-test"


async def test_context_overflow_keeps_the_server_message(
    fake_llm: FakeLLM, provider: OpenAIProvider
) -> None:
    fake_llm.context_overflow()

    err = await failure(provider)

    assert err.message.startswith("This model's maximum context length is")


async def test_mid_stream_error_after_some_text(
    fake_llm: FakeLLM, provider: OpenAIProvider
) -> None:
    fake_llm.push(Reply(text="partial answer", chunks=2, stream_error="The server had an error"))
    received: list[StreamItem] = []

    with pytest.raises(ModelError) as info:
        async for item in provider.stream(request()):
            received.append(item)

    assert "".join(t.text for t in of_type(received, TextDelta)) == "partial answer"
    assert not of_type(received, StopItem)
    assert info.value.kind is ErrorKind.SERVER_ERROR  # retryable, and not called a timeout
    assert "server had an error" in info.value.message


async def test_a_content_filter_finish_is_a_content_policy_stop_with_the_refusal(
    fake_llm: FakeLLM, provider: OpenAIProvider
) -> None:
    fake_llm.push(Reply(text="partial", stop="content_filter", refusal="I can't help with that."))
    fake_llm.push(Reply(tool_calls=[ScriptedToolCall("search", {"q": "x"})], stop="content_filter"))

    refused, calling = await collect(provider), await collect(provider)

    assert "".join(t.text for t in of_type(refused, TextDelta)) == "partial"
    assert refused[-1] == StopItem(
        ModelStop.CONTENT_FILTER, 'finish_reason "content_filter": I can\'t help with that.'
    )
    # A filtered reply is no tool round, even when it had begun a call.
    assert calling[-1] == StopItem(ModelStop.CONTENT_FILTER, 'finish_reason "content_filter"')


async def test_mid_stream_rate_limit_error(fake_llm: FakeLLM, provider: OpenAIProvider) -> None:
    fake_llm.push(
        Reply(text="a", stream_error="Slow down", stream_error_type="rate_limit_exceeded")
    )

    err = await failure(provider)

    assert err.kind is ErrorKind.RATE_LIMIT


async def test_stream_cut_short_is_reported_as_cut_not_timeout(
    fake_llm: FakeLLM, provider: OpenAIProvider
) -> None:
    fake_llm.push(Reply(text="half an ans", truncate=True))

    err = await failure(provider)

    assert err.kind is ErrorKind.STREAM_CUT
    assert "cut off" in err.message
    assert "timed out" not in err.message


async def test_connection_refused_is_a_timeout() -> None:
    with refused_port() as down:
        provider = OpenAIProvider(api_key="sk-test", base_url=f"http://127.0.0.1:{down}/v1")
        try:
            err = await failure(provider)
        finally:
            await provider.aclose()

    assert err.kind is ErrorKind.TIMEOUT
    assert err.status is None
    assert err.provider == "openai"


async def test_slow_first_byte_hits_the_client_timeout(fake_llm: FakeLLM) -> None:
    fake_llm.push(Reply(text="late", delay=5.0))
    provider = OpenAIProvider(api_key="k", base_url=fake_llm.openai_base_url, timeout=0.3)
    try:
        err = await failure(provider)
    finally:
        await provider.aclose()

    assert err.kind is ErrorKind.TIMEOUT


async def test_missing_key_without_base_url_is_an_auth_error() -> None:
    with pytest.raises(ModelError) as info:
        OpenAIProvider(api_key=None)

    assert info.value.kind is ErrorKind.AUTH


# --- cancellation and lifecycle -----------------------------------------


async def test_cancelling_a_slow_stream_propagates(
    fake_llm: FakeLLM, provider: OpenAIProvider
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
    fake_llm: FakeLLM, provider: OpenAIProvider
) -> None:
    fake_llm.push(Reply(text="late", delay=5.0))

    # wait_for turns the inner cancellation into TimeoutError only if the
    # provider lets CancelledError through instead of converting it.
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(collect(provider), timeout=0.3)


async def test_aclose_closes_the_client(fake_llm: FakeLLM) -> None:
    provider = OpenAIProvider(api_key="k", base_url=fake_llm.openai_base_url)
    fake_llm.text("ok")
    await collect(provider)

    await provider.aclose()

    assert provider._client.is_closed()
