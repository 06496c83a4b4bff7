"""The VP actor: one persona's engine, serving every group that has this VP.

Turns of one group run one at a time in arrival order (a session lane);
different groups run concurrently under the actor's concurrency cap. The
actor keeps nothing between turns that the store does not also hold: each
turn loads the VP's transcript, catches up on the group log, runs the engine,
and saves the transcript back, so a restarted actor carries on where the
crashed one stopped.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from actors import dream as dreaming
from actors.config import RuntimeConfig
from actors.lanes import Lanes
from actors.output import EnvelopeWriter
from actors.tools import route_forward_tool
from actors.transcripts import load_conversation, save_conversation
from actors.turns import TurnOutcome, TurnRequest
from actors.visibility import group_view
from engine.engine import Engine, TurnResult
from engine.events import StopEvent
from engine.memory import memory_tools, recall, render_memory, scopes_for
from engine.messages import Conversation, Usage
from engine.providers.registry import ProviderRegistry
from engine.tools.builtin import builtin_tools
from engine.tools.registry import AskUser, ToolContext, ToolRegistry
from personas.loader import load_personas
from personas.mentions import extract_mentions
from personas.prompts import build_system_prompt
from store.base import Group, GroupMessage, Store

log = logging.getLogger(__name__)

# How much of the group log a turn reads to catch up. Older context reaches
# the VP through its own transcript and compaction summaries.
CATCH_UP_MESSAGES = 200
QUICK_CATCH_UP = 20
# Transcripts kept in memory between turns (least recently used go first).
CACHED_TRANSCRIPTS = 512


class VPWorker:
    def __init__(self, vp_id: str, config: RuntimeConfig) -> None:
        self.vp_id = vp_id
        self.config = config
        self.library = load_personas(Path(config.personas_dir) if config.personas_dir else None)
        persona = self.library.get(vp_id)
        if persona is None:
            raise ValueError(f"unknown persona {vp_id!r}")
        self.persona = persona
        settings = config.engine
        model = persona.model
        if model is None and persona.model_hint == "fast" and settings.fast_model:
            model = settings.fast_model
        self.providers = ProviderRegistry(settings, overrides=config.provider_overrides)
        tools = ToolRegistry([*builtin_tools(), route_forward_tool(), *memory_tools()])
        self.engine = Engine(self.providers, model=model, tools=tools, settings=settings)
        self.lanes = Lanes(config.max_concurrent_turns)
        self._store: Store | None = None
        self.memory = config.open_memory()
        self._idle: dict[str, asyncio.Task[None]] = {}
        self._transcripts: OrderedDict[str, Conversation] = OrderedDict()
        # Turns since the last dream, per group. Kept here rather than in the
        # transcript so a dream never writes what a running turn also writes;
        # a restarted actor simply starts counting again.
        self._turns_since_dream: dict[str, int] = {}
        # Dreams under way: held here so they are not garbage-collected.
        self.dreams: set[asyncio.Task[None]] = set()
        self._aborts: dict[str, tuple[str, asyncio.Event]] = {}
        self._questions: dict[str, asyncio.Future[str]] = {}

    # -- remote API ---------------------------------------------------------
    async def ping(self) -> str:
        return self.vp_id

    async def run_turn(self, req: TurnRequest) -> TurnOutcome:
        abort = asyncio.Event()
        self._aborts[req.turn_id] = (req.group_id, abort)
        try:
            return await self.lanes.run(req.group_id, lambda: self._turn(req, abort))
        finally:
            self._aborts.pop(req.turn_id, None)

    async def abort(self, group_id: str, turn_id: str | None = None) -> int:
        """Abort running and queued turns of a group (or one turn). Returns how many."""
        hits = [
            ev
            for tid, (gid, ev) in self._aborts.items()
            if gid == group_id and (turn_id is None or tid == turn_id)
        ]
        for ev in hits:
            ev.set()
        return len(hits)

    async def answer(self, request_id: str, answer: str) -> bool:
        fut = self._questions.get(request_id)
        if fut is None or fut.done():
            return False
        fut.set_result(answer)
        return True

    async def dream(self, group_id: str) -> dict[str, object]:
        """Run memory maintenance for one group now.

        It runs beside the group's lane, not in it: maintenance must never
        make a person wait. It only reads the transcript, so it cannot race
        a turn that saves it.
        """
        turns = self._turns_since_dream.pop(group_id, 0)
        result = await dreaming.dream(self, group_id, turns)
        if not result.get("ran"):
            self._turns_since_dream[group_id] = self._turns_since_dream.get(group_id, 0) + turns
        return result

    async def stats(self) -> dict[str, Any]:
        calls = sum(getattr(p, "calls", 0) for p in self.config.provider_overrides.values())
        return {"vp_id": self.vp_id, "model_calls": calls, "active_turns": len(self._aborts)}

    # -- one turn -------------------------------------------------------------
    async def store(self) -> Store:
        if self._store is None:
            self._store = self.config.open_store()
        return self._store

    async def _turn(self, req: TurnRequest, abort: asyncio.Event) -> TurnOutcome:
        store = await self.store()
        group = await store.get_group(req.group_id)
        reply = _Reply()
        writer = EnvelopeWriter(
            store,
            req.group_id,
            self.vp_id,
            req.turn_id,
            before_stop=self._reply_saver(store, req, group, reply),
        )
        if abort.is_set() or group is None or self.vp_id not in group.roster:
            why = "aborted" if abort.is_set() else "the VP is no longer in this group"
            return await self._end_early(writer, req, "aborted" if abort.is_set() else "error", why)
        conv = await self._transcript(store, req.group_id)
        recent = await self._catch_up(store, req.group_id, conv.meta.get("cursor"))
        context, trigger = group_view(recent, self.vp_id, conv.meta.get("cursor"), req.trigger_id)
        conv.messages.extend(context)
        ctx = self._context(req, group, conv, store, writer)
        allowed = set(self.persona.tools) if self.persona.tools is not None else None
        if allowed is not None:
            allowed.add("route_forward")
        offered = [t.name for t in self.engine.tools.offered(ctx, allowed)]
        memory = await self._recall(req, trigger.content if trigger else "")
        system = self._system_prompt(group, offered, memory)
        await writer.status("thinking")
        result = await self.engine.run_turn(
            conv,
            trigger,
            system=system,
            emit=writer.feed,
            ctx=ctx,
            allowed_tools=allowed,
            abort=abort,
            options={"persona": self.persona_hint(), "memory": memory},
        )
        await writer.close(result.reason)
        conv.meta["cursor"] = req.trigger_id
        await save_conversation(store, req.group_id, self.vp_id, conv)
        self._remember_transcript(req.group_id, conv)
        turns = self._turns_since_dream.get(req.group_id, 0) + 1
        self._turns_since_dream[req.group_id] = turns
        self._schedule_dream(req.group_id, turns)
        return self._outcome(req, result, writer.skipped, reply)

    def _reply_saver(
        self, store: Store, req: TurnRequest, group: Group | None, reply: _Reply
    ) -> Any:
        """Store the VP's reply in the group log before its result goes out."""

        async def save(stop: StopEvent, skipped: bool) -> None:
            if group is None or skipped or not stop.text.strip():
                return
            mentions = []
            for name in extract_mentions(stop.text):
                persona = self.library.resolve(name)
                if persona and persona.id in group.roster and persona.id != self.vp_id:
                    mentions.append(persona.id)
            meta: dict[str, Any] = {
                "causedBy": [*req.caused_by, req.trigger_id],
                "chainId": req.chain_id,
                "turnId": req.turn_id,
                "stop": stop.reason,
            }
            if stop.reason in ("aborted", "error"):
                meta["incomplete"] = True
            stored, _ = await store.append_message(
                req.group_id,
                GroupMessage(
                    author=self.vp_id,
                    role="assistant",
                    text=stop.text,
                    mentions=list(dict.fromkeys(mentions)),
                    meta=meta,
                ),
            )
            reply.message_id, reply.mentions = stored.id, stored.mentions

        return save

    async def _transcript(self, store: Store, group_id: str) -> Conversation:
        """This VP's transcript in a group: from memory, else from the store.

        Only this actor writes it, so the copy kept between turns is always
        the newest; a restarted actor starts from the store.
        """
        conv = self._transcripts.pop(group_id, None)
        if conv is None:
            conv = await load_conversation(store, group_id, self.vp_id)
        return conv or Conversation(id=f"{group_id}:{self.vp_id}")

    def _remember_transcript(self, group_id: str, conv: Conversation) -> None:
        self._transcripts[group_id] = conv
        while len(self._transcripts) > CACHED_TRANSCRIPTS:
            self._transcripts.popitem(last=False)

    @staticmethod
    async def _catch_up(store: Store, group_id: str, cursor: str | None) -> list[GroupMessage]:
        """The group log since ``cursor``: a short read usually covers it."""
        recent = await store.read_messages(group_id, limit=QUICK_CATCH_UP)
        if len(recent) < QUICK_CATCH_UP or (cursor is not None and recent[0].id <= cursor):
            return recent
        return await store.read_messages(group_id, limit=CATCH_UP_MESSAGES)

    async def _recall(self, req: TurnRequest, query: str) -> list[str]:
        """Memories for the system prompt: the user's, the group's, this VP's own."""
        try:
            scopes = scopes_for(req.user_id, req.group_id, self.vp_id)
            items = await recall(
                self.memory,
                scopes,
                query,
                now=time.time(),
                vp_id=self.vp_id,
                limit=self.config.recall_limit,
                budget_tokens=self.config.recall_budget_tokens,
            )
        except Exception:
            # Recall is a help, never a reason to fail the turn.
            log.warning("memory recall failed for %s", self.vp_id, exc_info=True)
            return []
        return render_memory(items)

    def _schedule_dream(self, group_id: str, turns: int) -> None:
        """Dream after N turns at once, else when the group stays quiet long enough."""
        timer = self._idle.pop(group_id, None)
        if timer is not None:
            timer.cancel()
        every, idle = self.config.dream_every_turns, self.config.dream_idle_s
        due_now = bool(every) and turns >= every
        if not due_now and idle <= 0:
            return

        async def later() -> None:
            if not due_now:
                await asyncio.sleep(idle)
            self._idle.pop(group_id, None)
            try:
                await self.dream(group_id)
            except Exception:
                log.warning("dream of %s in %s failed", self.vp_id, group_id, exc_info=True)

        task = asyncio.create_task(later())
        self._idle[group_id] = task
        self.dreams.add(task)
        task.add_done_callback(self.dreams.discard)

    def _context(
        self,
        req: TurnRequest,
        group: Group,
        conv: Conversation,
        store: Store,
        writer: EnvelopeWriter,
    ) -> ToolContext:
        services: dict[str, Any] = {
            "roster": list(group.roster),
            "user_id": req.user_id,
            "memory": self.memory,
        }
        if req.router is not None:
            router = req.router

            async def forward(to: str, text: str, reason: str | None) -> dict[str, Any]:
                result: dict[str, Any] = await router.forward.remote(
                    req.group_id,
                    self.vp_id,
                    to,
                    text,
                    reason,
                    req.trigger_id,
                    req.caused_by,
                    req.chain_id,
                )
                return result

            services["router"] = forward
        return ToolContext(
            conversation_id=conv.id,
            vp_id=self.vp_id,
            group_id=req.group_id,
            mode="group",
            ask_user=self._asker(req, store, writer),
            services=services,
        )

    def _system_prompt(self, group: Group, tools: list[str], memory: list[str]) -> str:
        roster = [p for p in (self.library.get(v) for v in group.roster) if p is not None]
        return build_system_prompt(
            persona=self.persona,
            mode="group" if len(roster) > 1 else "chat",
            language="zh" if group.settings.language == "zh" else "en",
            roster=roster,
            tools=tools,
            memory=memory,
        )

    def persona_hint(self) -> dict[str, Any]:
        p = self.persona
        return {"id": p.id, "name": p.name, "role": p.role, "traits": list(p.traits)}

    def _asker(self, req: TurnRequest, store: Store, writer: EnvelopeWriter) -> AskUser:
        async def ask(question: str, choices: list[str] | None) -> str:
            request_id = f"ask_{uuid.uuid4().hex}"
            fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()
            self._questions[request_id] = fut
            timeout = self.config.ask_timeout_s
            await store.append_event(
                req.group_id,
                {
                    "type": "ask_user_question",
                    "requestId": request_id,
                    "prompt": question,
                    "choices": choices,
                    "groupId": req.group_id,
                    "vpId": self.vp_id,
                    "turnId": req.turn_id,
                    "expiresAt": time.time() + timeout,
                },
            )
            try:
                async with asyncio.timeout(timeout):
                    return await fut
            except TimeoutError:
                await writer.system(
                    "the question expired before anyone answered", requestId=request_id
                )
                raise
            finally:
                self._questions.pop(request_id, None)

        return ask

    async def _end_early(
        self, writer: EnvelopeWriter, req: TurnRequest, reason: str, message: str
    ) -> TurnOutcome:
        await writer.feed(
            StopEvent(
                reason="aborted" if reason == "aborted" else "error",
                usage=Usage(),
                cost_usd=0.0,
                duration_ms=0,
                error=message,
                error_kind=reason,
            )
        )
        await writer.close(reason)
        return TurnOutcome(req.turn_id, self.vp_id, req.group_id, reason, error=message)

    def _outcome(
        self, req: TurnRequest, result: TurnResult, skipped: bool, reply: _Reply
    ) -> TurnOutcome:
        return TurnOutcome(
            turn_id=req.turn_id,
            vp_id=self.vp_id,
            group_id=req.group_id,
            reason=result.reason,
            text="" if skipped else result.text,
            message_id=reply.message_id,
            mentions=reply.mentions,
            skipped=skipped,
            error=result.error,
            handoff=result.end_turn,
        )


@dataclass(slots=True)
class _Reply:
    """Where a turn's stored reply ended up (filled in before the result goes out)."""

    message_id: str | None = None
    mentions: list[str] = field(default_factory=list)
