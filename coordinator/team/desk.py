"""Team mode in a group: the intent router's decisions, tasks, acceptance and learning.

A message that takes the task path (``coordinator.team.calls``) is stored
and acknowledged first, as any other, and its loop-guard chain starts; then
the router decides, from the message, the group's active task and its last
eight messages:

* ``simple_chat``: the message is answered as plain chat (the group's usual
  targets), as if team mode were off;
* ``new_task``: a task is opened and its first attempt runs
  (:class:`~coordinator.team.run.AttemptRun`);
* ``continue_task`` / ``revise_task``: another attempt at the active task
  (refused with a notice while one is still running);
* ``close_task``: the person says it is done: it is accepted;
* ``abandon_task``: it is abandoned.

Only a person's acceptance makes a task done. Accepting stores the
acceptance in the final attempt's evidence and starts learning: a skill
draft is synthesised from the evidence, checked, and stored for the group's
owner to publish.

One coordinator owns a group, so its tasks are changed in one place: every
decision about a group's tasks (a routed message, a revise, an accept, an
abandon) runs under the group's lock and reads the task again under it, and
an open task is one object in memory (``_live``) that the running attempt
and the decisions share. Stopping the group's turns stops its attempts too;
a message whose routing was under way when the group was stopped starts
nothing. A coordinator that restarts finds the attempts it was running in
the store (:meth:`TeamDesk.recover`): their turns are gone with the
process, so the attempt ends as failed and the task waits for a revise or
an abandon.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from actors.group_events import GroupEvents
from actors.turns import TurnOrigin
from coordinator.errors import GroupError, GroupErrorCode
from coordinator.results import IngestResult
from coordinator.team.calls import VPComplete, task_request
from coordinator.team.run import AttemptRun, TeamServices
from protocol.common import Channel
from protocol.tasks import (
    Attempt,
    Evidence,
    RouterDecision,
    RunStatus,
    Skill,
    Task,
    TaskAction,
    TaskStatus,
)
from store.base import Group, GroupMessage
from team.evidence import accept as accept_evidence
from team.router import ROUTER_SKILL, RecentMessage, route
from team.skills import SkillLibrary, strip_front_matter, synthesize_draft

log = logging.getLogger(__name__)

ROUTER_HISTORY = 8
# How much of earlier attempts a new attempt's planner reads.
HISTORY_CHARS = 2_000
# How far back in the group log learning looks for a task's messages.
SESSION_MESSAGES = 300

Chat = Callable[[Group, GroupMessage], Awaitable[None]]
StartChain = Callable[[Group, str], None]


class TeamDesk:
    """The tasks of one coordinator's groups (see the module doc)."""

    def __init__(self, services: TeamServices, chat: Chat, start_chain: StartChain) -> None:
        self.s = services
        self._chat = chat
        self._start_chain = start_chain
        # Open tasks this coordinator has read, by id: the one copy that
        # attempts and decisions change.
        self._live: dict[str, Task] = {}
        self._runs: dict[str, AttemptRun] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        # When each group's turns were last stopped (the coordinator's clock).
        self._stopped: dict[str, float] = {}
        self._jobs: set[asyncio.Task[None]] = set()
        # Messages whose routing is under way: a repeat of one (a client that
        # resends what is not acked yet) is not routed a second time.
        self._routing: set[str] = set()

    def complete_for(self, group: Group, chain_id: str, user_id: str | None = None) -> VPComplete:
        return VPComplete(self.s.turns, group, chain_id, user_id)

    def _lock(self, group_id: str) -> asyncio.Lock:
        return self._locks.setdefault(group_id, asyncio.Lock())

    def _spawn(self, job: Coroutine[Any, Any, None], what: str) -> None:
        async def guarded() -> None:
            try:
                await job
            except Exception:
                log.exception("team mode: %s failed", what)

        task = asyncio.get_running_loop().create_task(guarded())
        self._jobs.add(task)
        task.add_done_callback(self._jobs.discard)

    async def close(self) -> None:
        """Stop every job of this desk (a coordinator that is configured anew)."""
        for job in list(self._jobs):
            job.cancel()
        await asyncio.gather(*list(self._jobs), return_exceptions=True)

    async def idle(self) -> None:
        """Wait for every routing, attempt and learning job of this desk (tests, shutdown)."""
        while self._jobs:
            await asyncio.gather(*list(self._jobs), return_exceptions=True)

    # -- a person's message ----------------------------------------------------
    async def ingest(
        self,
        group: Group,
        sender: str,
        text: str,
        client_message_id: str | None,
        attachments: list[dict[str, Any]] | None,
        channel: Channel = Channel.WEB,
        people: list[str] | None = None,
    ) -> IngestResult:
        """Store a person's message, then route it in the background.

        ``channel`` is where it was written and ``people`` the members it
        mentions (``coordinator.people``), stored with it as on the direct
        path, so a task request that names a person still tells them.
        A repeat of a stored ``clientMessageId`` is routed again only if
        nothing answered it yet (its routing was lost with a restart, say).
        """
        meta: dict[str, object] = {"trigger": "task", "channel": str(channel)}
        if client_message_id:
            meta["clientMessageId"] = client_message_id
        if attachments:
            meta["attachments"] = list(attachments)
        msg = GroupMessage(author=sender, role="user", text=text, people=people or [], meta=meta)
        stored, created = await GroupEvents(self.s.store, group.id).store_message(msg)
        route = created or (
            stored.id not in self._routing and await self._unanswered(group.id, stored.id)
        )
        if route and stored.id not in self._routing:  # checked again after the await
            self._routing.add(stored.id)
            self._start_chain(group, stored.id)
            self._spawn(self._route(group, stored), f"routing of {stored.id}")
        return IngestResult(
            stored.id, duplicate=not created, trigger="task", people=tuple(people or ())
        )

    async def _route(self, group: Group, message: GroupMessage) -> None:
        try:
            await self._take(group, message)
        finally:
            self._routing.discard(message.id)

    async def _router_guidance(self, group_id: str) -> str | None:
        """The body of the group's ``intent-router`` skill, if its library has one."""
        learned = await self.s.store.learned_skills(group_id)
        skill = SkillLibrary.load(self.s.data_dir, learned).get(ROUTER_SKILL)
        return strip_front_matter(skill.content) if skill is not None else None

    async def _unanswered(self, group_id: str, message_id: str) -> bool:
        if await self.s.store.turns_of(group_id, message_id):
            return False
        tasks = await self.s.store.list_tasks(group_id)
        return not any(a.message_id == message_id for t in tasks for a in t.attempts)

    async def _take(self, group: Group, message: GroupMessage) -> None:
        forced, text = task_request(message.text)
        if forced and not text:
            await self._say(group, message.id, "Say what the task is after /task.", "task_empty")
            return
        seen = await self._active(group.id)
        decision = await route(
            self.complete_for(group, message.id, message.author),
            text,
            active=seen,
            recent=await self._recent(group.id, message.id),
            language=group.settings.language,
            guidance=await self._router_guidance(group.id),
        )
        if forced and decision.action is TaskAction.SIMPLE_CHAT:
            decision = RouterDecision(
                action=TaskAction.NEW_TASK, reason="the message asked for a task (/task)"
            )
        if self._stopped.get(group.id, float("-inf")) >= message.ts:
            return  # the group's turns were stopped while the router decided
        async with self._lock(group.id):
            # Read again: a verdict may have come while the router decided.
            active = await self._active(group.id)
            try:
                meant = seen is not None and active is not None and active.id == seen.id
                if _ends(decision.action) and not meant:
                    # The task the router meant was settled meanwhile (from its
                    # card, say): "looks good" is then only a chat message.
                    decision = RouterDecision(
                        action=TaskAction.SIMPLE_CHAT, reason="the task was settled meanwhile"
                    )
                run = await self._decide(group, message, text, decision, active)
            except GroupError as exc:
                await self._say(group, message.id, exc.message, "task_refused")
                return
        if run is not None:
            await self._run(run)

    async def _decide(
        self,
        group: Group,
        message: GroupMessage,
        text: str,
        decision: RouterDecision,
        active: Task | None,
    ) -> AttemptRun | None:
        """Act on the router's decision (under the group's lock); the attempt to run, if any."""
        action = decision.action
        if action is TaskAction.SIMPLE_CHAT:
            await self._chat(group, message)
            return None
        if action is TaskAction.NEW_TASK or active is None:
            run = await self._open(group, message, text, decision)
            if active is not None:
                await self._park(group, active, run.task, message.id)
            return run
        if action is TaskAction.CLOSE_TASK:
            await self._accept(group, active, message.author)
            return None
        if action is TaskAction.ABANDON_TASK:
            await self._abandon(group, active)
            return None
        return await self._again(group, active, message, text, action)

    async def _recent(self, group_id: str, before: str) -> list[RecentMessage]:
        messages = await self.s.store.read_messages(
            group_id, before=before, limit=ROUTER_HISTORY * 2
        )
        seen = [
            RecentMessage(m.role, m.author, m.text)
            for m in messages
            if m.role in ("user", "assistant") and not m.meta.get("deleted")
        ]
        return seen[-ROUTER_HISTORY:]

    def _hold(self, task: Task) -> Task:
        """The one copy of ``task`` (the live one when this process holds it)."""
        live = self._live.get(task.id)
        if live is not None:
            return live
        if task.open:
            self._live[task.id] = task
        return task

    async def _active(self, group_id: str) -> Task | None:
        task = await self.s.store.active_task(group_id)
        return self._hold(task) if task is not None else None

    async def _task(self, group_id: str, task_id: str) -> Task:
        live = self._live.get(task_id)
        if live is not None and live.group_id == group_id:
            return live
        task = await self.s.store.get_task(group_id, task_id)
        if task is None:
            raise GroupError(GroupErrorCode.NOT_FOUND, f"no task {task_id} in this group")
        return self._hold(task)

    async def _say(self, group: Group, root: str, message: str, rule: str) -> None:
        await GroupEvents(self.s.store, group.id).notice(message, root, rule)

    # -- attempts --------------------------------------------------------------
    async def _open(
        self, group: Group, message: GroupMessage, text: str, decision: RouterDecision
    ) -> AttemptRun:
        now = self.s.clock()
        task = Task(
            id=f"task_{uuid.uuid4().hex[:12]}",
            group_id=group.id,
            title=decision.short_title or text[:60],
            goal=text,
            created_by=message.author,
            created_at=now,
            updated_at=now,
        )
        task.attempts.append(_attempt(1, message, text, TaskAction.NEW_TASK, now))
        self._live[task.id] = task
        await self.s.board.publish(task)
        return self._attempt_run(group, task, message, None)

    async def _park(self, group: Group, old: Task, new: Task, root: str) -> None:
        """Say that a new task set the open ``old`` one aside (it keeps its card and status)."""
        if old.status is TaskStatus.REVIEW:
            what = "waits on its card: accept, revise or abandon it there"
        else:
            what = "keeps running and then waits on its card"
        await GroupEvents(self.s.store, group.id).notice(
            f"New task “{new.title}”: the task “{old.title}” is set aside and {what}. "
            "Messages now go to the new task.",
            root,
            "task_parked",
            taskId=old.id,
            byTaskId=new.id,
        )

    async def _again(
        self, group: Group, task: Task, message: GroupMessage, text: str, action: TaskAction
    ) -> AttemptRun | None:
        if task.status is not TaskStatus.REVIEW:
            await self._say(
                group,
                message.id,
                f"The task “{task.title}” is still running: wait for its answer, "
                "or abandon it first.",
                "task_busy",
            )
            return None
        history = _history(task)
        now = self.s.clock()
        task.attempts.append(_attempt(len(task.attempts) + 1, message, text, action, now))
        task.advance(TaskStatus.PLANNING, now)
        await self.s.board.publish(task)
        return self._attempt_run(group, task, message, history)

    def _attempt_run(
        self, group: Group, task: Task, message: GroupMessage, history: str | None
    ) -> AttemptRun:
        complete = self.complete_for(group, message.id, message.author)
        origin = TurnOrigin.of_message(message)
        run = AttemptRun(self.s, group, task, complete, origin, history)
        self._runs[task.id] = run
        return run

    async def _run(self, run: AttemptRun) -> None:
        task = run.task
        try:
            await run.run()
        finally:
            if self._runs.get(task.id) is run:
                del self._runs[task.id]
            if not task.open:
                self._live.pop(task.id, None)

    async def revise(self, group: Group, task_id: str, by: str, text: str) -> Task:
        """A person asks for another attempt with changes (the task card's Revise)."""
        async with self._lock(group.id):
            task = await self._task(group.id, task_id)
            _require_review(task, "revised")
            message = GroupMessage(
                author=by, role="user", text=text, meta={"trigger": "task", "taskId": task.id}
            )
            stored, _ = await GroupEvents(self.s.store, group.id).store_message(message)
            self._start_chain(group, stored.id)
            run = await self._again(group, task, stored, text, TaskAction.REVISE_TASK)
        if run is not None:
            self._spawn(self._run(run), f"revise of {task.id}")
        return task

    # -- the person's verdict ----------------------------------------------------
    async def accept(self, group: Group, task_id: str, by: str) -> Task:
        """The person accepts the newest attempt's answer: the task is done."""
        async with self._lock(group.id):
            return await self._accept(group, await self._task(group.id, task_id), by)

    async def _accept(self, group: Group, task: Task, by: str) -> Task:
        _require_review(task, "accepted")
        attempt = task.attempt
        if attempt is None or attempt.failed or not attempt.final_run:
            raise GroupError(
                GroupErrorCode.CONFLICT,
                "the last attempt gave no answer to accept: revise the task or abandon it",
            )
        task.accepted_by = by
        task.advance(TaskStatus.ACCEPTED, self.s.clock())
        self._live.pop(task.id, None)
        # The final attempt's answer is the accepted one (run ids repeat per attempt).
        for item in await self.s.store.evidence_of(group.id, task.id):
            if item.attempt == attempt.index:
                [marked] = accept_evidence([item], attempt.final_run)
                await self.s.store.save_evidence(marked)
        await self.s.board.publish(task)
        self._spawn(self._learn(group, task, attempt.message_id), f"learning from {task.id}")
        return task

    async def abandon(self, group: Group, task_id: str, by: str) -> Task:
        """The person drops the task; a running attempt's turns are stopped."""
        async with self._lock(group.id):
            task = await self._task(group.id, task_id)
            await self._abandon(group, task)
        log.info("task %s abandoned by %s", task.id, by)
        return task

    async def _abandon(self, group: Group, task: Task) -> None:
        if not task.open:
            raise GroupError(GroupErrorCode.CONFLICT, f"the task is {task.status.value} already")
        task.advance(TaskStatus.ABANDONED, self.s.clock())
        self._live.pop(task.id, None)
        await self.s.board.publish(task)
        run = self._runs.get(task.id)
        if run is not None:
            await run.stop()

    async def _learn(self, group: Group, task: Task, chain_id: str) -> None:
        """Synthesise a skill draft from an accepted task's evidence, for the owner to publish."""
        evidence = await self.s.store.evidence_of(group.id, task.id)
        learned = await self.s.store.learned_skills(group.id)
        library = SkillLibrary.load(self.s.data_dir, learned).all()
        draft = await synthesize_draft(
            self.complete_for(group, chain_id),
            task=task,
            evidence=evidence,
            library=library,
            draft_id=f"draft_{uuid.uuid4().hex[:12]}",
            ts=self.s.clock(),
            known_tools=self._known_tools(evidence, library),
            session=await self._session(group.id, task),
        )
        await self.s.store.save_skill_draft(draft)
        task.draft_id = draft.id
        await self.s.board.publish(task)

    async def _session(self, group_id: str, task: Task) -> list[str]:
        """The task's messages as ``author: text`` lines: its requests and its runs' replies."""
        asked = {a.message_id for a in task.attempts}
        lines = []
        for m in await self.s.store.read_messages(group_id, limit=SESSION_MESSAGES):
            run = m.meta.get("task")
            of_task = m.meta.get("taskId") == task.id or (
                isinstance(run, dict) and run.get("taskId") == task.id
            )
            if (m.id in asked or of_task) and not m.meta.get("deleted") and m.text.strip():
                lines.append(f"{m.author}: {m.text}")
        return lines

    def _known_tools(self, evidence: Sequence[Evidence], library: Sequence[Skill]) -> set[str]:
        """The tools a learned skill may name: built in, used by the task, or named by a skill."""
        used = {tool for e in evidence for tool in e.tool_names}
        return {*self.s.tool_names, *used, *(tool for skill in library for tool in skill.tools)}

    # -- stops, deletions and restarts ---------------------------------------------
    async def stop(self, group_id: str) -> None:
        """The group's turns were stopped: its attempts start nothing more."""
        self._stopped[group_id] = self.s.clock()
        for run in [r for r in self._runs.values() if r.group.id == group_id]:
            await run.stop()

    async def forget(self, group_id: str) -> None:
        """The group is being deleted: stop its attempts and write nothing more for it."""
        await self.s.board.forget(group_id)
        await self.stop(group_id)
        for task_id in [t for t, task in self._live.items() if task.group_id == group_id]:
            del self._live[task_id]
        self._locks.pop(group_id, None)

    async def recover(self, tasks: list[Task], groups: set[str]) -> int:
        """End the attempts a previous coordinator was running; returns how many.

        ``groups`` are the ids of the groups that still exist.
        """
        ended = 0
        for task in tasks:
            if task.group_id not in groups or task.status is TaskStatus.REVIEW:
                continue
            try:
                await self._interrupted(task)
            except Exception:
                log.exception("task %s could not be recovered", task.id)
                continue
            ended += 1
        return ended

    async def _interrupted(self, task: Task) -> None:
        now = self.s.clock()
        attempt = task.attempt
        if attempt is not None:
            for run in attempt.runs:
                if run.status in (RunStatus.PENDING, RunStatus.RUNNING):
                    run.status, run.error = RunStatus.FAILED, "the server restarted"
            attempt.failed, attempt.finished_at = True, now
        task.advance(TaskStatus.REVIEW, now)
        await self.s.board.publish(task)
        await GroupEvents(self.s.store, task.group_id).notice(
            f"The server restarted while the task “{task.title}” was running. "
            "Revise it to run it again, or abandon it.",
            attempt.message_id if attempt else task.id,
            "task_interrupted",
            taskId=task.id,
        )


def _ends(action: TaskAction) -> bool:
    """Whether ``action`` settles the active task (accepts or abandons it)."""
    return action in (TaskAction.CLOSE_TASK, TaskAction.ABANDON_TASK)


def _attempt(
    index: int, message: GroupMessage, text: str, action: TaskAction, now: float
) -> Attempt:
    return Attempt(index=index, request=text, message_id=message.id, action=action, started_at=now)


def _require_review(task: Task, verdict: str) -> None:
    if task.status is not TaskStatus.REVIEW:
        raise GroupError(
            GroupErrorCode.CONFLICT,
            f"the task is {task.status.value}: only a task in review can be {verdict}",
        )


def _history(task: Task) -> str:
    """What earlier attempts asked and answered, for the next attempt's planner."""
    lines = []
    for attempt in task.attempts:
        final = attempt.run(attempt.final_run) if attempt.final_run else None
        answer = final.output if final and final.status is RunStatus.DONE else "(no answer)"
        lines.append(f"Attempt {attempt.index}: {attempt.request}\nAnswer: {answer}")
    return "\n\n".join(lines)[-HISTORY_CHARS:]
