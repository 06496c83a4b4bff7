"""What a VP's turn is given, end to end on real Ray: its tools by mode, the
session it is in, its notes across groups and the group's project document."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from actors.config import RuntimeConfig
from actors.turns import TurnOrigin, TurnRequest
from actors.vp_actor import VPActor
from actors.vp_commands import RunTurn
from coordinator.commands import EditGroup, Ingest, WaitIdle
from coordinator.membership import GroupEdit
from engine.providers.base import ModelRequest
from engine.providers.scripted import Reply, ScriptedModel
from engine.settings import EngineConfig
from protocol import Channel, GroupSettingsPatch
from protocol.settings import GroupSettings
from store.base import Group, GroupMessage
from store.conversation import ConversationInfo
from store.workspaces import group_files, read_project_doc
from tests.fixtures.gateway import StartGateway, WsClient
from tests.fixtures.ray_cluster import MakeRuntime
from tests.fixtures.stores import StoreFactory

NOW = datetime(2026, 1, 15, 9, 30, tzinfo=UTC)
NOTE = "I sketch every screen on paper before anyone builds it"


class Recorder:
    """A script that notes each call's mode, tools and prompt in a file, then answers.

    It runs in the VP's Ray process; the file is how the test reads what it saw.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, request: ModelRequest) -> Reply:
        record = {
            "mode": str(request.context.mode),
            "vp": request.context.speaker_id,
            "tools": sorted(t.name for t in request.tools),
            "system": request.system,
            "last": str(request.messages[-1].content) if request.messages else "",
        }
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")
        last = request.messages[-1] if request.messages else None
        asked = last is not None and last.role == "user" and "note this" in str(last.content)
        if asked and request.context.mode == "chat":
            # Into the VP's own notes, which follow it into every group.
            return Reply(tool_calls=[("remember", {"text": NOTE, "scope": "vp"})])
        return Reply("noted")


