"""Traces in one process, read from the SDK's in-memory exporter.

The spans of a whole message across the gateway, coordinator and VP
processes are read back from a real trace backend in
``tests/test_tracing_backend.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import BaseModel

from actors.commands import Command, Handlers
from engine.errors import ErrorKind
from engine.messages import Conversation, Message, ToolCall
from engine.providers.scripted import Fail, Reply
from engine.tools.registry import Tool, ToolContext, ToolRegistry
from telemetry import tracing
from telemetry.config import TracingConfig, TracingConfigError
from tests.engine_helpers import scripted_engine


class Spans:
    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self.exporter = exporter

    def all(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.all() if s.name.startswith(prefix)]


def _install(config: TracingConfig) -> Spans:
    exporter = InMemorySpanExporter()
    tracing.install(config, "test", SimpleSpanProcessor(exporter))
    return Spans(exporter)


@pytest.fixture
def spans() -> Iterator[Spans]:
    yield _install(TracingConfig(endpoint="http://127.0.0.1:9/v1/traces"))
    tracing.uninstall()


@pytest.fixture
def spans_with_content() -> Iterator[Spans]:
    yield _install(TracingConfig(endpoint="http://127.0.0.1:9/v1/traces", capture_content=True))
    tracing.uninstall()


# -- configuration ---------------------------------------------------------------
def test_tracing_is_off_unless_an_endpoint_is_set() -> None:
    assert not TracingConfig.from_env({}).enabled
    assert not TracingConfig.from_env({"OTEL_SERVICE_NAME": "x"}).enabled
    off = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}
    assert not TracingConfig.from_env(off).enabled
    none = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}
    assert not TracingConfig.from_env(none).enabled


def test_the_standard_variables_configure_it() -> None:
    config = TracingConfig.from_env(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/",
            "OTEL_SERVICE_NAME": "chat",
            "OTEL_EXPORTER_OTLP_HEADERS": "api-key=s3cr%3Dt,x-team=core",
            "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod",
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "0.25",
            "OTEL_BSP_SCHEDULE_DELAY": "200",
        }
    )
    assert config.endpoint == "http://collector:4318/v1/traces"
    assert config.service_name == "chat" and config.capture_content
    assert config.headers == {"api-key": "s3cr=t", "x-team": "core"}
    assert config.resource == {"deployment.environment": "prod"}
    assert (config.sampler, config.ratio, config.export_delay_s) == (
        "parentbased_traceidratio",
        0.25,
        0.2,
    )
    # A header is often a key: it stays out of the repr (and so out of logs).
    assert "s3cr" not in repr(config)
    traces_only = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/custom"}
    assert TracingConfig.from_env(traces_only).endpoint == "http://c:4318/custom"


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "http/protobuf"),
        ({"OTEL_TRACES_SAMPLER": "sometimes"}, "OTEL_TRACES_SAMPLER=sometimes"),
        ({"OTEL_TRACES_SAMPLER_ARG": "half"}, "not a number"),
        ({"OTEL_EXPORTER_OTLP_HEADERS": "secret-without-a-name"}, "key=value"),
    ],
)
def test_a_setting_it_cannot_use_is_refused_by_name(env: dict[str, str], says: str) -> None:
    with pytest.raises(TracingConfigError, match=says) as refused:
        TracingConfig.from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", **env})
    assert "secret-without-a-name" not in str(refused.value)


def test_with_tracing_off_nothing_is_recorded_and_no_context_travels() -> None:
    tracing.uninstall()
    assert not tracing.active()
    with tracing.span("anything") as span:
        assert not span.is_recording()
        assert tracing.traceparent() is None


# -- across a command ---------------------------------------------------------------
@dataclasses.dataclass(frozen=True, slots=True)
class Echo(Command[str | None]):
    text: str


async def test_a_command_carries_its_trace_and_its_handler_runs_in_it(spans: Spans) -> None:
    table: Handlers[object] = Handlers("test")
    seen: list[str | None] = []

    @table.on(Echo)
    async def echo(state: object, cmd: Echo) -> str | None:
        with tracing.span("handled"):
            seen.append(tracing.traceparent())
        return cmd.text

    assert Echo("outside").trace is None
    with tracing.span("sender") as sender:
        command = Echo("hi")
    assert command.trace is not None
    trace_id = format(sender.get_span_context().trace_id, "032x")
    assert command.trace.split("-")[1] == trace_id
    # Taken elsewhere (no span current), its handler still runs in the sender's trace.
    assert await table.run(object(), command) == "hi"
    [handled] = spans.named("handled")
    assert handled.parent is not None
    assert handled.parent.span_id == sender.get_span_context().span_id
    assert handled.context.trace_id == sender.get_span_context().trace_id
    assert seen[0] is not None and seen[0].split("-")[1] == trace_id
    # An explicit trace (a turn's stored one) wins over the current span.
    with tracing.span("other"):
        kept = Echo("again", trace=command.trace)
    assert kept.trace == command.trace


# -- model calls and tools ------------------------------------------------------------
async def test_each_model_attempt_is_a_chat_span_with_usage_and_fallback(spans: Spans) -> None:
    engine, _, _ = scripted_engine(
        Fail(ErrorKind.OVERLOADED, status=529),
        Fail(ErrorKind.OVERLOADED, status=529),
        Fail(ErrorKind.OVERLOADED, status=529),
        Fail(ErrorKind.OVERLOADED, status=529),
        Reply("fine"),
        fallbacks=["offline:second"],
    )
    with tracing.span("turn"):
        result = await engine.run_turn(Conversation(id="c"), Message.user("q"), system="s")
    assert result.text == "fine"
    chats = spans.named("chat ")
    assert [s.attributes["yeaft.fallback"] for s in chats] == [0, 0, 0, 0, 1]
    assert [s.attributes["yeaft.attempt"] for s in chats] == [1, 2, 3, 4, 5]
    assert [s.name for s in chats] == ["chat test"] * 4 + ["chat second"]
    for failed in chats[:4]:
        assert failed.status.status_code is StatusCode.ERROR
        assert failed.attributes["error.type"] == "overloaded"
    ok = chats[-1]
    assert ok.kind is SpanKind.CLIENT and ok.status.status_code is not StatusCode.ERROR
    attrs = ok.attributes
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.provider.name"] == "offline"
    assert attrs["gen_ai.request.model"] == "second"
    assert attrs["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert attrs["gen_ai.usage.output_tokens"] > 0
    # Nothing of the conversation is recorded unless allowed.
    assert not any(k.endswith("messages") or "instructions" in k for k in attrs)
    [turn] = spans.named("turn")
    assert all(s.parent and s.parent.span_id == turn.context.span_id for s in chats)


async def test_content_is_recorded_only_when_allowed(spans_with_content: Spans) -> None:
    engine, _, _ = scripted_engine("the answer")
    await engine.run_turn(Conversation(id="c"), Message.user("the question"), system="be kind")
    [chat] = spans_with_content.named("chat ")
    assert chat.attributes["gen_ai.system_instructions"] == "be kind"
    assert "the question" in str(chat.attributes["gen_ai.input.messages"])
    assert chat.attributes["gen_ai.output.messages"] == "the answer"


class _Args(BaseModel):
    n: int


async def test_each_tool_call_is_an_execute_tool_span_naming_its_server(spans: Spans) -> None:
    async def double(params: _Args, ctx: ToolContext) -> str:
        return str(params.n * 2)

    async def broken(params: Any, ctx: ToolContext) -> str:
        raise RuntimeError("the server fell over")

    registry = ToolRegistry()
    registry.register(Tool("double", "x2", _Args, double))
    registry.register(Tool("files__read", "read", _Args, broken, server="files"))
    ctx = ToolContext(conversation_id="c")
    ok = await registry.execute(ToolCall(id="c1", name="double", arguments={"n": 2}), ctx)
    bad = await registry.execute(ToolCall(id="c2", name="files__read", arguments={"n": 1}), ctx)
    assert ok.content == "4" and bad.is_error
    first, second = spans.named("execute_tool ")
    assert first.name == "execute_tool double"
    assert first.attributes["gen_ai.tool.call.id"] == "c1"
    assert "yeaft.mcp.server" not in first.attributes
    assert "gen_ai.tool.call.arguments" not in first.attributes
    assert second.attributes["yeaft.mcp.server"] == "files"
    assert second.attributes["gen_ai.tool.type"] == "extension"
    assert second.status.status_code is StatusCode.ERROR
    assert second.attributes["error.type"] == "tool_error"


# -- exporting ------------------------------------------------------------------------
def test_exporting_starts_no_thread_in_a_forked_child(monkeypatch: pytest.MonkeyPatch) -> None:
    # uvloop runs fork hooks in a child between fork and exec: a hook that
    # starts a thread there (the SDK's BatchSpanProcessor's) can hang it,
    # and the VP host that spawns an MCP server with it. The provider's own
    # hook only makes a lock and reads the process's resource.
    config = TracingConfig(endpoint="http://127.0.0.1:9/v1/traces")
    tracing.install(config, "first")  # the SDK's modules imported once
    tracing.uninstall()
    hooks: list[dict[str, Any]] = []
    monkeypatch.setattr("os.register_at_fork", lambda **kw: hooks.append(kw))
    try:
        tracing.install(config, "test")
        with tracing.span("one"):
            pass
        assert tracing.active()
    finally:
        tracing.uninstall()
    assert [h["after_in_child"].__qualname__ for h in hooks] == [
        "TracerProvider.__init__.<locals>._after_in_child"
    ]


def test_batches_leave_on_flush_and_at_shutdown() -> None:
    from telemetry.export import BatchExport

    exporter = InMemorySpanExporter()
    processor = BatchExport(exporter, delay_s=3600)  # nothing leaves on its own here
    tracing.install(TracingConfig(), "test", processor)
    try:
        for n in range(3):
            with tracing.span(f"s{n}"):
                pass
        assert exporter.get_finished_spans() == ()
        tracing.flush()
        assert [s.name for s in exporter.get_finished_spans()] == ["s0", "s1", "s2"]
        with tracing.span("last"):
            pass
    finally:
        tracing.uninstall()  # shuts the provider down: what is queued leaves first
    assert [s.name for s in exporter.get_finished_spans()][-1:] == ["last"]
    assert processor.dropped == 0
