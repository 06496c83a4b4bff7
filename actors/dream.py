"""Dream: memory maintenance for one VP in one group.

After enough turns, or when the group goes quiet, the VP re-reads its recent
transcript in the group and writes resident memories (summaries recall
always considers). It runs on the same engine with only the memory tools and
emits nothing to the group: maintenance is invisible to the people in it.
It runs beside the group's lane, never in it, so it never makes a person
wait; it only reads the transcript, so it cannot race a turn that saves it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from actors.hooks import AfterTurn, BeforeTurn
from actors.transcripts import load_conversation
from engine.call_context import CallContext, CallMode, Speaker
from engine.compaction import render_transcript
from engine.engine import Engine
from engine.messages import Conversation, Message
from engine.tools.registry import ToolContext
from personas.model import Persona
from personas.prompts import build_system_prompt
from store.base import Store
from store.memory import MemoryBackend, vp_scope

log = logging.getLogger(__name__)

RECENT_MESSAGES = 40


@dataclass(frozen=True, slots=True)
class DreamContext:
    """What a dream needs of its VP: who it is, its engine, its transcripts and memory."""

    persona: Persona
    engine: Engine
    store: Store
    memory: MemoryBackend


@dataclass(frozen=True, slots=True)
class DreamReport:
    """What one dream did: whether it ran, how it ended, how many memories it wrote."""

    ran: bool
    reason: str
    written: int = 0


async def dream(ctx: DreamContext, group_id: str, turns: int) -> DreamReport:
    """Run one dream for ``group_id`` covering ``turns`` new turns."""
    vp_id = ctx.persona.id
    conv = await load_conversation(ctx.store, group_id, vp_id)
    if conv is None or turns <= 0:
        return DreamReport(ran=False, reason="nothing new")
    scope = vp_scope(group_id, vp_id)
    before = len(await ctx.memory.list(scope, kind="resident"))
    transcript = render_transcript(conv.summary, conv.messages[-RECENT_MESSAGES:])
    tools = ToolContext(
        conversation_id=f"{group_id}:{vp_id}:dream",
        vp_id=vp_id,
        group_id=group_id,
        mode="dream",
        services={"memory": ctx.memory, "memory_kind": "resident"},
    )
    persona = ctx.persona
    # The registry offers a dream its memory tools only (Tool.modes).
    offered = sorted(t.name for t in ctx.engine.tools.offered(tools))
    system = build_system_prompt(persona=persona, mode="dream", tools=offered)
    result = await ctx.engine.run_turn(
        Conversation(id=tools.conversation_id),
        Message.user(f"Recent conversation in this group:\n{transcript}"),
        system=system,
        ctx=tools,
        context=CallContext(speaker=Speaker.of(persona), mode=CallMode.DREAM),
    )
    after = len(await ctx.memory.list(scope, kind="resident"))
    log.info(
        "dream of %s in %s: %s, %d new memories", vp_id, group_id, result.reason, after - before
    )
    return DreamReport(ran=True, reason=str(result.reason), written=after - before)


class DreamScheduler:
    """When each group's dream is due: after ``every`` turns at once, else after ``idle_s`` quiet.

    Turn counts live here rather than in the transcript so a dream never
    writes what a running turn also writes; a restarted actor simply starts
    counting again.
    """

    def __init__(self, ctx: DreamContext, every: int, idle_s: float) -> None:
        self.ctx = ctx
        self.every = every
        self.idle_s = idle_s
        self._turns: dict[str, int] = {}
        self._timers: dict[str, asyncio.Task[None]] = {}
        # Dreams under way: held here so they are not garbage-collected.
        self.running: set[asyncio.Task[None]] = set()

    async def close(self) -> None:
        """Stop every armed and running dream (the VP is closed)."""
        for task in list(self.running):
            task.cancel()
        await asyncio.gather(*list(self.running), return_exceptions=True)

    async def run_now(self, group_id: str) -> DreamReport:
        """Dream for one group now, over the turns counted since its last dream."""
        turns = self._turns.pop(group_id, 0)
        report = await dream(self.ctx, group_id, turns)
        if not report.ran:
            self._turns[group_id] = self._turns.get(group_id, 0) + turns
        return report

    def turn_done(self, group_id: str) -> None:
        """Count a finished turn and (re)arm the group's dream."""
        turns = self._turns[group_id] = self._turns.get(group_id, 0) + 1
        timer = self._timers.pop(group_id, None)
        if timer is not None:
            timer.cancel()
        due_now = bool(self.every) and turns >= self.every
        if not due_now and self.idle_s <= 0:
            return

        async def later() -> None:
            if not due_now:
                await asyncio.sleep(self.idle_s)
            self._timers.pop(group_id, None)
            try:
                await self.run_now(group_id)
            except Exception:
                log.warning(
                    "dream of %s in %s failed", self.ctx.persona.id, group_id, exc_info=True
                )

        task = asyncio.create_task(later())
        self._timers[group_id] = task
        self.running.add(task)
        task.add_done_callback(self.running.discard)


class DreamHook:
    """Dream scheduling as an after-turn hook: each finished turn counts toward a dream."""

    name = "dream-scheduling"

    def __init__(self, scheduler: DreamScheduler) -> None:
        self.scheduler = scheduler

    async def before_turn(self, turn: BeforeTurn) -> list[str]:
        return []

    async def after_turn(self, turn: AfterTurn) -> None:
        self.scheduler.turn_done(turn.group_id)
