"""MCP tools in a VP's turn, against real MCP servers written with the SDK's server API.

The servers are ``tests/fixtures/mcp_server.py``, over stdio (started by the
VP's own connection) and over streamable HTTP (a subprocess on 127.0.0.1).
The VP is the real actor class, in process, whose engine talks to the fake
LLM server through the OpenAI SDK: the model is scripted to call
``server__tool``, and each test reads what came back to the model in its next
request and what the turn wrote to the group's event log. MCP does not touch
the store, so these run on the embedded backend only.

The MCP client below the VP (the manager's connections, their back-off, the
configuration and the gateway's catalog) is in ``test_mcp_connections.py``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.vp_actor import VPActor
from protocol.settings import GroupSettings
from tests.fixtures.llm_server import FakeLLM, ScriptedToolCall
from tests.fixtures.mcp_server import PNG as PICTURE
from tests.fixtures.stores import StoreFactory
from tests.mcp_helpers import (
    free_port,
    offered,
    serve_http,
    stdio,
    tool_results,
    turn,
    vp_config,
)

TOKEN = "http-token-0123456789"
SECRET = "stdio-secret-0123456789"


@pytest.fixture
def http_server() -> Iterator[str]:
    """The fixture server over streamable HTTP; its URL (it wants ``TOKEN``)."""
    with serve_http(TOKEN) as (url, _):
        yield url


MakeVP = Callable[..., VPActor]


def linus_with(tmp_path: Path, servers: str) -> str:
    """A personas directory whose linus names ``servers`` in its front matter."""
    builtin = Path(__file__).resolve().parents[1] / "personas" / "builtin" / "linus.md"
    own = tmp_path / "personas"
    own.mkdir()
    line = "modelHint: primary\n"
    text = builtin.read_text().replace(line, f"{line}mcpServers: {servers}\n")
    (own / "linus.md").write_text(text)
    return str(own)


@pytest.fixture
async def make_vp(tmp_path: Path, fake_llm: FakeLLM) -> AsyncIterator[MakeVP]:
    store_factory = StoreFactory("embedded", tmp_path / "data", None, "unused")
    made: list[VPActor] = []

    def make(
        servers: dict[str, Any],
        vp: str = "linus",
        personas_dir: str | None = None,
        model: str = "openai:gpt-test",
        **limits: Any,
    ) -> VPActor:
        config = vp_config(fake_llm, store_factory, servers, personas_dir, model, **limits)
        worker = VPActor(vp, config)
        made.append(worker)
        return worker

    yield make
    for worker in made:
        await worker.close()


def chips(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(kind, name or content) of the tool blocks in the turn's yeaft_output envelopes."""
    out = []
    for frame in events:
        data = frame.get("data") or {}
        for block in (data.get("message") or {}).get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                out.append(("tool_use", block["name"]))
            elif isinstance(block, dict) and block.get("type") == "tool_result":
                content = block["content"]
                out.append(("tool_result", content if isinstance(content, str) else str(content)))
    return out


# -- a VP calls a tool and uses its result ----------------------------------------
async def test_a_vp_calls_a_stdio_tool_and_answers_with_its_result(
    make_vp: MakeVP, fake_llm: FakeLLM
) -> None:
    vp = make_vp({"fx": stdio(env={"FIXTURE_SECRET": SECRET})})
    fake_llm.tool_calls(ScriptedToolCall("fx__echo", {"text": "hello"}))
    fake_llm.text("The server said hello back.")
    outcome, events = await turn(vp)

    assert outcome.error is None, outcome.error
    assert outcome.text == "The server said hello back."
    first, second = fake_llm.requests
    tools = offered(first)
    assert tools["fx__echo"]["parameters"]["properties"]["text"]["type"] == "string"
    assert tools["fx__echo"]["parameters"]["required"] == ["text"]
    assert "[MCP fx]" in tools["fx__echo"]["description"]
    (result,) = tool_results(second)
    assert result.startswith("echo from ") and result.endswith(": hello")
    assert ("tool_use", "fx__echo") in chips(events)
    assert ("tool_result", result) in chips(events)
    # The secret reached the server process, and no envelope or repr shows it.
    assert SECRET not in json.dumps(events)
    assert SECRET not in repr(vp.config) and SECRET not in repr(vp.services.mcp)


async def test_a_vp_calls_a_streamable_http_tool_with_its_headers(
    make_vp: MakeVP, fake_llm: FakeLLM, http_server: str
) -> None:
    vp = make_vp({"web": {"url": http_server, "headers": {"Authorization": f"Bearer {TOKEN}"}}})
    fake_llm.tool_calls(ScriptedToolCall("web__add", {"a": 20, "b": 22}))
    fake_llm.text("It is 42.")
    outcome, events = await turn(vp)

    assert outcome.text == "It is 42."
    assert tool_results(fake_llm.requests[1]) == ["42"]
    assert ("tool_use", "web__add") in chips(events)
    assert TOKEN not in json.dumps(events) and TOKEN not in repr(vp.config)


