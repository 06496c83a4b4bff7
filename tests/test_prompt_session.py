"""What a VP's turn is given, end to end on real Ray: its tools by mode, the
session it is in, its notes across groups and the group's project document."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from coordinator.commands import Ingest, WaitIdle
from engine.providers.base import ModelRequest
from engine.providers.scripted import ScriptedModel
from tests.fixtures.ray_cluster import MakeRuntime


class Recorder:
    """A script that notes each call's mode, tools and prompt in a file, then answers.

    It runs in the VP's Ray process; the file is how the test reads what it saw.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, request: ModelRequest) -> str:
        record = {
            "mode": str(request.context.mode),
            "vp": request.context.speaker_id,
            "tools": sorted(t.name for t in request.tools),
            "system": request.system,
        }
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")
        return "noted"


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
