"""One VP turn, step by step: context → memory → prompt → engine → reply → result.

:class:`TurnRunner` is given everything it works with
(:class:`~actors.services.VPServices`, the request, an abort event) and owns
no state beyond the turn; the turn's tools and the terms it may call them on
come from :class:`~actors.turn_tools.TurnToolkit`. Each step is a method;
the order, and the rule that the reply is stored before the ``result`` goes
out, are visible in :meth:`TurnRunner.steps`. The turn's
:class:`~actors.turns.TurnTracker` records which step it reached.

Every turn ends with exactly one ``result``, whatever fails and whenever an
abort comes: the writer refuses a second one, a step that raises before the
result ends the turn with an error result instead of taking the actor's call
down with it (the coordinator would report the turn lost), and an abort that
comes once the engine has finished is too late to change how the turn ended.
"""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import dataclass, field

from actors.attachments import open_files
from actors.budget import TurnBudget
from actors.coordinator_link import CoordinatorLink
from actors.group_events import GroupEvents, error_stop
from actors.hooks import BeforeTurn, context_window
from actors.queueing import SteerInbox, shorten_overflow
from actors.services import VPServices
from actors.threads import main_timeline, thread_context
from actors.turn_tools import TurnToolkit, turn_mode
from actors.turns import TurnOutcome, TurnRequest, TurnState, TurnTracker
from actors.version_view import refresh_versions
from actors.visibility import forget_deleted, group_view, rewind, trigger_text
from actors.writer import TurnWriter
from engine.attachments import drop_images
from engine.call_context import CallContext, Speaker
from engine.errors import SinkFailed
from engine.events import EngineEvent, StopEvent, StopReason, ToolResultEvent
from engine.messages import Conversation, Message, Usage
from engine.tools.registry import ToolContext
from engine.turn_loop import TurnResult
from personas.mentions import extract_mentions
from personas.prompts import TRUNCATED_MARKER, build_system_prompt
from personas.routing import Selection, Source, select_targets
from personas.session import Session
from protocol.tasks import ToolUse
from store.base import Group, GroupMessage, StoreError
from store.budgets import day_account
from store.conversation import GroupKind
from store.quotas import NO_PERSON, UsageKey
from store.threads import THREAD_KEY
from store.workspaces import WorkspaceNameError, files_of, read_project_doc
from telemetry import tracing

log = logging.getLogger(__name__)

# How much of the group log a turn reads to catch up. Older context reaches
# the VP through its own transcript and compaction summaries.
CATCH_UP_MESSAGES = 200
QUICK_CATCH_UP = 20
# How much of a tool's result a task's evidence keeps.
TOOL_SUMMARY_CHARS = 300


@dataclass(slots=True)
class _Context:
    """What the context step found: the group, the transcript and the turn's input."""

    group: Group
    conv: Conversation
    trigger: Message | None
    tools: ToolContext
    allowed: set[str] | None = None
    offered: list[str] = field(default_factory=list)


