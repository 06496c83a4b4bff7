"""The A2A agents file, the agent tools without Ray, and where a token may never show.

The calls here go to the real fixture agent (``tests/fixtures/a2a_agent.py``)
through an :class:`~engine.a2a.A2aManager` in this process, with every log
record kept: the token is sent (the agent wants it) and shows nowhere else.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.a2a import A2aConfigError, A2aManager, load_a2a_config, parse_a2a_config
from engine.bridge import WebBridge
from engine.events import ToolOutputEvent
from engine.messages import ToolCall
from engine.tools.approval import ApprovalRules
from engine.tools.registry import ToolContext, ToolRegistry
from engine.tools.sources import ToolSources, joined
from tests.a2a_helpers import TOKEN, serve_agent


@pytest.fixture(scope="module")
def agent_url() -> Iterator[str]:
    with serve_agent() as url:
        yield url


def test_entries_are_read_and_a_broken_one_is_kept_with_its_reason(tmp_path: Path) -> None:
    config = parse_a2a_config(
        {
            "a2aAgents": {
                "lib": {"url": "https://papers.example", "token": TOKEN},
                "card": {"url": "https://x.example/cards/agent.json", "headers": {"X-Key": "k"}},
                "off": {"url": "https://off.example", "disabled": True},
                "nourl": {"token": "t"},
                "bad name!": {"url": "https://b.example"},
            }
        }
    )
    assert config.usable() == ["card", "lib"]
    assert config.agents["lib"].card_url == "https://papers.example/.well-known/agent-card.json"
    assert config.agents["card"].card_url == "https://x.example/cards/agent.json"
    assert config.agents["lib"].request_headers() == {"Authorization": f"Bearer {TOKEN}"}
    assert config.agents["card"].auth_names() == ["X-Key"]
    assert config.invalid["nourl"].startswith("url: Field required")
    assert "agent name" in config.invalid["bad name!"]
    assert TOKEN not in repr(config) and TOKEN not in config.model_dump_json()

    with pytest.raises(A2aConfigError, match="a2aAgents"):
        parse_a2a_config({"a2aAgents": []})
    broken = tmp_path / "a2a.json"
    broken.write_text("{not json")
    with pytest.raises(A2aConfigError, match="cannot read"):
        load_a2a_config(broken)
    assert load_a2a_config(tmp_path / "missing.json").agents == {}


async def test_a_call_streams_and_the_token_shows_in_no_log_listing_or_description(
    agent_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    manager = A2aManager(
        parse_a2a_config({"a2aAgents": {"lib": {"url": agent_url, "token": TOKEN}}})
    )
    try:
        toolset = manager.toolset()
        # Offered before its card is in, and saying so.
        [early] = toolset.tools()
        assert "still being read" in early.description
        await manager.settled()
        [tool] = toolset.tools()
        assert "Search papers" in tool.description and tool.approval == "auto"
        # No policy set: an agent's tool asks, like an MCP server's.
        assert ApprovalRules().resolve(tool.name) == "ask"

        shown: list[tuple[str, str]] = []

        async def on_output(call: ToolCall, text: str) -> None:
            shown.append((call.id, text))

        ctx = ToolContext("conv-1", more_tools=toolset, on_output=on_output)
        outcome = await ToolRegistry().execute(
            ToolCall(id="c1", name="a2a__lib", arguments={"message": "graphs"}), ctx
        )
        assert outcome.content == "searching\nfound 3 papers\ndone: graphs"
        assert shown == [
            ("c1", "searching\n"),
            ("c1", "found 3 papers\n"),
            ("c1", "done: graphs\n"),
        ]
        assert ctx.call is None
        listing = manager.statuses()
        assert listing[0].state == "ready" and listing[0].auth == ("Authorization",)
        assert listing[0].skills == ("Search papers", "Cite")
    finally:
        await manager.aclose()
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "A2A agent lib ready" in text
    assert TOKEN not in text
    assert TOKEN not in repr(manager) and TOKEN not in str(listing)


async def test_an_agent_that_is_down_is_a_readable_error_not_a_crash() -> None:
    manager = A2aManager(parse_a2a_config({"a2aAgents": {"gone": {"url": "http://127.0.0.1:9"}}}))
    try:
        ctx = ToolContext("conv-1", more_tools=manager.toolset())
        outcome = await ToolRegistry().execute(
            ToolCall(id="c1", name="a2a__gone", arguments={"message": "hi"}), ctx
        )
        assert outcome.is_error
        assert outcome.content.startswith("A2A agent 'gone' is unavailable: its card could not")
        assert "connection refused" in outcome.content
        # The card is not asked for again before its back-off is over.
        again = await ToolRegistry().execute(
            ToolCall(id="c2", name="a2a__gone", arguments={"message": "hi"}), ctx
        )
        assert "next attempt in" in again.content or "unavailable" in again.content
    finally:
        await manager.aclose()


async def test_tool_output_is_a_system_payload_under_its_call() -> None:
    sent: list[dict[str, object]] = []

    async def send(payload: object) -> None:
        sent.append(payload.model_dump(exclude_none=True))  # type: ignore[attr-defined]

    bridge = WebBridge(send, "conv")
    await bridge.feed(ToolOutputEvent("c1", "a2a__lib", "found 3 papers\n"))
    await bridge.close()
    assert sent == [
        {
            "type": "system",
            "subtype": "tool_output",
            "message": "found 3 papers\n",
            "detail": {"tool_use_id": "c1", "name": "a2a__lib"},
        }
    ]


def test_sources_join_in_order() -> None:
    manager = A2aManager(parse_a2a_config({"a2aAgents": {}}))
    one, two = manager.toolset(), manager.toolset()
    assert joined(None, one) is one
    both = joined(one, two)
    assert isinstance(both, ToolSources) and both.sources == (one, two)
    assert isinstance(joined(both, one), ToolSources) and len(joined(both, one).sources) == 3  # type: ignore[attr-defined]
    assert json.dumps([t.name for t in both.tools()]) == "[]"
