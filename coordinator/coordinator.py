"""The coordinator actor: groups, roster, mention routing, fan-out, loop guard.

Groups are sharded over several coordinator actors by id, so each group has
exactly one coordinator and its loop guard and in-flight turns live in one
place. Every message is persisted before anything is dispatched, and every
dispatched turn ends with a ``result`` envelope, even when its VP actor dies.
"""

from __future__ import annotations

from collections.abc import Sequence

from actors.config import RuntimeConfig
from actors.turns import ForwardRequest, TurnOrigin, TurnOutcome, TurnRequest
from actors.vp_actor import VPStats
from actors.writer import GroupEvents
from coordinator.dispatch import Dispatcher
from coordinator.groups import GroupBook
from coordinator.loop_guard import Chain, LoopGuard, Verdict
from coordinator.results import CancelResult, ForwardResult, IngestResult
from engine.events import StopReason
from personas.directory import PersonaDirectory
from personas.mentions import extract_mentions
from personas.routing import Selection, Source, select_targets
from protocol.settings import GroupSettingsPatch
from store.base import Group, GroupMessage, Store

# Replies of turns that ended this way are never routed on.
_NOT_ROUTED = frozenset({StopReason.TOOL_HANDOFF, StopReason.ABORTED, StopReason.ERROR})


