"""The VP actor's own logic, in process (no Ray): memory, dream, resume.

The class a Ray actor wraps is a plain class, so these tests drive it
directly against both store backends; tests/test_group_chat.py covers the
same worker behind real Ray actors.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from actors.config import RuntimeConfig
from actors.dream import DreamReport
from actors.transcripts import load_conversation
from actors.turns import TurnOrigin, TurnOutcome, TurnRequest
from actors.vp_actor import VPActor, VPShared
from actors.vp_commands import Running, RunTurn
from engine.call_context import CallMode
from engine.errors import ErrorKind
from engine.events import StopReason
from engine.providers.base import ModelRequest, StreamItem
from engine.providers.offline import OfflineProvider
from engine.providers.scripted import Fail, Reply, ScriptedModel
from engine.settings import EngineConfig
from personas.loader import new_persona_file
from store.base import Group, GroupMessage
from store.memory import vp_scope
from tests.fixtures.stores import StoreFactory
from tests.test_turn_endings import results

MakeWorker = Callable[..., VPActor]


@pytest.fixture
async def make_worker(store_factory: StoreFactory) -> Any:
    made: list[VPActor] = []

    def make(vp: str = "steve", provider: Any = None, **config: Any) -> VPActor:
        cfg = RuntimeConfig(
            store=store_factory.config,
            engine=EngineConfig(model="offline:default", offline_tps=0),
            provider_overrides={"offline": provider} if provider else {},
            dream_idle_s=0,
            dream_every_turns=0,
        )
        worker = VPActor(vp, dataclasses.replace(cfg, **config))
        made.append(worker)
        return worker

    yield make
    for worker in made:
        await worker.close()


async def group(worker: VPActor, roster: list[str]) -> str:
    gid = f"grp_{uuid.uuid4().hex[:10]}"
    await worker.services.store.create_group(Group(id=gid, name="g", roster=roster))
    return gid


async def say(worker: VPActor, gid: str, text: str, user: str = "ann") -> TurnOutcome:
    store = worker.services.store
    msg, _ = await store.append_message(gid, GroupMessage(author=user, role="user", text=text))
    origin = TurnOrigin(trigger_id=msg.id, chain_id=msg.id, user_id=user)
    req = TurnRequest(gid, worker.vp_id, uuid.uuid4().hex, origin)
    return await worker.call(RunTurn(req))


async def test_what_a_user_said_is_remembered_in_another_group(make_worker: MakeWorker) -> None:
    steve = make_worker("steve")
    first = await group(steve, ["steve", "linus"])
    told = await say(steve, first, "@steve remember that I prefer Rust for services")
    assert told.text == "Noted. I will keep that in mind."
    other = await group(steve, ["steve", "martin"])
    answer = await say(steve, other, "@steve which language for the new service?")
    assert "You told me earlier: I prefer Rust for services." in answer.text
    # Somebody else's memory stays theirs.
    bob = await say(steve, other, "@steve which language for the new service?", user="bob")
    assert "I prefer Rust" not in bob.text


async def test_a_vp_never_recalls_another_vps_private_memory(make_worker: MakeWorker) -> None:
    def private_note(request: ModelRequest) -> Reply:
        if request.messages[-1].role == "tool":
            return Reply("ok")
        return Reply(
            tool_calls=[("remember", {"text": "the launch code is 4711", "scope": "private"})]
        )

    steve = make_worker("steve", ScriptedModel(private_note))
    gid = await group(steve, ["steve", "linus"])
    await say(steve, gid, "@steve note it privately")
    linus = make_worker("linus")
    answer = await say(linus, gid, "@linus what is the launch code?")
    assert "4711" not in answer.text
    again = make_worker("steve")
    assert "4711" in (await say(again, gid, "@steve the launch code?")).text


async def test_dream_writes_resident_memories_after_n_turns(make_worker: MakeWorker) -> None:
    steve = make_worker("steve", dream_every_turns=2)
    gid = await group(steve, ["steve", "linus"])
    await say(steve, gid, "we will ship the billing page on friday")
    await say(steve, gid, "and the export after that")
    await asyncio.gather(*steve.dreams.running)  # the dream scheduled after the second turn
    residents = await steve.services.memory.list(vp_scope(gid, "steve"), kind="resident")
    assert len(residents) == 1 and "billing page" in residents[0].text
    assert (await steve.dream(gid)) == DreamReport(ran=False, reason="nothing new")


class Gated(OfflineProvider):
    """The offline model, except that the calls ``holds`` picks wait for ``gate``."""

    def __init__(self, holds: Callable[[ModelRequest], bool] = lambda request: True) -> None:
        super().__init__()
        self.holds = holds
        self.gate = asyncio.Event()
        self.held = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        if self.holds(request):
            self.held.set()
            await self.gate.wait()
        async for item in super().stream(request):
            yield item


async def test_a_running_dream_never_delays_a_person(make_worker: MakeWorker) -> None:
    provider = Gated(lambda request: request.context.mode is CallMode.DREAM)
    steve = make_worker("steve", provider, dream_every_turns=1)
    gid = await group(steve, ["steve"])
    await say(steve, gid, "first")
    await provider.held.wait()  # the dream is stuck inside its model call
    answered = await asyncio.wait_for(say(steve, gid, "second"), 10)
    assert answered.reason is StopReason.END_TURN
    provider.gate.set()
    await asyncio.gather(*steve.dreams.running)


async def test_compaction_summary_is_persisted_and_used_on_resume(
    make_worker: MakeWorker,
) -> None:
    script = ScriptedModel(
        [
            "a1",
            "a2",
            "a3",
            Fail(ErrorKind.CONTEXT_OVERFLOW, "prompt is too long", status=400),
            "SUMMARY: ann asked three things",
            "a4",
        ]
    )
    steve = make_worker("steve", script)
    gid = await group(steve, ["steve"])
    for text in ("q1", "q2", "q3", "q4"):
        await say(steve, gid, text)
    conv = await load_conversation(steve.services.store, gid, "steve")
    assert conv is not None and conv.summary == "SUMMARY: ann asked three things"
    # A fresh worker (a restarted actor) picks the summary up from the store.
    script.push("a5")
    resumed = make_worker("steve", script)
    await say(resumed, gid, "q5")
    assert "SUMMARY: ann asked three things" in script.requests[-1].system
    assert all("q1" not in m.content for m in script.requests[-1].messages)
    script.assert_complete()


async def test_a_turn_sent_again_while_it_runs_runs_once(make_worker: MakeWorker) -> None:
    # A coordinator that lost sight of the actor for a moment sends the same
    # turn again: the second call gets the one run's outcome.
    provider = Gated()
    steve = make_worker("steve", provider)
    gid = await group(steve, ["steve"])
    store = steve.services.store
    msg, _ = await store.append_message(gid, GroupMessage(author="ann", role="user", text="hi"))
    origin = TurnOrigin(trigger_id=msg.id, chain_id=msg.id, user_id="ann")
    req = TurnRequest(gid, steve.vp_id, uuid.uuid4().hex, origin)
    first = asyncio.create_task(steve.call(RunTurn(req)))
    await provider.held.wait()
    again = asyncio.create_task(steve.call(RunTurn(req)))
    assert await steve.call(Running()) == [req.turn_id]
    provider.gate.set()
    one, two = await asyncio.gather(first, again)
    assert one == two and one.reason is StopReason.END_TURN
    assert len(await results(steve, req)) == 1
    assert provider.calls == 1
    # Ended, it is no longer held.
    assert await steve.call(Running()) == []


async def test_vps_of_one_process_share_the_persona_files_and_see_new_ones(
    store_factory: StoreFactory, tmp_path: Path
) -> None:
    """The persona files are read once a process, and again for a VP made from a newer file."""
    own = tmp_path / "personas"
    own.mkdir()
    config = RuntimeConfig(
        store=store_factory.config,
        engine=EngineConfig(model="offline:default", offline_tps=0),
        personas_dir=str(own),
        dream_idle_s=0,
        dream_every_turns=0,
    )
    shared = VPShared.open(config)
    try:
        steve = VPActor("steve", config, shared)
        with pytest.raises(ValueError, match="unknown persona 'nova'"):
            VPActor("nova", config, shared)
        new_persona_file(own, "nova", name="Nova")
        nova = VPActor("nova", config, shared)

        assert steve.services.personas is nova.services.personas is shared.personas
        assert nova.services.persona.name == "Nova"
    finally:
        await shared.close()