async def test_images_and_resources_reach_the_model_as_text(
    make_vp: MakeVP, fake_llm: FakeLLM
) -> None:
    vp = make_vp({"fx": stdio()})
    fake_llm.tool_calls(
        ScriptedToolCall("fx__picture", {}, id="call_pic"),
        ScriptedToolCall("fx__document", {}, id="call_doc"),
    )
    fake_llm.text("Seen.")
    await turn(vp)
    picture, document = tool_results(fake_llm.requests[1])
    # gpt-test is no vision model: the image is named, not sent.
    assert picture.startswith("a tiny picture\n[image: image/png, 64 bytes]")
    assert "cannot see images" in picture
    assert document == "[resource memo://plan]\nstep 1: test"
    assert "image_url" not in json.dumps(fake_llm.requests[1].body)


@pytest.mark.parametrize("model", ["openai:gpt-4o", "anthropic:claude-sonnet-4-5"])
async def test_a_tools_image_reaches_a_vision_model_as_an_image_block(
    make_vp: MakeVP, fake_llm: FakeLLM, model: str
) -> None:
    vp = make_vp({"fx": stdio()}, model=model)
    fake_llm.tool_calls(ScriptedToolCall("fx__picture", {}, id="call_pic"))
    fake_llm.text("A dot.")
    outcome, _ = await turn(vp)
    assert outcome.text == "A dot."
    messages = fake_llm.requests[1].body["messages"]
    if model.startswith("openai:"):
        # Tool results are text on this wire: the image follows them as a user message.
        (result,) = tool_results(fake_llm.requests[1])
        assert result == "a tiny picture\n[image: image/png, 64 bytes]"
        after = messages[-1]
        assert after["role"] == "user" and messages[-2]["role"] == "tool"
        assert after["content"][0] == {"type": "text", "text": "[images returned by fx__picture]"}
        assert after["content"][1]["image_url"]["url"] == f"data:image/png;base64,{PICTURE}"
    else:
        (block,) = [b for m in messages for b in m["content"] if b["type"] == "tool_result"]
        assert block["content"] == [
            {"type": "text", "text": "a tiny picture\n[image: image/png, 64 bytes]"},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": PICTURE},
            },
        ]


# -- every failure is a tool error the model sees; the turn ends normally ---------
async def test_a_tool_error_is_an_error_result(make_vp: MakeVP, fake_llm: FakeLLM) -> None:
    vp = make_vp({"fx": stdio()})
    fake_llm.tool_calls(ScriptedToolCall("fx__fail", {"reason": "not today"}))
    fake_llm.text("It refused.")
    outcome, _ = await turn(vp)
    assert outcome.text == "It refused."
    (result,) = tool_results(fake_llm.requests[1])
    assert "refused: not today" in result


async def test_bad_arguments_are_refused_before_the_call(
    make_vp: MakeVP, fake_llm: FakeLLM
) -> None:
    vp = make_vp({"fx": stdio()})
    fake_llm.tool_calls(
        ScriptedToolCall("fx__add", {"a": "one", "b": 2}, id="call_type"),
        ScriptedToolCall("fx__add", {"a": 1}, id="call_missing"),
    )
    fake_llm.text("I will fix the arguments.")
    outcome, _ = await turn(vp)
    assert outcome.error is None
    wrong_type, missing = tool_results(fake_llm.requests[1])
    assert wrong_type == "Error: invalid arguments for fx__add: a: 'one' is not of type 'integer'"
    assert missing == "Error: invalid arguments for fx__add: (root): 'b' is a required property"


async def test_a_tool_that_times_out_is_cancelled_and_the_server_goes_on(
    make_vp: MakeVP, fake_llm: FakeLLM
) -> None:
    vp = make_vp({"fx": stdio(timeout=1)})
    fake_llm.tool_calls(ScriptedToolCall("fx__slow", {"seconds": 60}, id="call_slow"))
    fake_llm.tool_calls(ScriptedToolCall("fx__echo", {"text": "still there?"}, id="call_echo"))
    fake_llm.text("The slow one gave up.")
    outcome, _ = await turn(vp)
    assert outcome.text == "The slow one gave up."
    (timed_out,) = tool_results(fake_llm.requests[1])
    assert timed_out == (
        "Error: fx__slow timed out after 1s: MCP server 'fx' did not answer in time, "
        "and the call was cancelled"
    )
    assert tool_results(fake_llm.requests[2])[1].endswith(": still there?")


async def test_a_server_that_dies_mid_call_is_an_error_and_the_next_call_reconnects(
    make_vp: MakeVP, fake_llm: FakeLLM
) -> None:
    vp = make_vp({"fx": stdio()})
    fake_llm.tool_calls(ScriptedToolCall("fx__echo", {"text": "before"}, id="call_1"))
    fake_llm.tool_calls(ScriptedToolCall("fx__crash", {}, id="call_2"))
    fake_llm.tool_calls(ScriptedToolCall("fx__echo", {"text": "after"}, id="call_3"))
    fake_llm.text("It came back.")
    outcome, events = await turn(vp)

    assert outcome.text == "It came back."
    before, crashed, after = tool_results(fake_llm.requests[3])
    assert crashed == (
        "Error: MCP server 'fx' stopped during the call to fx__crash; "
        "it is restarted on the next call"
    )
    # A new server process answered the call after the crash.
    assert before.split(":")[0] != after.split(":")[0]
    assert after.endswith(": after")
    assert ("tool_result", crashed.removeprefix("Error: ")) in chips(events)