class CoordinatorWorker:
    """The one owner of a shard of groups: their records, chains and turns.

    A person's message is stored, then fanned out to the VPs its mentions
    select; a VP's reply that mentions others and a ``route_forward`` go
    through the same selection rules and the group's :class:`LoopGuard`.
    Operations that fail raise :class:`~coordinator.errors.GroupError`;
    forwards never raise (a refusal is a :class:`ForwardResult`).
    """

    def __init__(self, shard: int, config: RuntimeConfig) -> None:
        self.shard = shard
        self.config = config
        self.store: Store = config.open_store()
        self.personas = PersonaDirectory.open(config.personas_dir)
        self.groups = GroupBook(self.store, self.personas)
        name = config.actor_name("coordinator", shard)
        self.turns = Dispatcher(config, self.store, name, self._after_turn)
        self._guards: dict[str, LoopGuard] = {}

    def _guard(self, group: Group) -> LoopGuard:
        guard = self._guards.get(group.id)
        if guard is None:
            guard = self._guards[group.id] = LoopGuard(group.settings)
        guard.settings = group.settings
        return guard

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
        return await self.groups.create(
            group_id, name, roster, default_vp, list(members or []), settings
        )

    async def get_group(self, group_id: str) -> Group | None:
        return await self.groups.get(group_id)

    async def rename_group(self, group_id: str, name: str) -> Group:
        return await self.groups.rename(group_id, name)

    async def delete_group(self, group_id: str) -> bool:
        if await self.groups.get(group_id) is not None:
            await self.cancel(group_id)
        self._guards.pop(group_id, None)
        self.turns.forget(group_id)
        return await self.groups.forget(group_id)

    async def add_vp(self, group_id: str, vp_id: str) -> Group:
        return await self.groups.add_vp(group_id, vp_id)

    async def remove_vp(self, group_id: str, vp_id: str) -> Group:
        _, vp = await self.groups.member_vp(group_id, vp_id)
        await self.turns.cancel(group_id, vp)
        return await self.groups.remove_vp(group_id, vp)

    async def set_default_vp(self, group_id: str, vp_id: str | None) -> Group:
        return await self.groups.set_default_vp(group_id, vp_id)

    async def update_settings(self, group_id: str, patch: GroupSettingsPatch) -> Group:
        return await self.groups.update_settings(group_id, patch)

    async def set_members(self, group_id: str, members: list[str]) -> Group:
        return await self.groups.set_members(group_id, members)

    # -- messages -----------------------------------------------------------
    async def ingest(
        self,
        group_id: str,
        sender: str,
        text: str,
        mentions: list[str] | None = None,
        client_message_id: str | None = None,
    ) -> IngestResult:
        """Persist a person's message, then fan it out.

        A message the group or one of its VPs has no room for is refused with
        ``GroupError(BUSY)`` before it is stored (``coordinator.admission``).
        """
        group = await self.groups.require(group_id)
        names = list(dict.fromkeys([*extract_mentions(text), *(mentions or [])]))
        sel = self._select(group, names, Source.PERSON, None)
        with self.turns.admission.reserve(group.id, sel.targets):
            return await self._accept(group, sel, sender, text, client_message_id)

    async def _accept(
        self, group: Group, sel: Selection, sender: str, text: str, client_message_id: str | None
    ) -> IngestResult:
        """Store an admitted message, then dispatch its turns."""
        meta: dict[str, object] = {"trigger": str(sel.trigger)}
        if client_message_id:
            meta["clientMessageId"] = client_message_id
        msg = GroupMessage(author=sender, role="user", text=text, mentions=sel.targets, meta=meta)
        stored, created = await self.store.append_message(group.id, msg)
        if not created:
            return IngestResult(stored.id, duplicate=True, trigger=str(sel.trigger))
        events = GroupEvents(self.store, group.id)
        if sel.unknown:
            await self._unknown_names(events, group, sel.unknown, stored.id)
        elif not sel.targets:
            await events.notice(
                "No VP is available to answer: add a VP to this group.", stored.id, "no_vp"
            )
        guard = self._guard(group)
        chain = guard.start_chain(stored.id)
        origin = TurnOrigin(trigger_id=stored.id, chain_id=stored.id, user_id=sender)
        turns: dict[str, str] = {}
        for vp in sel.targets:
            turn_id = await self._dispatch(group, chain, vp, origin, source=None)
            if turn_id is None:
                break
            turns[vp] = turn_id
        return IngestResult(
            stored.id,
            trigger=str(sel.trigger),
            unknown=tuple(sel.unknown),
            truncated=sel.truncated,
            turns=turns,
        )

    async def forward(self, request: ForwardRequest) -> ForwardResult:
        """The ``route_forward`` tool's way in. Never raises: refusals are data."""
        group = await self.groups.get(request.group_id)
        if group is None:
            return ForwardResult(False, error="group_not_found")
        if request.from_vp not in group.roster:
            return ForwardResult(False, error="sender_unknown")
        sel = self._select(group, [request.to], Source.FORWARD, request.from_vp)
        if sel.named_self and not sel.targets:
            return ForwardResult(False, error="self_forward_rejected")
        if not sel.targets:
            detail: dict[str, object] = {"to": request.to, "roster": list(group.roster)}
            return ForwardResult(False, error="target_not_in_roster", detail=detail)
        chain = self._guard(group).chain(request.origin.chain_id)
        dispatched: list[str] = []
        for target in sel.targets:
            # The forwarded turn is one hop further from the person's message.
            depth = request.origin.depth + 1
            verdict = self._admit(group, chain, request.from_vp, target, depth)
            if not verdict.ok:
                await self._refused(group, chain, verdict)
                return ForwardResult(
                    False, tuple(dispatched), error=verdict.rule, detail=dict(verdict.detail)
                )
            msg = GroupMessage(
                author=request.from_vp,
                role="assistant",
                text=request.text,
                meta={
                    "internal": True,
                    "injectedBy": "route_forward",
                    "routeForwardTarget": target,
                    "senderVpId": request.from_vp,
                    "reason": request.reason,
                    "causedBy": [*request.origin.caused_by, request.origin.trigger_id],
                    "chainId": request.origin.chain_id,
                },
            )
            stored, _ = await self.store.append_message(group.id, msg)
            self.turns.start(group, target, request.origin.next_hop(stored.id))
            dispatched.append(target)
        return ForwardResult(True, tuple(dispatched))

    async def turn_started(self, group_id: str, turn_id: str) -> None:
        """A VP actor's acknowledgement that a turn left its queue and started."""
        self.turns.started(group_id, turn_id)

    async def cancel(self, group_id: str, vp_id: str | None = None) -> CancelResult:
        """Abort one VP's turns in a group, or every turn (which also ends its chains)."""
        group = await self.groups.require(group_id)
        if vp_id is None:
            self._guard(group).stop_all()
        return await self.turns.cancel(group_id, vp_id)

    async def answer(self, group_id: str, request_id: str, answer: str) -> bool:
        """Deliver an ``ask_user_answer`` to the VP that asked."""
        return await self.turns.answer(await self.groups.require(group_id), request_id, answer)

    async def wait_idle(self, group_id: str, timeout_s: float = 60.0) -> bool:
        """Wait until no turn of the group is running or about to be dispatched."""
        return await self.turns.wait_idle(group_id, timeout_s)

    async def vp_stats(self, group_id: str, vp_ids: list[str] | None = None) -> list[VPStats]:
        """Per-VP counters (model calls, active turns); also starts the actors."""
        vps = vp_ids if vp_ids is not None else (await self.groups.require(group_id)).roster
        return await self.turns.stats(list(vps))

    # -- routing ------------------------------------------------------------
    def _select(
        self, group: Group, names: list[str], source: Source, sender: str | None
    ) -> Selection:
        return select_targets(
            names,
            group.roster,
            source=source,
            sender=sender,
            resolve=self.personas.resolve,
            cap=group.settings.fanout_cap,
            broadcast_when_unmentioned=group.settings.broadcast_when_unmentioned,
            default_vp=group.default_vp,
        )

    def _admit(
        self, group: Group, chain: Chain, source: str | None, target: str, depth: int
    ) -> Verdict:
        return self._guard(group).admit(chain, source=source, target=target, depth=depth)

    async def _dispatch(
        self, group: Group, chain: Chain, vp: str, origin: TurnOrigin, source: str | None
    ) -> str | None:
        """Start a turn if the loop guard admits it; None when the chain is stopped."""
        verdict = self._admit(group, chain, source, vp, origin.depth)
        if not verdict.ok:
            await self._refused(group, chain, verdict)
            return None
        return self.turns.start(group, vp, origin)

    async def _after_turn(self, req: TurnRequest, outcome: TurnOutcome) -> None:
        """Dispatch the VPs a finished reply mentions, if the group allows it.

        The VP actor already stored the reply (before its result went out)
        and chose its targets with the same rules as a person's message;
        this only routes it on.
        """
        group = await self.groups.get(req.group_id)
        if group is None or outcome.message_id is None:
            return
        if outcome.reason in _NOT_ROUTED or not group.settings.vp_mentions_dispatch:
            return
        if outcome.unknown:
            events = GroupEvents(self.store, group.id)
            await self._unknown_names(events, group, outcome.unknown, outcome.message_id)
        chain = self._guard(group).chain(req.origin.chain_id)
        origin = req.origin.next_hop(outcome.message_id)
        for vp in outcome.mentions:
            if vp not in group.roster:
                continue
            if await self._dispatch(group, chain, vp, origin, source=req.vp_id) is None:
                break

    # -- notices ------------------------------------------------------------
    async def _refused(self, group: Group, chain: Chain, verdict: Verdict) -> None:
        if not verdict.stopped_chain:
            return  # the chain was stopped before (or cancelled), and said so then
        await GroupEvents(self.store, group.id).notice(
            verdict.summary,
            chain.root,
            str(verdict.rule),
            **verdict.detail,
        )

    @staticmethod
    async def _unknown_names(
        events: GroupEvents, group: Group, unknown: Sequence[str], root: str
    ) -> None:
        """Name the mentions that match nobody in the group, and who is in it."""
        plural = "s" if len(unknown) > 1 else ""
        roster = ", ".join(f"@{v}" for v in group.roster) or "(nobody)"
        await events.notice(
            f"Unknown name{plural}: "
            + ", ".join(f"@{n}" for n in unknown)
            + f". In this group: {roster}",
            root,
            "unknown_mentions",
            unknown=list(unknown),
            roster=list(group.roster),
        )
