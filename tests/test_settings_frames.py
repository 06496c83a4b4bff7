"""The seed's settings queries, ``llm_config`` and ``yeaft_settings``, as frames.

First what ``llm_config`` lists for a configuration and how both frames are
checked when parsed; then both over a real WebSocket against the real
gateway on real Ray: who may read, who may change, the typed errors, and a
change reaching the group like any other settings change.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import SecretStr

from engine.models import read_models
from engine.settings import EngineConfig
from gateway.llm_config import llm_config
from protocol import ProtocolError, QueueMode, dumps, parse_client_frame, parse_server_frame
from protocol.config import LlmConfigFrame, YeaftSettings, YeaftSettingsFrame
from tests.fixtures.gateway import Gateway, StartGateway, WsClient
from tests.fixtures.ray_cluster import MakeRuntime

SECRET = "sk-test-never-on-the-wire-123"


def test_llm_config_lists_the_configured_models_then_the_keyed_providers_then_offline(
    tmp_path: Any,
) -> None:
    models_file = tmp_path / "models.json"
    models_file.write_text(
        json.dumps({"models": {"openai:house-model": {"context_window": 32000, "input": 1.5}}})
    )
    config = EngineConfig(
        model="openai:gpt-4.1",
        fast_model="gpt-4o-mini",
        fallback_models=("anthropic:claude-sonnet-4-5",),
        openai_api_key=SecretStr(SECRET),
        thinking="medium",
        vision_models=("openai:house-*",),
        models=read_models(models_file),
    )
    frame = llm_config(config, request_id="r1")
    ids = [m.id for m in frame.models]
    # Configured first, then the key's provider (its default, its own file, the
    # built-in names), the offline model last; each once.
    assert ids[:4] == [
        "openai:gpt-4.1",
        "openai:gpt-4o-mini",
        "anthropic:claude-sonnet-4-5",
        "openai:house-model",
    ]
    assert ids[-1] == "offline:default" and len(ids) == len(set(ids))
    assert {"openai:gpt-5", "openai:o3-mini"} <= set(ids)
    # No key for Anthropic: only the fallback the server is configured with.
    assert [i for i in ids if i.startswith("anthropic:")] == ["anthropic:claude-sonnet-4-5"]
    assert frame.default_model == "openai:gpt-4.1" and frame.fast_model == "openai:gpt-4o-mini"
    assert frame.fallback_models == ["anthropic:claude-sonnet-4-5"]
    assert frame.thinking_level == "medium" and frame.request_id == "r1"

    by_id = {m.id: m for m in frame.models}
    house = by_id["openai:house-model"]
    assert (house.context_window, house.price.input, house.vision) == (32000, 1.5, True)
    mini = by_id["openai:gpt-4o-mini"]
    assert (mini.vision, mini.thinking, mini.price.output) == (True, False, 0.6)
    reasoner = by_id["openai:o3-mini"]
    assert (reasoner.thinking, reasoner.vision, reasoner.context_window) == (True, False, 200000)
    wire = dumps(frame)
    assert SECRET not in wire and '"contextWindow":' in wire and '"cacheRead":' in wire
    assert parse_server_frame(wire) == frame


def test_llm_config_without_keys_offers_the_offline_model() -> None:
    frame = llm_config(EngineConfig(context_window=4096))
    assert [m.id for m in frame.models] == ["offline:default"]
    assert frame.models[0].context_window == 4096  # the configured window wins
    assert frame.default_model == "offline:default" and frame.thinking_level == "off"


def test_settings_frames_are_checked_when_parsed() -> None:
    read = parse_client_frame('{"type":"yeaft_settings","groupId":"g1"}')
    assert isinstance(read, YeaftSettings) and read.settings is None
    # An enum setting arrives as JSON text and is taken as such.
    change = parse_client_frame(
        '{"type":"yeaft_settings","groupId":"g1","settings":{"queueMode":"followup"}}'
    )
    assert isinstance(change, YeaftSettings) and change.settings is not None
    assert change.settings.changes() == {"queue_mode": QueueMode.FOLLOWUP}
    for raw, field in (
        (
            '{"type":"yeaft_settings","groupId":"g1","settings":{"fanoutCap":17}}',
            "settings.fanoutCap",
        ),
        (
            '{"type":"yeaft_settings","groupId":"g1","settings":{"queueMode":"x"}}',
            "settings.queueMode",
        ),
        ('{"type":"yeaft_settings","groupId":"g1","settings":{"colour":1}}', "settings.colour"),
        ('{"type":"yeaft_settings"}', "groupId"),
        ('{"type":"llm_config","groupId":"no way"}', "groupId"),
        ('{"type":"llm_config","extra":1}', "extra"),
    ):
        with pytest.raises(ProtocolError) as caught:
            parse_client_frame(raw)
        assert caught.value.field == field, raw
    assert isinstance(
        parse_server_frame('{"type":"llm_config","defaultModel":"x"}'), LlmConfigFrame
    )


# -- over a real WebSocket, on real Ray ------------------------------------------
async def _group(gw: Gateway) -> str:
    for name in ("ann", "bob", "eve"):
        await gw.user(name)
    made = await gw.http.post(
        "/api/groups", json={"name": "crew", "roster": ["linus"]}, headers=gw.auth("ann")
    )
    gid = str(made.json()["id"])
    added = await gw.http.post(
        f"/api/groups/{gid}/members", json={"username": "bob"}, headers=gw.auth("ann")
    )
    assert added.status_code == 200, added.text
    return gid


async def test_llm_config_over_the_websocket(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    engine = {"fast_model": "offline:quick", "thinking": "low", "openai_api_key": SECRET}
    gw = await start_gateway(make_runtime(engine=engine))
    gid = await _group(gw)
    ann = await WsClient.open(gw, "ann")
    listed = await ann.request({"type": "llm_config", "requestId": "m1"})
    assert listed["type"] == "llm_config" and listed["requestId"] == "m1"
    assert listed["defaultModel"] == "offline:default" and listed["fastModel"] == "offline:quick"
    assert listed["thinkingLevel"] == "low" and "groupModel" not in listed
    ids = [m["id"] for m in listed["models"]]
    assert ids[:2] == ["offline:default", "offline:quick"] and "openai:gpt-4o-mini" in ids
    gpt = next(m for m in listed["models"] if m["id"] == "openai:gpt-4o-mini")
    assert gpt["contextWindow"] == 128000 and gpt["vision"] is True and gpt["thinking"] is False
    assert gpt["price"] == {"input": 0.15, "output": 0.6, "cacheRead": 0.075, "cacheWrite": 0.0}
    assert SECRET not in json.dumps(listed)

    await gw.http.patch(
        f"/api/groups/{gid}/settings",
        json={"settings": {"model": "offline:quick"}},
        headers=gw.auth("ann"),
    )
    for_group = await ann.request({"type": "llm_config", "groupId": gid})
    assert for_group["groupId"] == gid and for_group["groupModel"] == "offline:quick"
    eve = await WsClient.open(gw, "eve")
    stranger = await eve.request({"type": "llm_config", "groupId": gid, "requestId": "m2"})
    assert stranger["code"] == "not_found" and stranger["requestId"] == "m2"
    bad = await eve.request({"type": "llm_config", "group": gid})
    assert bad["code"] == "invalid_frame" and bad["field"] == "group"
    await ann.close()
    await eve.close()


async def test_yeaft_settings_read_by_members_changed_by_the_owner(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway()
    gid = await _group(gw)
    ann = await WsClient.open(gw, "ann")
    bob = await WsClient.open(gw, "bob")
    assert (await bob.request({"type": "subscribe", "groupId": gid}))["action"] == "subscribed"

    # Any member reads; only the owner may change.
    read = await bob.request({"type": "yeaft_settings", "groupId": gid, "requestId": "s0"})
    assert read["type"] == "yeaft_settings" and read["requestId"] == "s0"
    assert read["groupId"] == gid and read["editable"] is False
    assert read["settings"]["queueMode"] == "collect" and read["settings"]["fanoutCap"] == 16
    change = {"type": "yeaft_settings", "groupId": gid, "settings": {"fanoutCap": 4}}
    refused = await bob.request({**change, "requestId": "s1"})
    assert refused["code"] == "forbidden" and refused["requestId"] == "s1"
    eve = await WsClient.open(gw, "eve")
    for frame in ({"type": "yeaft_settings", "groupId": gid}, change):
        hidden = await eve.request(frame)
        assert hidden["code"] == "not_found", hidden

    # A value out of bounds is refused naming the field; nothing changes.
    bad = await ann.request(
        {"type": "yeaft_settings", "groupId": gid, "settings": {"fanoutCap": 17}, "requestId": "s2"}
    )
    assert bad["code"] == "invalid_frame" and bad["field"] == "settings.fanoutCap"
    assert bad["requestId"] == "s2"

    changed = await ann.request(
        {
            "type": "yeaft_settings",
            "groupId": gid,
            "settings": {"queueMode": "followup", "fanoutCap": 4, "language": "zh"},
            "requestId": "s3",
        }
    )
    assert changed["type"] == "yeaft_settings" and changed["editable"] is True
    after = changed["settings"]
    assert (after["queueMode"], after["fanoutCap"], after["language"]) == ("followup", 4, "zh")
    assert after["maxChainDepth"] == 8  # what the change did not name stays
    assert isinstance(parse_server_frame(json.dumps(changed)), YeaftSettingsFrame)
    # The members see it as every settings change: live, with a notice, stored.
    live = await bob.seen(
        lambda f: f["type"] == "group_update" and f.get("action") == "settings" and "seq" in f
    )
    assert live["by"] == "ann" and live["group"]["settings"]["queueMode"] == "followup"
    notice = await bob.seen(lambda f: f["type"] == "yeaft_output" and f["vpId"] == "system")
    assert notice["data"]["message"].startswith("ann changed the group settings: ")
    stored = (await gw.http.get(f"/api/groups/{gid}", headers=gw.auth("bob"))).json()
    assert stored["settings"] == after
    again = await bob.request({"type": "yeaft_settings", "groupId": gid})
    assert again["settings"] == after
    for client in (ann, bob, eve):
        await client.close()