async def test_servers_that_are_not_there_give_errors_that_say_why(
    make_vp: MakeVP, fake_llm: FakeLLM
) -> None:
    vp = make_vp(
        {
            "gone": {"command": "/nonexistent/mcp-server-binary"},
            "down": {"url": f"http://127.0.0.1:{free_port()}/mcp"},
            "fx": stdio(),
        }
    )
    fake_llm.tool_calls(
        ScriptedToolCall("gone__echo", {"text": "x"}, id="call_gone"),
        ScriptedToolCall("down__echo", {"text": "x"}, id="call_down"),
    )
    fake_llm.text("Two servers are down.")
    outcome, _ = await turn(vp)

    assert outcome.text == "Two servers are down."
    assert set(offered(fake_llm.requests[0])) >= {"fx__echo", "fx__add"}
    assert not any(n.startswith(("gone__", "down__")) for n in offered(fake_llm.requests[0]))
    gone, down = tool_results(fake_llm.requests[1])
    # Each was tried again when the model called it, and the answer says
    # when the next attempt is.
    assert re.fullmatch(
        r"Error: gone__echo cannot be called: MCP server 'gone' is unavailable: "
        r"command not found: /nonexistent/mcp-server-binary(; next attempt in \d+s)?",
        gone,
    )
    assert re.fullmatch(
        r"Error: down__echo cannot be called: MCP server 'down' is unavailable: "
        r"connection refused(; next attempt in \d+s)?",
        down,
    )


# -- which servers a VP may use ---------------------------------------------------
async def test_a_group_that_enables_no_server_offers_no_mcp_tool(
    make_vp: MakeVP, fake_llm: FakeLLM
) -> None:
    vp = make_vp({"fx": stdio()})
    fake_llm.tool_calls(ScriptedToolCall("fx__echo", {"text": "x"}))
    fake_llm.text("Not here.")
    outcome, _ = await turn(vp, settings=GroupSettings(mcp_servers=[]))
    assert outcome.text == "Not here."
    assert not any(n.startswith("fx__") for n in offered(fake_llm.requests[0]))
    assert tool_results(fake_llm.requests[1]) == ["Error: unknown or unavailable tool: fx__echo"]
    # (The VP opened it when it was made, for the groups that do use it.)


async def test_the_persona_allowlist_and_the_group_choice_both_narrow(
    make_vp: MakeVP, fake_llm: FakeLLM, http_server: str
) -> None:
    from engine.mcp import select_servers

    assert select_servers(["a", "b", "c"], ["*"], ["*"]) == ["a", "b", "c"]
    assert select_servers(["a", "b", "c"], ["a", "b"], ["b", "c"]) == ["b"]
    assert select_servers(["a", "b"], [], ["*"]) == []
    web = {"url": http_server, "headers": {"Authorization": f"Bearer {TOKEN}"}}
    vp = make_vp({"fx": stdio(), "web": web})
    fake_llm.text("ok")
    await turn(vp, settings=GroupSettings(mcp_servers=["web"]))
    names = set(offered(fake_llm.requests[0]))
    assert "web__echo" in names and not any(n.startswith("fx__") for n in names)


async def test_a_persona_file_narrows_the_servers_its_vp_uses(
    make_vp: MakeVP, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    vp = make_vp({"fx": stdio(), "other": stdio()}, personas_dir=linus_with(tmp_path, "[fx]"))
    assert vp.services.persona.mcp_servers == ("fx",)
    fake_llm.text("ok")
    await turn(vp)
    names = set(offered(fake_llm.requests[0]))
    assert "fx__echo" in names and not any(n.startswith("other__") for n in names)
    assert vp.services.mcp.connection("other").state == "idle"  # type: ignore[union-attr]


# -- connections: opened ahead, shared, closed --------------------------------------
async def test_connections_are_opened_once_and_closed_with_the_actor(
    make_vp: MakeVP, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pid"
    vp = make_vp({"fx": stdio(env={"MCP_TEST_PIDFILE": str(pidfile)})})
    # Made, the VP opens its servers in the background, before any turn.
    await vp.services.mcp.settled()
    assert vp.services.mcp.connection("fx").state == "ready"  # type: ignore[union-attr]
    started = int(pidfile.read_text())
    for word in ("one", "two"):
        fake_llm.tool_calls(ScriptedToolCall("fx__echo", {"text": word}))
        fake_llm.text("ok")
        await turn(vp)
    first, second = (tool_results(r)[0] for r in fake_llm.requests if tool_results(r))
    assert first.split(":")[0] == second.split(":")[0]  # one process served both turns
    pid = int(pidfile.read_text())
    assert pid == started
    await vp.close()
    assert vp.services.mcp.connection("fx").state == "closed"  # type: ignore[union-attr]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
