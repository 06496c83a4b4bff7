"""Workspace file tools in a VP's turn: confinement, limits, and where the files live.

The VP is the real actor class, in process, on both store backends; its
engine talks to the fake LLM server through the OpenAI SDK, which is scripted
to call the tools. Each test reads what came back to the model in its next
request, and what is on disk.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from actors.config import RuntimeConfig
from actors.turns import TurnOrigin, TurnOutcome, TurnRequest
from actors.vp_actor import VPActor
from actors.vp_commands import RunTurn
from engine.settings import EngineConfig
from engine.tools.files import FileArea, FileLimits, FileToolError
from protocol.settings import GroupSettings
from store.base import Group, GroupMessage
from store.conversation import ConversationInfo, GroupKind
from store.workspaces import conversation_files, group_files
from tests.fixtures.llm_server import FakeLLM, RecordedRequest, ScriptedToolCall
from tests.fixtures.stores import StoreFactory

MakeVP = Callable[..., VPActor]


@pytest.fixture
async def make_vp(store_factory: StoreFactory, fake_llm: FakeLLM) -> AsyncIterator[MakeVP]:
    made: list[VPActor] = []

    def make(vp: str = "linus", **engine: Any) -> VPActor:
        config = RuntimeConfig(
            store=store_factory.config,
            engine=EngineConfig(
                model="openai:gpt-test",
                openai_api_key=SecretStr("sk-test-0123456789"),
                openai_base_url=fake_llm.openai_base_url,
                max_retries=0,
                **engine,
            ),
            dream_idle_s=0,
            dream_every_turns=0,
        )
        worker = VPActor(vp, config)
        made.append(worker)
        return worker

    yield make
    for worker in made:
        await worker.close()


async def turn(worker: VPActor, group: Group | None = None) -> tuple[Group, TurnOutcome]:
    """One turn of ``worker`` in ``group`` (a new group by default)."""
    store = worker.services.store
    if group is None:
        group = Group(id=f"grp_{uuid.uuid4().hex[:10]}", name="g", roster=[worker.vp_id])
    # write_file asks first by default; these groups allow every tool.
    group = group.model_copy(update={"settings": GroupSettings(auto_approve=True)})
    await store.create_group(group)
    msg, _ = await store.append_message(
        group.id, GroupMessage(author="ann", role="user", text="@linus go")
    )
    origin = TurnOrigin(trigger_id=msg.id, chain_id=msg.id, user_id="ann")
    req = TurnRequest(group.id, worker.vp_id, uuid.uuid4().hex, origin)
    return group, await worker.call(RunTurn(req))


def results(request: RecordedRequest) -> list[str]:
    return [m["content"] for m in request.body["messages"] if m["role"] == "tool"]


def names_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def offered(request: RecordedRequest) -> set[str]:
    return {t["function"]["name"] for t in request.body.get("tools", [])}


async def test_a_vp_writes_lists_reads_and_searches_its_group_workspace(
    make_vp: MakeVP, fake_llm: FakeLLM, store_factory: StoreFactory
) -> None:
    vp = make_vp()
    fake_llm.tool_calls(
        ScriptedToolCall("write_file", {"path": "notes/plan.md", "content": "# Plan\ncache it\n"})
    )
    fake_llm.tool_calls(
        ScriptedToolCall("list_files", {"recursive": True}, id="c1"),
        ScriptedToolCall("read_file", {"path": "notes/plan.md"}, id="c2"),
        ScriptedToolCall("search_files", {"query": "CACHE"}, id="c3"),
    )
    fake_llm.text("The plan is written.")
    group, outcome = await turn(vp)

    assert outcome.error is None and outcome.text == "The plan is written."
    first, second, third = fake_llm.requests
    assert {"list_files", "read_file", "write_file", "search_files", "web_fetch"} <= offered(first)
    assert results(second) == ["wrote notes/plan.md (16 bytes)"]
    listing, text, hits = results(third)[1:]
    assert listing == "notes/\nnotes/plan.md  (16 bytes)"
    assert text == "# Plan\ncache it\n"
    assert hits == "notes/plan.md:2: cache it"
    # The file is in the group's own folder under the data directory of the
    # runtime config, whichever backend holds the messages.
    folder = group_files(store_factory.data_dir, group.id)
    assert (folder / "notes" / "plan.md").read_text() == "# Plan\ncache it\n"
    # The system prompt names the tools the VP really has.
    system = first.body["messages"][0]["content"]
    assert "`write_file`" in system and "`web_fetch`" in system


async def test_a_conversation_works_in_its_owners_folder_of_its_workspace(
    make_vp: MakeVP, fake_llm: FakeLLM, store_factory: StoreFactory
) -> None:
    vp = make_vp("omni")
    conv = Group(
        id=f"conv_{uuid.uuid4().hex[:10]}",
        name="c",
        roster=["omni"],
        members=["ann"],
        kind=GroupKind.CONVERSATION,
        conversation=ConversationInfo(owner="ann", vp_id="omni", work_dir="proj"),
    )
    fake_llm.tool_calls(ScriptedToolCall("write_file", {"path": "a.txt", "content": "hi"}))
    fake_llm.text("done")
    await turn(vp, conv)
    assert (conversation_files(store_factory.data_dir, "proj", "ann") / "a.txt").read_text() == "hi"
    assert not (conversation_files(store_factory.data_dir, "proj", "bob") / "a.txt").exists()


async def test_escapes_are_tool_errors_and_touch_nothing_outside(
    make_vp: MakeVP, fake_llm: FakeLLM, store_factory: StoreFactory, tmp_path: Path
) -> None:
    vp = make_vp()
    gid = f"grp_{uuid.uuid4().hex[:10]}"
    folder = group_files(store_factory.data_dir, gid)
    folder.mkdir(parents=True)
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    (folder / "out").symlink_to(tmp_path)
    (folder / "leak.txt").symlink_to(secret)
    attacks = [
        ("read_file", {"path": "../../../secret.txt"}),
        ("read_file", {"path": str(secret)}),
        ("read_file", {"path": "out/secret.txt"}),
        ("read_file", {"path": "leak.txt"}),
        ("write_file", {"path": "out/new.txt", "content": "x"}),
        ("write_file", {"path": "/tmp/new.txt", "content": "x"}),
        ("list_files", {"path": ".."}),
        ("search_files", {"query": "secret", "path": "out"}),
    ]
    fake_llm.tool_calls(
        *(ScriptedToolCall(name, args, id=f"a{i}") for i, (name, args) in enumerate(attacks))
    )
    fake_llm.text("refused")
    _, outcome = await turn(vp, Group(id=gid, name="g", roster=["linus"]))

    assert outcome.text == "refused"
    out = results(fake_llm.requests[1])
    assert len(out) == len(attacks)
    for text in out:
        assert "top secret" not in text
        assert (
            "outside the workspace" in text
            or "leaves the workspace" in text
            or ("absolute" in text)
        ), text
    assert not (tmp_path / "new.txt").exists()
    assert names_in(tmp_path) == ["data", "secret.txt"]


async def test_size_limits_and_binary_files(
    make_vp: MakeVP, fake_llm: FakeLLM, store_factory: StoreFactory
) -> None:
    vp = make_vp(workspace_max_file_bytes=100, workspace_max_read_bytes=10)
    gid = f"grp_{uuid.uuid4().hex[:10]}"
    folder = group_files(store_factory.data_dir, gid)
    folder.mkdir(parents=True)
    (folder / "long.txt").write_text("0123456789abcdefghij!")
    (folder / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    fake_llm.tool_calls(
        ScriptedToolCall("write_file", {"path": "big.txt", "content": "x" * 101}, id="w"),
        ScriptedToolCall("read_file", {"path": "long.txt"}, id="r1"),
        ScriptedToolCall("read_file", {"path": "long.txt", "offset": 20}, id="r2"),
        ScriptedToolCall("read_file", {"path": "logo.png"}, id="r3"),
        ScriptedToolCall("read_file", {"path": "missing.txt"}, id="r4"),
    )
    fake_llm.text("ok")
    await turn(vp, Group(id=gid, name="g", roster=["linus"]))

    big, head, tail, binary, missing = results(fake_llm.requests[1])
    assert "would be 101 bytes; the limit is 100 bytes per file" in big
    assert not (folder / "big.txt").exists()
    assert head == "0123456789\n[bytes 0-10 of 21; read on with offset=10]"
    assert tail == "!\n[bytes 20-21 of 21]"
    assert "binary file (image/png, 11 bytes)" in binary
    assert "does not exist" in missing


def test_the_area_refuses_escapes_before_any_disk_access(tmp_path: Path) -> None:
    area = FileArea(tmp_path / "ws", FileLimits())
    for bad in ["..", "a/../../b", "/etc/passwd", "C:\\x", "a\\..\\..\\b", "x\x00y"]:
        with pytest.raises(FileToolError):
            area.locate(bad)
    assert area.locate("a/./b.txt") == (tmp_path / "ws" / "a" / "b.txt").resolve()
    assert area.listing() == ([], False)  # a workspace not made yet is empty
    assert json.dumps(area.write("x.txt", "é")) == "2"
    (tmp_path / "ws" / "dangling").symlink_to(tmp_path / "ws" / "gone")
    assert [e.path for e in area.listing()[0]] == ["x.txt"]
