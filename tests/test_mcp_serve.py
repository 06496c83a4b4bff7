"""The group as an MCP server (``/mcp``), driven by the ``mcp`` SDK's own client
against a real gateway whose VPs answer from a scripted offline model."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent

from coordinator.commands import WaitIdle
from engine.providers.base import ModelRequest
from engine.providers.scripted import Reply, ScriptedModel
from gateway import disabling, sessions
from protocol import MAX_TEXT_LENGTH
from tests.doc_examples import python_example, run_example
from tests.fixtures.gateway import Gateway, StartGateway
from tests.fixtures.ray_cluster import MakeRuntime

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def says_who(request: ModelRequest) -> Reply:
    """Each VP answers with its own name, so a test can tell whose answer is whose;
    martin never answers."""
    if request.context.speaker_id == "martin":
        return Reply(hang_after=0)
    return Reply(f"this is {request.context.speaker_id} speaking")


@contextlib.asynccontextmanager
async def mcp_client(gw: Gateway, user: str) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers=gw.auth(user), timeout=httpx2.Timeout(30.0, read=120.0))
    transport = streamable_http_client(f"{gw.base_url}/mcp", http_client=http)
    async with http, Client(transport) as client:
        yield client


async def _gateway(start_gateway: StartGateway, make_runtime: MakeRuntime) -> Gateway:
    runtime = make_runtime(provider_overrides={"offline": ScriptedModel(says_who)})
    gw = await start_gateway(runtime)
    await gw.user("ann")
    await gw.user("bob")
    return gw


def _texts(result: CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, TextContent)]


@pytest.mark.parametrize("store_factory", ["embedded", "redis"], indirect=True)
async def test_ask_group_returns_every_addressed_vp_with_progress(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    gw = await _gateway(start_gateway, make_runtime)
    gid = await gw.group("ann")
    other = await gw.group("bob", name="bob's")
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async with mcp_client(gw, "ann") as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == {"list_groups", "ask_group", "group_history"}
        assert tools["ask_group"].input_schema["required"] == ["groupId", "text"]

        listed = await client.call_tool("list_groups", {})
        assert not listed.is_error
        assert listed.structured_content == {
            "groups": [
                {
                    "id": gid,
                    "name": "team",
                    "roster": ["steve", "linus", "martin"],
                    "defaultVp": "steve",
                }
            ]
        }
        assert other not in json.dumps(listed.structured_content)

        asked = await client.call_tool(
            "ask_group",
            {"groupId": gid, "text": "@steve @linus what do you think?"},
            progress_callback=on_progress,
        )
        assert not asked.is_error, asked
        assert asked.structured_content is not None
        replies = asked.structured_content["replies"]
        assert [(r["vp"], r["text"]) for r in replies] == [
            ("steve", "this is steve speaking"),
            ("linus", "this is linus speaking"),
        ]
        assert _texts(asked) == ["steve: this is steve speaking", "linus: this is linus speaking"]
        # One notification as each VP answered, in the order they did.
        assert [(done, total) for done, total, _ in progress] == [(1, 2), (2, 2)]
        assert {m.split()[0] for _, _, m in progress if m} == {"steve", "linus"}

        assert await gw.runtime.send(WaitIdle(gid))
        history = await client.call_tool("group_history", {"groupId": gid, "limit": 10})
        assert not history.is_error
        assert history.structured_content is not None
        said = [(m["author"], m["role"], m["text"]) for m in history.structured_content["messages"]]
        assert said[0] == ("ann", "user", "@steve @linus what do you think?")
        assert sorted(said[1:]) == [
            ("linus", "assistant", "this is linus speaking"),
            ("steve", "assistant", "this is steve speaking"),
        ]
        last = await client.call_tool("group_history", {"groupId": gid, "limit": 1})
        assert last.structured_content is not None
        assert [m["text"] for m in last.structured_content["messages"]] == [said[-1][2]]
    # The reply ids are the stored messages' ids.
    stored = {m.id: m for m in await (await gw.store()).read_messages(gid)}
    assert all(stored[r["messageId"]].author == r["vp"] for r in replies)


@pytest.mark.parametrize("store_factory", ["embedded"], indirect=True)
async def test_ask_group_waits_no_longer_than_told(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    gw = await _gateway(start_gateway, make_runtime)
    gid = await gw.group("ann")
    progress: list[float] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(done)

    async with mcp_client(gw, "ann") as client:
        # steve's first turn (his process starting) out of the way of the wait.
        first = await client.call_tool("ask_group", {"groupId": gid, "text": "@steve hi"})
        assert not first.is_error
        asked = await client.call_tool(
            "ask_group",
            {"groupId": gid, "text": "@steve @martin @nobody hi", "waitSeconds": 8},
            progress_callback=on_progress,
        )
    assert asked.is_error and asked.structured_content is not None
    replies = {r["vp"]: r for r in asked.structured_content["replies"]}
    assert replies["steve"]["text"] == "this is steve speaking"
    assert replies["martin"] == {"vp": "martin", "text": None, "error": "no reply within the wait"}
    assert asked.structured_content["unknownMentions"] == ["nobody"]
    assert _texts(asked) == [
        "steve: this is steve speaking",
        "martin: (no reply: no reply within the wait)",
        "not in the group: @nobody",
    ]
    assert progress == [1]
    cancelled = await gw.http.post(
        f"/api/groups/{gid}/cancel", json={"vpId": "martin"}, headers=gw.auth("ann")
    )
    assert cancelled.json()["cancelled"] == 1


@pytest.mark.parametrize("store_factory", ["embedded"], indirect=True)
async def test_a_stranger_gets_nothing_of_another_persons_group(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    gw = await _gateway(start_gateway, make_runtime)
    gid = await gw.group("ann")
    async with mcp_client(gw, "bob") as client:
        listed = await client.call_tool("list_groups", {})
        assert listed.structured_content == {"groups": []}
        for name, arguments in [
            ("ask_group", {"groupId": gid, "text": "@steve hello"}),
            ("group_history", {"groupId": gid}),
            ("ask_group", {"groupId": "grp_nosuchgroup", "text": "@steve hello"}),
            ("group_history", {"groupId": "not an id"}),
        ]:
            result = await client.call_tool(name, arguments)
            # The same answer as for a group that does not exist at all.
            [said] = _texts(result)
            assert result.is_error and said.endswith(": group not found"), (name, result)
            assert gid not in said
    messages = await (await gw.store()).read_messages(gid)
    assert messages == []


@pytest.mark.parametrize("store_factory", ["embedded"], indirect=True)
async def test_bad_input_gets_the_protocols_errors(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    gw = await _gateway(start_gateway, make_runtime)
    gid = await gw.group("ann")
    async with mcp_client(gw, "ann") as client:
        oversized = "@steve " + "x" * MAX_TEXT_LENGTH
        too_long = await client.call_tool("ask_group", {"groupId": gid, "text": oversized})
        assert too_long.is_error and "text" in _texts(too_long)[0]
        missing = await client.call_tool("ask_group", {"groupId": gid})
        assert missing.is_error and "text" in _texts(missing)[0]
        bad_limit = await client.call_tool("group_history", {"groupId": gid, "limit": 0})
        assert bad_limit.is_error and "limit" in _texts(bad_limit)[0]
        unknown = await client.call_tool("no_such_tool", {})
        assert unknown.is_error and "no_such_tool" in _texts(unknown)[0]
    # None of it reached the group.
    assert await (await gw.store()).read_messages(gid) == []

    # Not JSON at all, and JSON that is not a JSON-RPC message: a JSON-RPC error, not a 500.
    for body in ['{"jsonrpc": "2.0", "id": 1, "method": ', '{"hello": "world"}']:
        reply = await gw.http.post("/mcp", content=body, headers={**MCP_HEADERS, **gw.auth("ann")})
        assert 400 <= reply.status_code < 500, reply.text
        error = reply.json()["error"]
        assert error["code"] in (-32700, -32600, -32602), error
    # The other methods, and a body too large to read: 4xx, never a 500.
    auth = {**MCP_HEADERS, **gw.auth("ann")}
    for method in ("GET", "DELETE", "PUT"):
        reply = await gw.http.request(method, "/mcp", headers=auth)
        # Stateless: no stream of the server's own to GET, no session to DELETE.
        assert reply.status_code == 405, (method, reply.status_code, reply.text)
    huge = await gw.http.post("/mcp", content=b"[" + b" " * (3 << 20) + b"]", headers=auth)
    assert huge.status_code == 413, huge.text


@pytest.mark.parametrize("store_factory", ["embedded"], indirect=True)
async def test_no_token_a_bad_one_or_an_ended_session_is_refused_before_mcp(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    gw = await _gateway(start_gateway, make_runtime)
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    good = await gw.http.post("/mcp", json=initialize, headers={**MCP_HEADERS, **gw.auth("ann")})
    assert good.status_code == 200, good.text
    for headers, reason in [
        ({}, "missing"),
        ({"Authorization": "Bearer not-a-token"}, "invalid"),
        ({"Authorization": f"Basic {gw.tokens['ann']}"}, "missing"),
    ]:
        reply = await gw.http.post("/mcp", json=initialize, headers={**MCP_HEADERS, **headers})
        assert reply.status_code == 401, reply.text
        assert reply.json()["error"]["detail"]["reason"] == reason
        assert reply.headers["www-authenticate"].startswith("Bearer")

    # A disabled account's token is refused, and so is the token of a session ended.
    await disabling.disable(await gw.store(), "bob", None, cli=True)
    await gw.user("cat")
    await sessions.end(await gw.store(), "cat", None)
    for user, reason in [("bob", "account_disabled"), ("cat", "session_ended")]:
        refused = await gw.http.post(
            "/mcp", json=initialize, headers={**MCP_HEADERS, **gw.auth(user)}
        )
        assert refused.status_code == 401, refused.text
        assert refused.json()["error"]["detail"]["reason"] == reason

    # The SDK's client fails to connect with a wrong token.
    http = httpx2.AsyncClient(headers={"Authorization": "Bearer wrong"})
    with pytest.raises(BaseException) as failed:
        async with http, Client(streamable_http_client(f"{gw.base_url}/mcp", http_client=http)):
            pass
    assert "MCPError" in _describe(failed.value)


def _describe(exc: BaseException) -> str:
    """An exception and those grouped or chained in it, as text."""
    parts = [repr(exc)]
    for inner in getattr(exc, "exceptions", ()):
        parts.append(_describe(inner))
    if exc.__cause__ is not None:
        parts.append(_describe(exc.__cause__))
    return " ".join(parts)


@pytest.mark.parametrize("store_factory", ["embedded"], indirect=True)
async def test_the_documented_python_example_runs(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    gw = await _gateway(start_gateway, make_runtime)
    await gw.group("ann")
    code = python_example("The group as an MCP server", 'URL = "http://127.0.0.1:8765/mcp"')
    printed = await run_example(code, gw.base_url, {"YEAFT_TOKEN": gw.tokens["ann"]})
    assert "steve: this is steve speaking" in printed
    assert "linus: this is linus speaking" in printed
    assert "[2/2]" in printed
