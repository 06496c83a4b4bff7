"""One VP: a persona's engine, serving every group that has this VP.

Turns of one group run one at a time in the order the coordinator sent them
(a session lane; ``actors.lanes`` keeps that order whatever order Ray
delivers them in); different groups run concurrently under the actor's
concurrency cap. The
actor keeps nothing between turns that the store does not also hold: each
turn loads the VP's transcript, catches up on the group log, runs the engine,
and saves the transcript back, so a restarted actor carries on where the
crashed one stopped. The turn itself is :class:`~actors.runner.TurnRunner`;
this class only hosts turns and answers the coordinator. The Ray actor that
holds it is a :class:`~actors.vp_host.VPHost` (one VP or several per process).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TypeVar

from actors.attachments import open_files
from actors.commands import Handlers
from actors.completion import complete_call
from actors.config import RuntimeConfig
from actors.coordinator_link import CoordinatorLink
from actors.dream import DreamContext, DreamHook, DreamReport, DreamScheduler
from actors.hooks import AfterTurn, HookServices, TurnHook, TurnHooks, configured_factories
from actors.lanes import Lanes
from actors.memory_tier import RecallHook
from actors.questions import QuestionBox
from actors.queueing import BusyLanes, CollectBatch
from actors.runner import TurnRunner
from actors.services import VPServices
from actors.tools import vp_tools
from actors.transcripts import TranscriptCache
from actors.turns import TurnOutcome, TurnTracker
from actors.vp_commands import (
    Abort,
    AnswerQuestion,
    AnswerReceipt,
    Complete,
    Follow,
    Ping,
    QuestionOf,
    Running,
    RunTurn,
    Stats,
    VPCommand,
    VPStats,
)
from engine.a2a import A2aConfig, A2aManager
from engine.access import ProviderState
from engine.engine import Engine
from engine.mcp import ALL, McpConfig, McpManager, select_servers
from engine.providers.registry import ProviderRegistry
from engine.tools.registry import ToolRegistry
from personas.directory import PersonaDirectory
from store.attachments import AttachmentStore
from store.base import Store
from store.memory import MemoryBackend

# Groups whose last cancel time a VP actor remembers. A turn is in flight to
# the actor for milliseconds, so the newest thousands are plenty.
CANCELS_KEPT = 4096
# How long closing a VP waits for its aborted turns to end.
CLOSE_WAIT_S = 10.0


@dataclass(frozen=True, slots=True)
class VPShared:
    """What the VPs of one process share: store connections, memory, provider state,
    files, the persona directory (read once, not once a VP), the MCP servers (one
    connection per server, see ``engine.mcp.manager``) and the links to the
    coordinator actors (each looked up once, see ``actors.coordinator_link``)."""

    store: Store
    memory: MemoryBackend
    provider_state: ProviderState
    attachments: AttachmentStore
    personas: PersonaDirectory
    mcp: McpManager
    coordinators: dict[str, CoordinatorLink] = field(default_factory=dict)
    a2a: A2aManager = field(default_factory=lambda: A2aManager(A2aConfig()))

    def start_mcp(self) -> None:
        """Open, in the background, every MCP server some persona here may use."""
        wanted: set[str] = set()
        for persona in self.personas.library.all():
            wanted.update(select_servers(self.mcp.servers, persona.mcp_servers, [ALL]))
        self.mcp.start(sorted(wanted))

    async def close(self) -> None:
        """Close the connections (the process serves another configuration from now on)."""
        await self.mcp.aclose()
        await self.a2a.aclose()
        await self.store.close()
        await self.memory.close()
        await self.provider_state.aclose()
        await self.attachments.aclose()

    @classmethod
    def open(cls, config: RuntimeConfig) -> VPShared:
        return cls(
            config.open_store(),
            config.open_memory(),
            config.store.open_provider_state(),
            config.store.open_attachments(),
            PersonaDirectory.open(config.personas_dir),
            McpManager(config.mcp),
            a2a=A2aManager(config.a2a),
        )


@dataclass(slots=True)
class _Running:
    group_id: str
    abort: asyncio.Event
    tracker: TurnTracker
    # Resolved with the outcome, for a coordinator that follows the turn
    # after it restarted (the original caller is gone).
    outcome: asyncio.Future[TurnOutcome | None]


R = TypeVar("R")
# The handler of each VP command: the VPActor methods marked with it.
VP_OPS: Handlers[VPActor] = Handlers("VP")


class VPActor:
    """The Ray-facing side of one VP: run, abort and answer turns; dream; report stats.

    ``run_turn`` queues the turn in its group's lane, runs it and returns the
    :class:`TurnOutcome`. The turn's record in the store, marked started with
    its first status, tells the coordinator whether it had started if this
    actor dies.
    """

    def __init__(self, vp_id: str, config: RuntimeConfig, shared: VPShared | None = None) -> None:
        # A VP made on its own (a test, a tool) owns its connections and closes them.
        self._own = shared is None
        shared = shared or VPShared.open(config)
        self._shared = shared
        personas = shared.personas
        persona = personas.library.get(vp_id)
        if persona is None:
            # A persona file added since this process read them.
            persona = personas.reload().get(vp_id)
        if persona is None:
            raise ValueError(f"unknown persona {vp_id!r}")
        settings = config.engine
        model = persona.model
        if model is None and persona.model_hint == "fast" and settings.fast_model:
            model = settings.fast_model
        self.config = config
        self.providers = ProviderRegistry(settings, overrides=config.provider_overrides)
        tools = ToolRegistry(vp_tools(settings))
        # Credential cooldowns and provider-lane slots, shared by every actor
        # of the deployment through the store.
        self.provider_state = shared.provider_state
        engine = Engine(
            self.providers,
            model=model,
            tools=tools,
            settings=settings,
            provider_state=self.provider_state,
        )
        store, memory = shared.store, shared.memory
        self.services = VPServices(
            persona=persona,
            personas=personas,
            engine=engine,
            store=store,
            memory=memory,
            transcripts=TranscriptCache(vp_id),
            questions=QuestionBox(vp_id, config.ask_timeout_s),
            hooks=TurnHooks([]),
            mcp=shared.mcp,
            a2a=shared.a2a,
            attachments=shared.attachments,
            data_dir=config.store.data_dir,
            heartbeat_s=config.heartbeat_s,
        )
        self.dreams = DreamScheduler(
            DreamContext(persona, engine, store, memory),
            every=config.dream_every_turns,
            idle_s=config.dream_idle_s,
        )
        # Recall and dream scheduling are hooks like any other; configured ones follow.
        recall_hook = RecallHook(
            lambda: self.services.memory, config.recall_limit, config.recall_budget_tokens
        )
        hooks: list[TurnHook] = [recall_hook, DreamHook(self.dreams)]
        extra = HookServices(persona, engine, store, memory)
        factories = configured_factories(config.turn_hooks, config.entry_point_hooks)
        hooks += [make(extra) for make in factories]
        self.services.hooks.hooks.extend(hooks)
        self.lanes = Lanes(config.max_concurrent_turns, gap_s=config.lane_gap_s)
        # A steered message's files are read in as a turn's own are.
        self.queue = BusyLanes(
            vp_id, store, opener=lambda messages: open_files(messages, self.services.attachments)
        )
        self._running: dict[str, _Running] = {}
        self._hosts = shared.coordinators
        # When each group was last cancelled (newest last), for turns the
        # cancel overtook on their way here.
        self._cancelled: OrderedDict[str, float] = OrderedDict()
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass  # made outside an event loop: its MCP servers open on first use
        else:
            self.start_mcp()

    @property
    def vp_id(self) -> str:
        return self.services.vp_id

    async def call(self, command: VPCommand[R]) -> R:
        """Carry out one command (``actors.vp_commands``) with its handler."""
        return await VP_OPS.run(self, command)

    @VP_OPS.on(Ping)
    async def ping(self, cmd: Ping) -> str:
        return self.vp_id

    @VP_OPS.on(RunTurn)
    async def run_turn(self, cmd: RunTurn) -> TurnOutcome:
        """Queue a turn in its group's lane and run it.

        A turn this actor already holds is not run again: a coordinator whose
        call looked lost (the actor unreachable for a moment, not dead) sends
        it once more, and that call waits for the one run's outcome.
        """
        req = cmd.req
        held = self._running.get(req.turn_id)
        if held is not None:
            again = await asyncio.shield(held.outcome)
            if again is None:
                raise RuntimeError(f"turn {req.turn_id} failed on {self.vp_id}")
            return again
        outcome_of = asyncio.get_running_loop().create_future()
        running = _Running(req.group_id, asyncio.Event(), TurnTracker(req.turn_id), outcome_of)
        self._running[req.turn_id] = running
        if self._cancelled.get(req.group_id, -1.0) >= req.sent_at:
            # The group was cancelled after this turn was sent, and the abort
            # overtook it (Ray does not keep the order of an async actor's calls).
            running.abort.set()
        outcome: TurnOutcome | None = None
        batch: CollectBatch | None = None
        try:
            group = req.group_id
            if req.queue is not None and self.lanes.busy(group) and self.queue.answering(group):
                arrived = await self.queue.arrive(req, running.tracker, self._abort_others)
                if isinstance(arrived, TurnOutcome):
                    outcome = arrived
                    return outcome
                batch = arrived
            async with self.lanes.hold(req.group_id, req.lane):
                overflow: frozenset[str] = frozenset()
                if batch is not None:
                    req, overflow = await self.queue.collected(req, batch, running.abort)
                host = self._host(req.coordinator)
                inbox = self.queue.open_inbox(req)
                try:
                    runner = TurnRunner(
                        self.services, req, running.abort, running.tracker, host, inbox, overflow
                    )
                    outcome = await runner.run()
                finally:
                    self.queue.close_inbox(req.group_id, inbox)
            await self.services.hooks.after(
                AfterTurn(
                    req.group_id,
                    self.vp_id,
                    req.turn_id,
                    outcome.reason,
                    outcome.text,
                    outcome.message_id,
                )
            )
            return outcome
        finally:
            # A turn that ended without the lane (steered, merged, failed)
            # keeps no later turn of its lane waiting for it.
            self.lanes.passed(req.group_id, req.lane)
            if batch is not None:
                self.queue.drop_batch(req.group_id, batch)
            self._running.pop(req.turn_id, None)
            outcome_of.set_result(outcome)

    @VP_OPS.on(Running)
    async def running(self, cmd: Running) -> list[str]:
        """The turns this actor holds, queued or running (a recovering coordinator asks)."""
        return list(self._running)

    @VP_OPS.on(Follow)
    async def follow(self, cmd: Follow) -> TurnOutcome | None:
        """Wait for a turn this actor holds and return its outcome; None if it holds none.

        A coordinator that restarted while the turn ran follows it this way,
        so the turn is neither run again nor ended twice.
        """
        running = self._running.get(cmd.turn_id)
        if running is None:
            return None
        return await asyncio.shield(running.outcome)

    def _host(self, name: str | None) -> CoordinatorLink | None:
        """The coordinator actor ``name``, one link to it in this process (found when used)."""
        if name is None:
            return None
        host = self._hosts.get(name)
        if host is None:
            host = self._hosts[name] = CoordinatorLink(name, self.config.namespace)
        return host

    @VP_OPS.on(Abort)
    async def abort(self, cmd: Abort) -> int:
        """Abort running and queued turns of a group (or one turn) (see ``Abort``)."""
        group_id, turn_id, at = cmd.group_id, cmd.turn_id, cmd.at
        if turn_id is None and at is not None:
            self._cancelled[group_id] = max(at, self._cancelled.pop(group_id, at))
            while len(self._cancelled) > CANCELS_KEPT:
                self._cancelled.popitem(last=False)
        hits = [
            r.abort
            for tid, r in self._running.items()
            if r.group_id == group_id and (turn_id is None or tid == turn_id)
        ]
        for event in hits:
            event.set()
        return len(hits)

    async def _abort_others(self, group_id: str, turn_id: str) -> list[str]:
        """Abort this VP's other turns in a group (an ``interrupt``); their ids."""
        others = [
            tid for tid, r in self._running.items() if r.group_id == group_id and tid != turn_id
        ]
        for tid in others:
            self._running[tid].abort.set()
        return others

    @VP_OPS.on(AnswerQuestion)
    async def answer(self, cmd: AnswerQuestion) -> AnswerReceipt:
        return self.services.questions.answer(cmd.request_id, cmd.answer, cmd.group_id)

    @VP_OPS.on(QuestionOf)
    async def question_group(self, cmd: QuestionOf) -> str | None:
        return self.services.questions.group_of(cmd.request_id)

    @VP_OPS.on(Complete)
    async def complete(self, cmd: Complete) -> str:
        s = self.services
        return await complete_call(
            s.engine,
            s.persona,
            s.store,
            cmd.call,
            model=cmd.model,
            group_id=cmd.group_id,
            chain_id=cmd.chain_id,
            user_id=cmd.user_id,
        )

    async def dream(self, group_id: str) -> DreamReport:
        """Run memory maintenance for one group now."""
        return await self.dreams.run_now(group_id)

    def start_mcp(self) -> None:
        """Open, in the background, the MCP servers this VP's persona may use."""
        s = self.services
        s.mcp.start(select_servers(s.mcp.servers, s.persona.mcp_servers, [ALL]), self.vp_id)

    async def set_mcp(self, config: McpConfig) -> None:
        """Use these MCP servers from the next turn on (the servers file changed).

        The process's connections are changed by its host, once for all its VPs.
        """
        self.config = dataclasses.replace(self.config, mcp=config)
        if self._own:
            await self.services.mcp.reconfigure(config)
        self.start_mcp()

    async def close_tools(self) -> None:
        """Close this VP's own MCP connections and model SDK clients (stdio servers are stopped).

        An actor killed without this still stops its stdio servers: they
        see their stdin close with the actor's process and exit. What it
        shares with the other VPs of its process (the store, memory, the
        shared MCP connections) stays open.
        """
        await self.services.mcp.release(self.vp_id)
        await self.providers.aclose()

    async def close(self) -> None:
        """Stop this VP: abort its turns and wait for them to end, stop its dreams, close tools
        (and the connections it opened itself, when no host shares them).

        Each aborted turn still returns its outcome to the coordinator that sent it.
        """
        for running in self._running.values():
            running.abort.set()
        pending = [r.outcome for r in self._running.values()]
        if pending:
            # An aborted turn ends within moments; one stuck past this is left behind.
            await asyncio.wait(pending, timeout=CLOSE_WAIT_S)
        await self.dreams.close()
        await self.close_tools()
        if self._own:
            await self._shared.close()

    @VP_OPS.on(Stats)
    async def stats(self, cmd: Stats) -> VPStats:
        calls = sum(getattr(p, "calls", 0) for p in self.config.provider_overrides.values())
        return VPStats(self.vp_id, calls, len(self._running), os.getpid())
