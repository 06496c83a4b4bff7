"""Tool registry: schemas, validation, modes, allowlists, timeouts and approval."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, Field

from engine.messages import ToolCall
from engine.tools.builtin import builtin_tools
from engine.tools.registry import Tool, ToolContext, ToolRegistry


class Add(BaseModel):
    a: int
    b: int = Field(default=0, ge=0)


async def add(p: Add, _: ToolContext) -> dict[str, int]:
    return {"sum": p.a + p.b}


def registry(**kw: object) -> ToolRegistry:
    return ToolRegistry([Tool("add", "adds", Add, add, **kw)])  # type: ignore[arg-type]


async def test_schema_is_exported_and_result_rendered_as_json() -> None:
    reg = registry()
    spec = reg.specs(ToolContext("c"))[0]
    assert spec.parameters["properties"]["a"]["type"] == "integer"
    assert spec.parameters["required"] == ["a"]
    out = await reg.execute(
        ToolCall(id="1", name="add", arguments={"a": 1, "b": 2}), ToolContext("c")
    )
    assert (out.content, out.is_error) == ('{"sum": 3}', False)


async def test_invalid_arguments_name_the_field() -> None:
    out = await registry().execute(
        ToolCall(id="1", name="add", arguments={"a": "x", "b": -1}), ToolContext("c")
    )
    assert out.is_error and "a:" in out.content and "b:" in out.content


async def test_modes_and_allowlist() -> None:
    reg = registry(modes=frozenset({"dream"}))
    assert reg.specs(ToolContext("c")) == []
    assert [s.name for s in reg.specs(ToolContext("c", mode="dream"))] == ["add"]
    assert reg.specs(ToolContext("c", mode="dream"), allowed={"other"}) == []
    out = await reg.execute(
        ToolCall(id="1", name="add", arguments={"a": 1, "b": 1}), ToolContext("c")
    )
    assert out.is_error and "unavailable" in out.content


async def test_timeout_becomes_an_error_result() -> None:
    class P(BaseModel):
        pass

    async def slow(_: P, __: ToolContext) -> str:
        await asyncio.Event().wait()
        return "never"

    reg = ToolRegistry([Tool("slow", "", P, slow, timeout=0.01)])
    out = await reg.execute(ToolCall(id="1", name="slow"), ToolContext("c"))
    assert out.is_error and "timed out" in out.content


async def test_exception_becomes_an_error_result() -> None:
    class P(BaseModel):
        pass

    async def boom(_: P, __: ToolContext) -> str:
        raise RuntimeError("disk on fire")

    out = await ToolRegistry([Tool("boom", "", P, boom)]).execute(
        ToolCall(id="1", name="boom"), ToolContext("c")
    )
    assert out.is_error and "disk on fire" in out.content


async def test_approval_asks_the_user() -> None:
    asked: list[str] = []

    def asker(answer: str):  # type: ignore[no-untyped-def]
        async def ask(question: str, choices: list[str] | None) -> str:
            asked.append(question)
            assert choices == ["allow", "deny"]
            return answer

        return ask

    reg = registry(approval="ask")
    call = ToolCall(id="1", name="add", arguments={"a": 1, "b": 1})
    ok = await reg.execute(call, ToolContext("c", ask_user=asker("allow")))
    denied = await reg.execute(call, ToolContext("c", ask_user=asker("deny")))
    nobody = await reg.execute(call, ToolContext("c"))
    assert not ok.is_error and denied.is_error and "denied" in denied.content
    assert nobody.is_error and "approval" in nobody.content
    assert len(asked) == 2 and "add" in asked[0]


async def test_approval_question_expiry() -> None:
    async def expire(question: str, choices: list[str] | None) -> str:
        raise TimeoutError

    out = await registry(approval="ask").execute(
        ToolCall(id="1", name="add", arguments={"a": 1, "b": 1}), ToolContext("c", ask_user=expire)
    )
    assert out.is_error and "expired" in out.content


async def test_builtin_ask_user_and_finish() -> None:
    reg = ToolRegistry(builtin_tools())

    async def ask(question: str, choices: list[str] | None, **form: bool) -> str:
        return f"answer to {question}"

    ctx = ToolContext("c", ask_user=ask)
    out = await reg.execute(ToolCall(id="1", name="ask_user", arguments={"question": "why?"}), ctx)
    assert out.content == "answer to why?"
    await reg.execute(ToolCall(id="2", name="finish", arguments={"summary": "a"}), ctx)
    await reg.execute(ToolCall(id="3", name="finish", arguments={"summary": "b"}), ctx)
    assert ctx.end_turn is not None and ctx.end_turn.detail == {"summary": "a"}  # first wins


def test_every_real_tool_names_its_modes_and_a_dream_gets_only_memory_tools() -> None:
    from actors.tools import vp_tools
    from engine.settings import EngineConfig

    tools = vp_tools(EngineConfig())
    assert all(t.modes is not None for t in tools), [t.name for t in tools if t.modes is None]
    reg = ToolRegistry(tools)
    dream = ToolContext("c", mode="dream", services={"workspace": object()})
    assert sorted(t.name for t in reg.offered(dream)) == ["recall", "remember"]
    # Chat (one VP) and group turns get the conversation tools as well.
    for mode in ("chat", "group"):
        offered = {t.name for t in reg.offered(ToolContext("c", mode=mode))}
        assert {"ask_user", "finish", "recall", "remember", "web_fetch"} <= offered
    # A mode no tool names offers nothing (the registry filters, it does not guess).
    assert reg.offered(ToolContext("c", mode="unknown")) == []
