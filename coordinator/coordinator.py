"""The coordinator actor: groups, roster, mention routing, fan-out, loop guard.

Groups are sharded over several coordinator actors by id, so each group has
exactly one coordinator and its loop guard and in-flight turns live in one
place. Every message is persisted before anything is dispatched, and every
dispatched turn ends with a ``result`` envelope, even when its VP actor dies.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import ActorUnavailableError, RayError

from actors.config import RuntimeConfig
from actors.output import EnvelopeWriter
from actors.turns import TurnOutcome, TurnRequest
from actors.vp_actor import VPWorker
from coordinator.errors import GroupError, GroupErrorCode
from coordinator.loop_guard import Chain, LoopGuard, Verdict
from coordinator.mentions import extract_mentions, select_targets
from engine.events import StopEvent
from engine.messages import Usage
from personas.loader import load_personas
from protocol.settings import GroupSettingsPatch
from store.base import Group, GroupMessage, GroupSettings, Store, StoreError

log = logging.getLogger(__name__)

VPActor = ray.remote(VPWorker)
SYSTEM = "system"
# How often an unknown name may trigger a reload of the persona files.
PERSONA_RELOAD_S = 1.0
# A turn sent while its VP actor restarts waits for it, this often and this long.
RESTART_RETRIES = 3
RESTART_WAIT_S = 30.0
# How far back the event log is searched for a turn's first envelope.
SCAN_FOR_TURN = 2000


class CoordinatorWorker:
    def __init__(self, shard: int, config: RuntimeConfig) -> None:
        self.shard = shard
        self.config = config
        self._load_personas()
        self._store: Store | None = None
        self._groups: dict[str, Group] = {}
        self._guards: dict[str, LoopGuard] = {}
        self._tasks: dict[str, set[asyncio.Task[None]]] = {}
        self._active: dict[str, dict[str, str]] = {}
        self._vps: dict[str, Any] = {}

    # -- plumbing -----------------------------------------------------------
    async def store(self) -> Store:
        if self._store is None:
            self._store = self.config.open_store()
        return self._store

    def _vp(self, vp_id: str) -> Any:
        handle = self._vps.get(vp_id)
        if handle is None:
            handle = VPActor.options(
                name=self.config.actor_name("vp", vp_id),
                namespace=self.config.namespace,
                get_if_exists=True,
                lifetime="detached",
                max_restarts=self.config.vp_max_restarts,
                max_task_retries=0,
                num_cpus=0,
                max_concurrency=1000,
            ).remote(vp_id, self.config)
            self._vps[vp_id] = handle
        return handle

    async def _group(self, group_id: str) -> Group | None:
        group = self._groups.get(group_id)
        if group is None:
            group = await (await self.store()).get_group(group_id)
            if group is not None:
                self._groups[group_id] = group
        return group

    async def _require(self, group_id: str) -> Group:
        group = await self._group(group_id)
        if group is None:
            raise GroupError(GroupErrorCode.NOT_FOUND, f"group {group_id} not found")
        return group

    def _guard(self, group: Group) -> LoopGuard:
        guard = self._guards.get(group.id)
        if guard is None:
            guard = self._guards[group.id] = LoopGuard(group.settings)
        guard.settings = group.settings
        return guard

    def _resolve(self, name: str) -> str | None:
        persona = self.library.resolve(name)
        if persona is None and time.monotonic() - self._loaded_at > PERSONA_RELOAD_S:
            # A persona file may have been dropped in since start: look again.
            self._load_personas()
            persona = self.library.resolve(name)
        return persona.id if persona else None

    def _load_personas(self) -> None:
        pdir = Path(self.config.personas_dir) if self.config.personas_dir else None
        self.library = load_personas(pdir)
        self._loaded_at = time.monotonic()

    async def _save(self, group: Group) -> Group:
        saved = await (await self.store()).save_group(group)
        self._groups[group.id] = saved
        return saved

    # -- group management ---------------------------------------------------
    async def create_group(
        self,
        group_id: str,
        name: str,
        roster: list[str],
        default_vp: str | None = None,
        members: list[str] | None = None,
        settings: GroupSettingsPatch | None = None,
    ) -> Group:
        ids = self._roster_ids(roster)
        if default_vp is not None:
            default_vp = self._roster_ids([default_vp])[0]
            if default_vp not in ids:
                raise GroupError(
                    GroupErrorCode.DEFAULT_NOT_IN_ROSTER, f"{default_vp} is not in the roster"
                )
        name = self._valid_name(name)
        group = Group(
            id=group_id,
            name=name,
            roster=ids,
            default_vp=default_vp or (ids[0] if ids else None),
            members=list(members or []),
            settings=GroupSettings().apply(settings),
        )
        try:
            created = await (await self.store()).create_group(group)
        except StoreError as exc:
            raise GroupError(GroupErrorCode.CONFLICT, str(exc)) from exc
        self._groups[group_id] = created
        return created

    async def get_group(self, group_id: str) -> Group | None:
        return await self._group(group_id)

    async def rename_group(self, group_id: str, name: str) -> Group:
        group = await self._require(group_id)
        return await self._save(group.model_copy(update={"name": self._valid_name(name)}))

    async def delete_group(self, group_id: str) -> bool:
        if await self._group(group_id) is not None:
            await self.cancel(group_id)
        self._groups.pop(group_id, None)
        self._guards.pop(group_id, None)
        return await (await self.store()).delete_group(group_id)

    async def add_vp(self, group_id: str, vp_id: str) -> Group:
        group = await self._require(group_id)
        (vp,) = self._roster_ids([vp_id])
        if vp in group.roster:
            return group
        roster = [*group.roster, vp]
        return await self._save(
            group.model_copy(update={"roster": roster, "default_vp": group.default_vp or vp})
        )

    async def remove_vp(self, group_id: str, vp_id: str) -> Group:
        group = await self._require(group_id)
        (vp,) = self._roster_ids([vp_id])
        if vp not in group.roster:
            raise GroupError(GroupErrorCode.NOT_IN_ROSTER, f"{vp} is not in this group")
        await self.cancel(group_id, vp)
        roster = [v for v in group.roster if v != vp]
        default = group.default_vp if group.default_vp != vp else (roster[0] if roster else None)
        return await self._save(group.model_copy(update={"roster": roster, "default_vp": default}))

    async def set_default_vp(self, group_id: str, vp_id: str | None) -> Group:
        group = await self._require(group_id)
        vp = self._roster_ids([vp_id])[0] if vp_id else None
        if vp is not None and vp not in group.roster:
            raise GroupError(GroupErrorCode.DEFAULT_NOT_IN_ROSTER, f"{vp} is not in the roster")
        return await self._save(group.model_copy(update={"default_vp": vp}))

    async def update_settings(self, group_id: str, changes: GroupSettingsPatch) -> Group:
        group = await self._require(group_id)
        settings = group.settings.apply(changes)
        return await self._save(group.model_copy(update={"settings": settings}))

    async def set_members(self, group_id: str, members: list[str]) -> Group:
        group = await self._require(group_id)
        return await self._save(group.model_copy(update={"members": list(dict.fromkeys(members))}))

    def _roster_ids(self, names: list[str]) -> list[str]:
        ids: list[str] = []
        unknown: list[str] = []
        for name in names:
            pid = self._resolve(name)
            if pid is None:
                unknown.append(name)
            elif pid not in ids:
                ids.append(pid)
        if unknown:
            raise GroupError(
                GroupErrorCode.UNKNOWN_VP,
                f"unknown VP: {', '.join(unknown)}; known: {', '.join(self.library.ids())}",
            )
        return ids

    @staticmethod
    def _valid_name(name: str) -> str:
        name = (name or "").strip()
        if not name or len(name) > 120:
            raise GroupError(GroupErrorCode.INVALID_NAME, "a group name needs 1 to 120 characters")
        return name

    # -- messages -----------------------------------------------------------
    async def ingest(
        self,
        group_id: str,
        sender: str,
        text: str,
        mentions: list[str] | None = None,
        client_message_id: str | None = None,
    ) -> dict[str, Any]:
        """Persist a person's message, then fan it out. Returns what was dispatched."""
        group = await self._require(group_id)
        names = list(dict.fromkeys([*extract_mentions(text), *(mentions or [])]))
        sel = select_targets(
            names,
            group.roster,
            sender=None,
            resolve=self._resolve,
            cap=group.settings.fanout_cap,
            broadcast_when_unmentioned=group.settings.broadcast_when_unmentioned,
            default_vp=group.default_vp,
        )
        meta: dict[str, Any] = {"trigger": sel.trigger}
        if client_message_id:
            meta["clientMessageId"] = client_message_id
        msg = GroupMessage(author=sender, role="user", text=text, mentions=sel.targets, meta=meta)
        stored, created = await (await self.store()).append_message(group_id, msg)
        result: dict[str, Any] = {
            "messageId": stored.id,
            "duplicate": not created,
            "dispatched": [],
            "trigger": sel.trigger,
            "unknown": sel.unknown,
            "truncated": sel.truncated,
            "turns": {},
        }
        if not created:
            return result
        if sel.unknown:
            await self._notice(
                group,
                f"Unknown name{'s' if len(sel.unknown) > 1 else ''}: "
                + ", ".join(f"@{n}" for n in sel.unknown)
                + ". In this group: "
                + self._roster_text(group),
                stored.id,
                rule="unknown_mentions",
                unknown=sel.unknown,
                roster=group.roster,
            )
        elif not sel.targets:
            await self._notice(
                group,
                "No VP is available to answer: add a VP to this group.",
                stored.id,
                rule="no_vp",
            )
        chain = self._guard(group).start_chain(stored.id)
        for vp in sel.targets:
            turn_id = await self._dispatch(group, vp, stored, chain, [], None, sender)
            if turn_id is None:
                break
            result["dispatched"].append(vp)
            result["turns"][vp] = turn_id
        return result

    async def forward(
        self,
        group_id: str,
        from_vp: str,
        to: str,
        text: str,
        reason: str | None,
        trigger_id: str,
        caused_by: list[str],
        chain_id: str,
    ) -> dict[str, Any]:
        """The ``route_forward`` tool's way in. Never raises: refusals are data."""
        group = await self._group(group_id)
        if group is None:
            return {"ok": False, "error": "group_not_found"}
        if from_vp not in group.roster:
            return {"ok": False, "error": "sender_unknown"}
        if to.lower() == "all":
            targets = [v for v in group.roster if v != from_vp]
        else:
            pid = self._resolve(to)
            if pid is None or pid not in group.roster:
                return {
                    "ok": False,
                    "error": "target_not_in_roster",
                    "detail": {"to": to, "roster": group.roster},
                }
            if pid == from_vp:
                return {"ok": False, "error": "self_forward_rejected"}
            targets = [pid]
        chain = self._guard(group).chain(chain_id)
        caused = [*caused_by, trigger_id]
        dispatched: list[str] = []
        for target in targets[: group.settings.fanout_cap]:
            msg = GroupMessage(
                author=from_vp,
                role="assistant",
                text=text,
                meta={
                    "internal": True,
                    "injectedBy": "route_forward",
                    "routeForwardTarget": target,
                    "senderVpId": from_vp,
                    "reason": reason,
                    "causedBy": caused,
                    "chainId": chain_id,
                },
            )
            verdict = self._guard(group).admit(
                chain, source=from_vp, target=target, depth=len(caused)
            )
            if not verdict.ok:
                await self._refused(group, chain, verdict)
                return {
                    "ok": False,
                    "error": verdict.rule,
                    "detail": verdict.detail,
                    "dispatched": dispatched,
                }
            stored, _ = await (await self.store()).append_message(group_id, msg)
            await self._start(group, target, stored, chain, caused, None)
            dispatched.append(target)
        return {"ok": True, "dispatched": dispatched}

    async def cancel(self, group_id: str, vp_id: str | None = None) -> dict[str, Any]:
        """Abort one VP's turns in a group, or every turn (which also ends its chains)."""
        group = await self._require(group_id)
        if vp_id is None:
            self._guard(group).stop_all("cancelled")
        active = self._active.get(group_id, {})
        vps = {v for v in active.values() if vp_id is None or v == vp_id}
        counts = await asyncio.gather(
            *(self._vp(v).abort.remote(group_id) for v in vps), return_exceptions=True
        )
        aborted = sum(c for c in counts if isinstance(c, int))
        return {"aborted": aborted, "vps": sorted(vps)}

    async def answer(self, group_id: str, request_id: str, answer: str) -> bool:
        """Deliver an ``ask_user_answer`` to whichever VP asked."""
        group = await self._require(group_id)
        for vp in group.roster:
            try:
                if await self._vp(vp).answer.remote(request_id, answer):
                    return True
            except RayError:
                continue
        return False

    async def wait_idle(self, group_id: str, timeout_s: float = 60.0) -> bool:
        """Wait until no turn of the group is running or about to be dispatched."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while tasks := set(self._tasks.get(group_id, ())):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            await asyncio.wait(tasks, timeout=remaining)
        return True

    async def vp_stats(
        self, group_id: str, vp_ids: list[str] | None = None
    ) -> list[dict[str, Any]]:
        """Per-VP counters (model calls, active turns); also starts the actors."""
        vps = vp_ids if vp_ids is not None else (await self._require(group_id)).roster
        return list(await asyncio.gather(*(self._vp(v).stats.remote() for v in vps)))

    # -- dispatch -----------------------------------------------------------
    async def _dispatch(
        self,
        group: Group,
        vp: str,
        trigger: GroupMessage,
        chain: Chain,
        caused_by: list[str],
        source: str | None,
        user_id: str | None,
    ) -> str | None:
        verdict = self._guard(group).admit(chain, source=source, target=vp, depth=len(caused_by))
        if not verdict.ok:
            await self._refused(group, chain, verdict)
            return None
        return await self._start(group, vp, trigger, chain, caused_by, user_id)

    async def _start(
        self,
        group: Group,
        vp: str,
        trigger: GroupMessage,
        chain: Chain,
        caused_by: list[str],
        user_id: str | None,
    ) -> str:
        turn_id = f"{uuid.uuid4().hex[:12]}:{vp}"
        router = ray.get_runtime_context().current_actor if len(group.roster) > 1 else None
        req = TurnRequest(
            group.id,
            vp,
            turn_id,
            trigger.id,
            list(caused_by),
            chain.root,
            user_id or trigger.meta.get("userId") or None,
            router,
        )
        self._active.setdefault(group.id, {})[turn_id] = vp
        task = asyncio.create_task(self._run(req))
        tasks = self._tasks.setdefault(group.id, set())
        tasks.add(task)
        task.add_done_callback(lambda t: self._done(group.id, turn_id, t))
        return turn_id

    def _done(self, group_id: str, turn_id: str, task: asyncio.Task[None]) -> None:
        self._tasks.get(group_id, set()).discard(task)
        self._active.get(group_id, {}).pop(turn_id, None)

    async def _run(self, req: TurnRequest) -> None:
        for attempt in range(RESTART_RETRIES + 1):
            try:
                outcome: TurnOutcome = await self._vp(req.vp_id).run_turn.remote(req)
                break
            except ActorUnavailableError as exc:
                # The actor is restarting. A turn that never started can simply
                # go to the restarted actor; one that was running is lost.
                if attempt < RESTART_RETRIES and not await self._turn_started(req):
                    if await self._wait_alive(req.vp_id):
                        continue
                log.warning("turn %s lost: %s", req.turn_id, exc)
                await self._lost_turn(req, exc)
                return
            except RayError as exc:
                log.warning("turn %s lost: %s", req.turn_id, exc)
                await self._lost_turn(req, exc)
                return
        try:
            await self._after_turn(req, outcome)
        except Exception:
            log.exception("follow-up of turn %s failed", req.turn_id)

    async def _turn_started(self, req: TurnRequest) -> bool:
        """Whether the turn left any envelope in the event log (rare path: a failure)."""
        store = await self.store()
        head = await store.read_events(req.group_id, 2**62, limit=1)
        recent = await store.read_events(
            req.group_id, max(0, head.last_seq - SCAN_FOR_TURN), limit=SCAN_FOR_TURN
        )
        return any(env.get("turnId") == req.turn_id for _, env in recent.events)

    async def _wait_alive(self, vp_id: str) -> bool:
        """Ping a restarting VP actor until it answers (about half a minute at most)."""
        delay = 0.1
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RESTART_WAIT_S
        while loop.time() < deadline:
            try:
                await self._vp(vp_id).ping.remote()
                return True
            except ActorUnavailableError:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
            except RayError:
                return False
        return False

    async def _lost_turn(self, req: TurnRequest, exc: Exception) -> None:
        """The VP actor died mid-turn: end the turn with an error result."""
        writer = EnvelopeWriter(await self.store(), req.group_id, req.vp_id, req.turn_id)
        message = (
            f"@{req.vp_id} stopped unexpectedly and this turn was lost "
            f"({type(exc).__name__}). It has been restarted: send the message again."
        )
        await writer.feed(
            StopEvent(
                reason="error",
                usage=Usage(),
                cost_usd=0.0,
                duration_ms=0,
                error=message,
                error_kind="actor_died",
            )
        )
        await writer.close("error")

    async def _after_turn(self, req: TurnRequest, outcome: TurnOutcome) -> None:
        """Dispatch the VPs a finished reply mentions, if the group allows it.

        The VP actor already stored the reply (before its result went out);
        this only routes it on.
        """
        group = await self._group(req.group_id)
        if group is None or outcome.message_id is None or not outcome.mentions:
            return
        if outcome.reason in ("tool_handoff", "aborted", "error"):
            return
        if not group.settings.vp_mentions_dispatch:
            return
        reply = await (await self.store()).get_message(group.id, outcome.message_id)
        if reply is None:
            return
        chain = self._guard(group).chain(req.chain_id)
        caused = [*req.caused_by, req.trigger_id]
        for vp in outcome.mentions[: group.settings.fanout_cap]:
            if vp not in group.roster:
                continue
            if (
                await self._dispatch(group, vp, reply, chain, caused, req.vp_id, req.user_id)
                is None
            ):
                break

    # -- notices ------------------------------------------------------------
    async def _refused(self, group: Group, chain: Chain, verdict: Verdict) -> None:
        await self._notice(
            group,
            f"{verdict.message}; the chain was stopped.",
            chain.root,
            rule=verdict.rule,
            **verdict.detail,
        )

    async def _notice(self, group: Group, message: str, root: str, **detail: Any) -> None:
        """Tell every client something about the group, and keep it in the log."""
        store = await self.store()
        await store.append_event(
            group.id,
            {
                "type": "yeaft_output",
                "conversationId": group.id,
                "groupId": group.id,
                "vpId": SYSTEM,
                "turnId": root,
                "data": {
                    "type": "system",
                    "subtype": "notice",
                    "message": message,
                    "detail": detail,
                },
            },
        )
        await store.append_message(
            group.id,
            GroupMessage(
                author=SYSTEM, role="system", text=message, meta={"notice": detail, "chainId": root}
            ),
        )

    def _roster_text(self, group: Group) -> str:
        return ", ".join(f"@{v}" for v in group.roster) or "(nobody)"