class TurnRunner:
    """Runs one turn of one VP in one group; :meth:`run` returns how it ended."""

    def __init__(
        self,
        services: VPServices,
        req: TurnRequest,
        abort: asyncio.Event,
        tracker: TurnTracker,
        host: CoordinatorLink | None = None,
        inbox: SteerInbox | None = None,
        overflow: frozenset[str] = frozenset(),
    ) -> None:
        self.s = services
        # Messages that join the turn while it runs (steering), and the
        # collected messages shortened to a line (``actors.queueing``).
        self.inbox = inbox
        self.overflow = overflow
        self.req = req
        self.abort = abort
        self.tracker = tracker
        self.host = host
        events = GroupEvents(services.store, req.group_id, req.origin.thread_id)
        self.writer: TurnWriter = TurnWriter(
            events,
            services.vp_id,
            req.turn_id,
            tracker,
            req.origin.trigger_id,
            services.heartbeat_s,
        )
        self.toolkit = TurnToolkit(services, req, self.writer, host)
        # How the turn ended, set just before its result is sent.
        self.ended: TurnOutcome | None = None
        self.budget = TurnBudget(services.store, req.group_id, req.turn_id, req.origin.user_id)
        # The tools the turn called and how each went (a task's evidence).
        self.tool_uses: list[ToolUse] = []

    async def run(self) -> TurnOutcome:
        """Take the turn's steps; whatever fails, the turn ends with one ``result``.

        Traced as the GenAI conventions' ``invoke_agent`` span (a team
        node's run says which node it is).
        """
        req, delegation = self.req, self.req.delegation
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.id": self.s.vp_id,
            "gen_ai.agent.name": self.s.persona.name,
            "gen_ai.conversation.id": req.group_id,
            "yeaft.turn.id": req.turn_id,
            "yeaft.chain.id": req.origin.chain_id,
            "yeaft.task.id": delegation.task_id if delegation else None,
            "yeaft.team.node": delegation.run_id if delegation else None,
            "yeaft.team.role": str(delegation.role) if delegation else None,
        }
        with tracing.span(f"invoke_agent {self.s.vp_id}", attributes) as span:
            outcome = await self._run()
            if span.is_recording():
                usage = self.reported_usage()
                span.set_attribute("yeaft.stop_reason", str(outcome.reason))
                span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
                span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
                if outcome.reason in (StopReason.ERROR, StopReason.ERROR_MAX_TURNS):
                    tracing.failed(span, str(outcome.reason))
            return outcome

    async def _run(self) -> TurnOutcome:
        self.tracker.advance(TurnState.STARTED)
        try:
            return await self.steps()
        except Exception as exc:
            if self.writer.sent is not None and self.ended is not None:
                # The result is out; a step after it (saving the transcript)
                # cannot change how the turn ended, and nothing may follow it.
                log.warning(
                    "turn %s: a step after its result failed", self.req.turn_id, exc_info=True
                )
                return self.ended
            if self.tracker.finished:
                # The store refused the result itself: the coordinator, which
                # sees this call fail, reports the turn lost.
                raise
            # A write of the turn's stream that failed reaches here through the engine.
            failure = exc.__cause__ if isinstance(exc, SinkFailed) else exc
            if isinstance(failure, StoreError):
                # The store failed under the turn (Redis went away, say): the
                # result says so, and is written once the store is back.
                log.warning("turn %s failed on the store: %s", self.req.turn_id, failure)
                return await self._end_with(
                    error_stop(StopReason.ERROR, f"the store was unavailable: {failure}", "store")
                )
            log.exception("turn %s of %s failed", self.req.turn_id, self.s.vp_id)
            return await self.end_failed()
        finally:
            # Whatever the end, the budget is charged what the turn used.
            stop = self.writer.stop
            await self.budget.settle(self.reported_usage(), stop.cost_usd if stop else 0.0)

    async def steps(self) -> TurnOutcome:
        early = self._recall_early()
        try:
            ctx = await self.context()
        except BaseException:
            _drop(early)
            raise
        if ctx is None:
            _drop(early)
            return await self.end_early()
        refused = await self.budget.reserve(ctx.group.settings, self.req.origin.chain_id)
        if refused is not None:
            _drop(early)
            return await self._end_with(error_stop(StopReason.ERROR, refused, "budget"))
        ctx.offered.extend(self.toolkit.add_mcp_tools(ctx.group, ctx.tools))
        ctx.offered.extend(self.toolkit.add_a2a_tools(ctx.tools))
        memory, document = await asyncio.gather(
            self.recall(ctx, early), self.project_doc(ctx.group)
        )
        system = self.prompt(ctx, memory, document)
        # The start record and the ``thinking`` status are written while the
        # engine opens its model call; the writer holds the engine's first
        # output until they are in (see TurnWriter.opening).
        opening = asyncio.ensure_future(self.writer.begin())
        opening.add_done_callback(self._opened)
        self.writer.opening = opening
        self.tracker.advance(TurnState.RUNNING)
        result = await self.answer(ctx, system, memory)
        if not await asyncio.shield(opening):
            # Ended from outside before it began (a shutdown, a recovery):
            # its engine was aborted, and nothing it said was written.
            return await self.end_early()
        # From here on an abort is too late: the engine has ended the turn,
        # and its own end (whatever the reason) is the one the result reports.
        reply, mentioned = await self.store_reply(ctx.group)
        self.tracker.advance(TurnState.STORED)
        self.ended = self.outcome(result, reply, mentioned)
        # The usage is read before the result goes out (the bridge forgets its sum then).
        used = self.reported_usage()
        accounts = self.budget.hand_over()
        # Settled before the result: whoever sees it reads up-to-date ledgers (the meter).
        stop = self.writer.stop
        await self.budget.settle(used, stop.cost_usd if stop else 0.0)
        await self.writer.finish(
            message_id=reply.id if reply else None,
            usage=used,
            accounts=accounts,
            row=self.usage_key(),
            mentions=self.ended.mentions,
        )
        await self.save(ctx.conv)
        return self.ended

    # -- steps -----------------------------------------------------------------
    async def context(self) -> _Context | None:
        """The group as this VP may see it up to the trigger; None when the turn cannot run."""
        store, req = self.s.store, self.req
        # Read together: the newest messages usually cover what is new.
        group, recent = await store.group_and_messages(req.group_id, QUICK_CATCH_UP)
        if self.abort.is_set() or group is None or self.s.vp_id not in group.roster:
            return None
        if req.origin.thread_id is not None:
            # A thread's own view, read afresh (actors.threads).
            conv = Conversation(id=f"{req.group_id}:{self.s.vp_id}:{req.origin.thread_id}")
            context, trigger = await thread_context(
                store, req.group_id, req.origin.thread_id, self.s.vp_id, req.origin.trigger_id
            )
        else:
            conv, context, trigger = await self._group_context(recent)
        conv.messages.extend(await open_files(context, self.s.attachments))
        if trigger is not None:
            [trigger] = await open_files([trigger], self.s.attachments)
        if req.delegation is not None:
            # A task's run answers its part, not the message itself: the
            # message is context, the part is the turn's input.
            if trigger is not None:
                conv.messages.append(trigger)
            trigger = Message.user(req.delegation.user_input())
        tools = self.toolkit.context(group, conv)
        allowed = self.toolkit.allowed()
        offered = [t.name for t in self.s.engine.tools.offered(tools, allowed)]
        return _Context(group, conv, trigger, tools, allowed, offered)

    async def _group_context(
        self, recent: list[GroupMessage]
    ) -> tuple[Conversation, list[Message], Message | None]:
        """The VP's transcript of the group, caught up on the main timeline, and the trigger."""
        store, req = self.s.store, self.req
        conv = await self.s.transcripts.take(store, req.group_id)
        cursor = conv.meta.get("cursor")
        # Threads' replies are not the main timeline's context (actors.threads).
        recent = main_timeline(await self._catch_up(cursor, recent))
        forget_deleted(conv.messages, recent)
        hidden = refresh_versions(conv.messages, recent, self.s.vp_id)
        if req.regenerates:
            trigger = rewind(conv.messages, recent, self.s.vp_id, req.origin.trigger_id)
            return conv, [], trigger
        context, trigger = group_view(recent, self.s.vp_id, cursor, req.origin.trigger_id, hidden)
        return conv, shorten_overflow(context, self.overflow), trigger

    async def recall(
        self, ctx: _Context, early: asyncio.Task[tuple[BeforeTurn, list[str]]] | None = None
    ) -> list[str]:
        """What the before-turn hooks add to the prompt: memories first (``actors.hooks``).

        ``early`` is the same step started before the context was read; its
        answer is taken when it asked exactly what this turn asks.
        """
        query = ctx.trigger.content if ctx.trigger else ""
        turn = self._before(
            query if isinstance(query, str) else "",
            context_window(self.s.engine, ctx.group.settings.model or None),
        )
        if early is not None:
            asked, memory = await early
            if asked == turn:
                return memory
        return await self.s.hooks.before(turn)

    def _recall_early(self) -> asyncio.Task[tuple[BeforeTurn, list[str]]] | None:
        """Start the recall with the trigger the request carries, beside the context's reads.

        Only for a turn that answers the message itself (no collected batch,
        regeneration or task run); the window is the VP's own model's (a
        group that chose a model recalls again in :meth:`recall`).
        """
        req, gm = self.req, self.req.trigger
        if gm is None or gm.id != req.origin.trigger_id or req.regenerates or req.delegation:
            return None
        turn = self._before(trigger_text(gm, self.s.vp_id), context_window(self.s.engine))

        async def recall() -> tuple[BeforeTurn, list[str]]:
            return turn, await self.s.hooks.before(turn)

        return asyncio.ensure_future(recall())

    def _before(self, query: str, window: int) -> BeforeTurn:
        return BeforeTurn(
            group_id=self.req.group_id,
            vp_id=self.s.vp_id,
            turn_id=self.req.turn_id,
            user_id=self.req.origin.user_id,
            query=query,
            context_window=window,
        )

    async def project_doc(self, group: Group) -> str | None:
        """The group's project document as the prompt carries it, read afresh each turn."""
        if self.s.data_dir is None:
            return None
        try:
            root = files_of(self.s.data_dir, group)
        except WorkspaceNameError:
            return None
        doc = await asyncio.to_thread(read_project_doc, root, group.settings.project_doc)
        if doc is None:
            return None
        return f"{doc.text.rstrip()}\n{TRUNCATED_MARKER}" if doc.truncated else doc.text

    def prompt(self, ctx: _Context, memory: list[str], document: str | None = None) -> str:
        library = self.s.personas.library
        roster = [p for p in (library.get(v) for v in ctx.group.roster) if p is not None]
        system = build_system_prompt(
            persona=self.s.persona,
            mode=turn_mode(ctx.group),
            language="zh" if ctx.group.settings.language == "zh" else "en",
            roster=roster,
            tools=ctx.offered,
            memory=memory,
            project_doc=document,
            now=self.s.clock(),
            session=self.session(ctx.group),
        )
        if self.req.delegation is not None:
            system += "\n\n" + self.req.delegation.execution_context()
        return system

    def session(self, group: Group) -> Session:
        """Where the turn runs, who writes, on which model, by which channel."""
        conversation = group.kind is GroupKind.CONVERSATION
        return Session(
            place="conversation" if conversation else "group",
            name=group.name,
            model=group.settings.model or self.s.engine.model,
            person=self.req.origin.user_id,
            channel=self.req.origin.channel,
        )

    async def answer(self, ctx: _Context, system: str, memory: list[str]) -> TurnResult:
        try:
            return await self._run_engine(ctx, system, memory)
        finally:
            if self.inbox is not None:
                # Whatever was offered and not taken gets a turn of its own.
                self.inbox.close()

    async def _run_engine(self, ctx: _Context, system: str, memory: list[str]) -> TurnResult:
        delegation = self.req.delegation
        skills = delegation.activation_texts() if delegation is not None else []
        return await self.s.engine.run_turn(
            ctx.conv,
            ctx.trigger,
            system=system,
            # A task's run notes its tool calls for the evidence; a chat turn
            # streams straight to the writer (no extra step per token).
            emit=self.writer.feed if delegation is None else self._feed,
            ctx=ctx.tools,
            allowed_tools=ctx.allowed,
            abort=self.abort,
            context=CallContext(
                speaker=Speaker.of(self.s.persona),
                # A task's run says which (``team.run.synthesis``, ...); chat says none.
                purpose=delegation.purpose if delegation is not None else None,
                language="zh" if ctx.group.settings.language == "zh" else "en",
                memory=tuple(memory),
            ),
            # The group's model, when its owner chose one, for every VP in it.
            model=ctx.group.settings.model or None,
            steer=self.inbox,
            preamble=[Message.user(text) for text in skills],
            announce=True,
        )

    async def _feed(self, event: EngineEvent) -> None:
        """Pass the engine's event to the writer, noting each tool result on the way."""
        if isinstance(event, ToolResultEvent):
            summary = event.content[:TOOL_SUMMARY_CHARS]
            self.tool_uses.append(ToolUse(tool=event.name, ok=not event.is_error, summary=summary))
        await self.writer.feed(event)

    async def store_reply(self, group: Group) -> tuple[GroupMessage | None, Selection]:
        """Put the reply in the group log; it is there before any client sees the result.

        Its mentions are chosen by the same rules as a person's message
        (``@all`` is everyone else); the coordinator routes the stored reply on.
        No ``group_message`` frame announces it: clients have its text from
        the turn's stream, and the result names its id (see ``actors.writer``).
        """
        stop = self.writer.stop
        if self.writer.skipped or stop is None or not stop.text.strip():
            return None, Selection()
        req = self.req
        meta: dict[str, object] = {
            "causedBy": [*req.origin.caused_by, req.origin.trigger_id],
            "chainId": req.origin.chain_id,
            "turnId": req.turn_id,
            "stop": str(stop.reason),
            # What the turn cost, so a reload shows what the live result showed.
            "usage": {
                "input_tokens": self.reported_usage().input_tokens,
                "output_tokens": self.reported_usage().output_tokens,
            },
            "costUsd": stop.cost_usd if math.isfinite(stop.cost_usd) else 0.0,
            "durationMs": max(0, stop.duration_ms),
        }
        if stop.model:
            meta["model"] = stop.model
        if req.regenerates:
            meta["regenerates"] = req.regenerates
        if req.origin.thread_id is not None:
            meta[THREAD_KEY] = req.origin.thread_id
        if req.delegation is not None:
            d = req.delegation
            meta["task"] = {
                "taskId": d.task_id,
                "attempt": d.attempt,
                "runId": d.run_id,
                "role": str(d.role),
            }
        if stop.reason in (StopReason.ABORTED, StopReason.ERROR):
            meta["incomplete"] = True
        sel = select_targets(
            extract_mentions(stop.text),
            group.roster,
            source=Source.VP_REPLY,
            sender=self.s.vp_id,
            resolve=self.s.personas.resolve,
            cap=group.settings.fanout_cap,
        )
        stored, _ = await self.s.store.append_message(
            req.group_id,
            GroupMessage(
                author=self.s.vp_id,
                role="assistant",
                text=stop.text,
                mentions=sel.targets,
                meta=meta,
            ),
        )
        return stored, sel

    def usage_key(self) -> UsageKey:
        """The usage record the turn's tokens and cost go to (``store.quotas``)."""
        stop = self.writer.stop
        return UsageKey(
            day=day_account().removeprefix("day:"),
            user=self.req.origin.user_id or NO_PERSON,
            vp=self.s.vp_id,
            model=(stop.model if stop and stop.model else None) or self.s.engine.model,
        )

    def reported_usage(self) -> Usage:
        """The tokens the turn's result reports: the stop's own, else the sum of its calls.

        Read before the result goes out (the bridge forgets its sum then).
        """
        stop = self.writer.stop
        if stop is not None and (stop.usage.input_tokens or stop.usage.output_tokens):
            return stop.usage
        return self.writer.bridge.usage

    async def save(self, conv: Conversation) -> None:
        if self.req.origin.thread_id is not None:
            return  # a thread's view is read afresh each turn (actors.threads)
        conv.meta["cursor"] = self.req.origin.trigger_id
        if self.inbox is not None:
            # The newest message that joined the turn: later turns start after it.
            conv.meta["cursor"] = max(self.req.origin.trigger_id, self.inbox.seen)
        # Images are for the turn that read them; the transcript keeps a note.
        conv.messages = drop_images(conv.messages)
        self.s.transcripts.keep(self.req.group_id, conv)
        try:
            await self.s.transcripts.save(self.s.store, self.req.group_id, conv)
        except StoreError as exc:
            # The turn has its result; the copy kept in memory serves the next
            # turn, and the next save writes it.
            log.warning("transcript of %s not saved: %s", self.s.vp_id, exc)

    def _opened(self, opening: asyncio.Future[bool]) -> None:
        if not opening.cancelled() and opening.exception() is None and not opening.result():
            self.abort.set()

    async def end_early(self) -> TurnOutcome:
        """The turn cannot run (aborted, group gone, VP removed): one error result."""
        if self.abort.is_set():
            stop = error_stop(StopReason.ABORTED, "aborted", "aborted")
        else:
            stop = error_stop(StopReason.ERROR, "the VP is no longer in this group", "error")
        return await self._end_with(stop)

    async def end_failed(self) -> TurnOutcome:
        """A step raised before the result went out: the turn ends with one error result."""
        return await self._end_with(
            error_stop(StopReason.ERROR, "the turn failed; send the message again", "internal")
        )

    async def _end_with(self, stop: StopEvent) -> TurnOutcome:
        self.ended = TurnOutcome(
            self.req.turn_id, self.s.vp_id, self.req.group_id, stop.reason, error=stop.error
        )
        await self.writer.finish(stop)
        return self.ended

    # -- helpers -----------------------------------------------------------------
    async def _catch_up(self, cursor: str | None, recent: list[GroupMessage]) -> list[GroupMessage]:
        """The group log since ``cursor``: ``recent``, the short read, usually covers it."""
        if len(recent) < QUICK_CATCH_UP or (cursor is not None and recent[0].id <= cursor):
            return recent
        return await self.s.store.read_messages(self.req.group_id, limit=CATCH_UP_MESSAGES)

    def outcome(
        self, result: TurnResult, reply: GroupMessage | None, mentioned: Selection
    ) -> TurnOutcome:
        skipped = self.writer.skipped
        return TurnOutcome(
            turn_id=self.req.turn_id,
            vp_id=self.s.vp_id,
            group_id=self.req.group_id,
            reason=result.reason,
            text="" if skipped else result.text,
            message_id=reply.id if reply else None,
            mentions=tuple(reply.mentions) if reply else (),
            unknown=tuple(mentioned.unknown),
            skipped=skipped,
            error=result.error,
            handoff=result.end_turn,
            tools=tuple(self.tool_uses),
        )


def _drop(task: asyncio.Task[tuple[BeforeTurn, list[str]]] | None) -> None:
    """Give up an early recall the turn will not use (its failure is of no interest)."""
    if task is not None:
        task.cancel()
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