def records(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


async def dream_record(path: Path, within: float = 30.0) -> dict[str, object]:
    """The first dream call's record. A dream is invisible to the group (no
    event says it ran), so the file is read until it shows one."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        dreams = [r for r in records(path) if r["mode"] == "dream"]
        if dreams:
            return dreams[0]
        await asyncio.sleep(0.05)
    raise AssertionError(f"no dream ran within {within}s: {records(path)}")


async def test_a_dream_turn_is_offered_only_the_memory_tools(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    path = tmp_path / "calls.jsonl"
    rt = make_runtime(
        provider_overrides={"offline": ScriptedModel(Recorder(path))}, dream_every_turns=1
    )
    group = await rt.create_group("team", ["steve", "linus"], members=["ann"])
    await rt.send(Ingest(group.id, "ann", "@steve what next?"))
    assert await rt.send(WaitIdle(group.id))
    dream = await dream_record(path)
    (chat,) = [r for r in records(path) if r["mode"] == "chat"]
    assert dream["vp"] == chat["vp"] == "steve"
    assert dream["tools"] == ["recall", "remember"]
    assert {"ask_user", "recall", "remember", "route_forward"} <= set(chat["tools"])  # type: ignore[arg-type]
    # The dream's prompt names the tools it is offered, and no others.
    assert "`recall`, `remember`" in str(dream["system"])
    assert "route_forward" not in str(dream["system"])


def system_of(path: Path, group_text: str) -> str:
    """The system prompt of the one chat call whose prompt contains ``group_text``."""
    (system,) = [
        str(r["system"]) for r in records(path) if r["mode"] == "chat" and group_text in r["system"]
    ]
    return system


async def test_the_prompt_states_the_session_the_channel_coming_from_the_connection(
    start_gateway: StartGateway, make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    path = tmp_path / "calls.jsonl"
    gw = await start_gateway(
        make_runtime(provider_overrides={"offline": ScriptedModel(Recorder(path))})
    )
    await gw.user("ann")
    made = await gw.http.post(
        "/api/groups", json={"name": "launch crew", "roster": ["steve"]}, headers=gw.auth("ann")
    )
    gid = made.json()["id"]
    for query, channel, place in [
        ("client=terminal", "the terminal", "crew"),
        ("", "the API", "crew"),
    ]:
        ws = await WsClient.open(gw, "ann", query=query)
        ack = await ws.request(
            {"type": "yeaft_session_chat", "groupId": gid, "text": f"hi over {channel}"}
        )
        assert ack["type"] == "ack", ack
        assert await gw.runtime.send(WaitIdle(gid))
        await ws.close()
        system = system_of(path, f"through {channel}.")
        assert f'You are in the group "launch {place}".' in system
        assert "The person you are answering: @ann." in system
        assert "You run on the model offline:default." in system
    # The browser's own connection says it is the web app.
    cookie = {"Cookie": f"yeaft_session={gw.tokens['ann']}", "Origin": gw.base_url}
    web = await WsClient.open(gw, headers=cookie)
    assert (await web.request({"type": "yeaft_session_chat", "groupId": gid, "text": "x"}))[
        "type"
    ] == "ack"
    assert await gw.runtime.send(WaitIdle(gid))
    await web.close()
    assert "through the web app." in records(path)[-1]["system"]  # type: ignore[operator]
    # The channel is kept with the message, so a turn run again still knows it.
    log = await (await gw.runtime.store()).read_messages(gid)
    assert [m.meta["channel"] for m in log if m.role == "user"] == ["terminal", "api", "web"]
    # A client naming a channel nobody knows is refused at the handshake, clearly.
    odd = await WsClient.open(gw, "ann", query="client=fax")
    assert await odd.closed_with() == 4400


async def test_a_conversation_and_the_vps_notes_across_groups(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    path = tmp_path / "calls.jsonl"
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(Recorder(path))})
    first = await rt.create_group("studio", ["steve"], members=["ann"])
    await rt.send(Ingest(first.id, "ann", "@steve note this", channel=Channel.WEB))
    assert await rt.send(WaitIdle(first.id))
    # Another person, a one-to-one conversation: steve's own notes come along.
    info = ConversationInfo(owner="bob", vp_id="steve", work_dir="default")
    chat = await rt.create_conversation("Chat with Steve", info)
    await rt.send(Ingest(chat.id, "bob", "how do you start a design?", channel=Channel.TERMINAL))
    assert await rt.send(WaitIdle(chat.id))
    system = system_of(path, "Chat with Steve")
    assert 'You are in a one-to-one conversation "Chat with Steve".' in system
    assert "The person you are answering: @bob." in system
    assert "through the terminal." in system
    assert NOTE in system
    # Linus never reads steve's notes.
    other = await rt.create_group("other", ["linus"], members=["bob"])
    await rt.send(Ingest(other.id, "bob", "@linus how do you start a design?"))
    assert await rt.send(WaitIdle(other.id))
    assert NOTE not in system_of(path, 'the group "other"')


async def test_the_prompt_states_the_time_of_the_injected_clock(
    store_factory: StoreFactory,
) -> None:
    model = ScriptedModel(lambda request: "fine")
    cfg = RuntimeConfig(
        store=store_factory.config,
        engine=EngineConfig(model="offline:default", offline_tps=0),
        provider_overrides={"offline": model},
        dream_idle_s=0,
        dream_every_turns=0,
    )
    vp = VPActor("linus", cfg)
    try:
        vp.services = dataclasses.replace(vp.services, clock=lambda: NOW)
        store = vp.services.store
        gid = f"grp_{uuid.uuid4().hex[:10]}"
        settings = GroupSettings(language="zh")
        await store.create_group(Group(id=gid, name="内核", roster=["linus"], settings=settings))
        msg, _ = await store.append_message(gid, GroupMessage(author="ann", role="user", text="hi"))
        origin = TurnOrigin(trigger_id=msg.id, chain_id=msg.id, user_id="ann")
        await vp.call(RunTurn(TurnRequest(gid, "linus", TurnRequest.new_turn_id("linus"), origin)))
        system = model.requests[0].system
        assert "当前时间：2026-01-15 09:30 UTC。" in system
        assert "你现在在群组「内核」里。" in system and "这条消息来自未知渠道。" in system
    finally:
        await vp.close()


async def test_the_workspace_project_document_is_in_every_prompt_and_read_each_turn(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    path = tmp_path / "calls.jsonl"
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(Recorder(path))})
    group = await rt.create_group("docs", ["steve", "linus"], members=["ann"])
    folder = group_files(rt.config.store.data_dir, group.id)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "README.md").write_text("# Readme\nThe README rule.\n", encoding="utf-8")

    async def ask(text: str) -> list[str]:
        await rt.send(Ingest(group.id, "ann", text))
        assert await rt.send(WaitIdle(group.id))
        # The VP reads the message as "[ann] <text>".
        return [str(r["system"]) for r in records(path) if text in str(r["last"])]

    # README.md when there is no AGENTS.md, in every VP's prompt.
    prompts = await ask("@all first")
    assert len(prompts) == 2 and all("The README rule." in p for p in prompts)
    # AGENTS.md comes first, and an edit shows in the next turn.
    (folder / "AGENTS.md").write_text("Run make check before a commit.\n", encoding="utf-8")
    (prompt,) = await ask("@steve second")
    assert "Run make check before a commit." in prompt and "README rule" not in prompt
    # A file the group's settings name, cut at 16 KiB with a visible marker.
    (folder / "docs").mkdir()
    long = "".join(f"guide line {n}\n" for n in range(3000))
    (folder / "docs" / "GUIDE.md").write_text(long, encoding="utf-8")
    await rt.send(
        EditGroup(group.id, GroupEdit(settings=GroupSettingsPatch(project_doc="docs/GUIDE.md")))
    )
    (prompt,) = await ask("@linus third")
    assert "guide line 0\n" in prompt and "guide line 2999" not in prompt
    assert "[…truncated]" in prompt and "make check" not in prompt
    # The setting is a relative path inside the workspace, or it is refused.
    with pytest.raises(ValidationError, match="leave the workspace"):
        GroupSettingsPatch(project_doc="../other/AGENTS.md")
    with pytest.raises(ValidationError, match="relative"):
        GroupSettingsPatch(project_doc="/etc/passwd")


def test_a_project_document_outside_the_workspace_is_never_read(tmp_path: Path) -> None:
    root, outside = tmp_path / "area", tmp_path / "secret.md"
    root.mkdir()
    outside.write_text("the secret", encoding="utf-8")
    (root / "AGENTS.md").symlink_to(outside)
    (root / "README.md").write_text("the readme", encoding="utf-8")
    # The link leads out: it is passed over for the README.
    doc = read_project_doc(root)
    assert doc is not None and (doc.name, doc.text, doc.truncated) == (
        "README.md",
        "the readme",
        False,
    )
    assert read_project_doc(root, "AGENTS.md") is None
    assert read_project_doc(root, "missing.md") is None
    # Cut at the byte cap on a line boundary, never inside a character.
    (root / "long.md").write_text("é" * 10 + "\n" + "é" * 10, encoding="utf-8")
    cut = read_project_doc(root, "long.md", max_bytes=25)
    assert cut is not None and cut.truncated and cut.text == "é" * 10
