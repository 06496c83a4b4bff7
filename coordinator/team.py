"""Team mode in a group: the intent router's decisions, tasks, acceptance and learning.

A person's message takes the task path when the group has team mode on and
the message names no VP (``@mentions`` still win for plain chat), or when it
starts with ``/task`` (then it is a task whatever the router says). The
message is stored and acknowledged first, as any other; then the router
decides, from the message, the group's active task and its last eight
messages:

* ``simple_chat``: the message is answered as plain chat (the group's usual
  targets), as if team mode were off;
* ``new_task``: a task is opened and its first attempt runs
  (:class:`~coordinator.team_run.AttemptRun`);
* ``continue_task`` / ``revise_task``: another attempt at the active task
  (refused with a notice while one is still running);
* ``close_task``: the person says it is done: it is accepted;
* ``abandon_task``: it is abandoned.

Only a person's acceptance makes a task done. Accepting stores the
acceptance in every attempt's evidence and starts learning: a skill draft is
synthesised from the evidence, checked, and stored for a person to publish.

A coordinator that restarts finds the attempts it was running in the store
(:meth:`TeamDesk.recover`): their turns are gone with the process, so the
attempt ends as failed and the task waits for a revise or an abandon.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from ray.exceptions import RayError

from actors.writer import GroupEvents
from coordinator.errors import GroupError, GroupErrorCode
from coordinator.results import IngestResult
from coordinator.team_run import AttemptRun, TeamServices
from protocol.tasks import (
    Attempt,
    RouterDecision,
    RunStatus,
    SkillDraft,
    Task,
    TaskAction,
    TaskStatus,
)
from store.base import Group, GroupMessage
from store.conversation import GroupKind
from team.calls import CallFailed, ModelCall
from team.evidence import accept as accept_evidence
from team.router import RecentMessage, route
from team.skills import SkillLibrary, synthesize_draft

log = logging.getLogger(__name__)

_TASK_PREFIX = re.compile(r"^\s*/task\b[:\s]*", re.IGNORECASE)
ROUTER_HISTORY = 8
# How much of earlier attempts a new attempt's planner reads.
HISTORY_CHARS = 2_000

Chat = Callable[[Group, GroupMessage], Awaitable[None]]


def task_request(text: str) -> tuple[bool, str]:
    """Whether ``text`` forces a task (``/task``), and the text without the prefix."""
    match = _TASK_PREFIX.match(text)
    if match is None:
        return False, text
    return True, text[match.end() :].strip() or text.strip()


def takes_task_path(group: Group, text: str, names: list[str]) -> bool:
    """Whether a person's message goes to the router rather than straight to its VPs."""
    if group.kind is GroupKind.CONVERSATION or not group.roster:
        return False
    forced, _ = task_request(text)
    return forced or (group.settings.team_mode and not names)


class VPComplete:
    """Team mode's model calls, made by one VP actor of the group (its engine and model)."""

    def __init__(self, services: TeamServices, vp_id: str, model: str | None) -> None:
        self.services, self.vp_id, self.model = services, vp_id, model

    async def __call__(self, call: ModelCall) -> str:
        try:
            text: str = await self.services.turns.vp(self.vp_id).complete.remote(call, self.model)
        except RayError as exc:
            raise CallFailed(f"@{self.vp_id} could not reach its model: {exc}") from exc
        return text


class TeamDesk:
    """The tasks of one coordinator's groups (see the module doc)."""

    def __init__(self, services: TeamServices, chat: Chat) -> None:
        self.s = services
        self._chat = chat
        # The tasks whose attempt runs in this process, by id: the running
        # attempt and the person's accept/abandon change the same object.
        self._live: dict[str, Task] = {}
        self._jobs: set[asyncio.Task[None]] = set()
        self._verdicts: dict[str, asyncio.Lock] = {}

    def complete_for(self, group: Group) -> VPComplete:
        vp = group.default_vp or group.roster[0]
        return VPComplete(self.s, vp, group.settings.model or None)

    def _spawn(self, job: Coroutine[Any, Any, None], what: str) -> None:
        async def guarded() -> None:
            try:
                await job
            except Exception:
                log.exception("team mode: %s failed", what)

        task = asyncio.get_running_loop().create_task(guarded())
        self._jobs.add(task)
        task.add_done_callback(self._jobs.discard)

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
    ) -> IngestResult:
        """Store a person's message, then route it in the background.

        A repeat of a stored ``clientMessageId`` is not routed again.
        """
        meta: dict[str, object] = {"trigger": "task"}
        if client_message_id:
            meta["clientMessageId"] = client_message_id
        if attachments:
            meta["attachments"] = list(attachments)
        msg = GroupMessage(author=sender, role="user", text=text, meta=meta)
        stored, created = await GroupEvents(self.s.store, group.id).store_message(msg)
        if created:
            self.take(group, stored)
        return IngestResult(stored.id, duplicate=not created, trigger="task")

    def take(self, group: Group, message: GroupMessage) -> None:
        """Route a stored message in the background (its ack does not wait for a model)."""
        self._spawn(self._take(group, message), f"routing of {message.id}")

    async def _take(self, group: Group, message: GroupMessage) -> None:
        forced, text = task_request(message.text)
        active = await self._active(group.id)
        decision = await route(
            self.complete_for(group),
            text,
            active=active,
            recent=await self._recent(group.id, message.id),
            language=group.settings.language,
        )
        if forced and decision.action is TaskAction.SIMPLE_CHAT:
            decision = RouterDecision(
                action=TaskAction.NEW_TASK, reason="the message asked for a task (/task)"
            )
        await self._decided(group, message, text, decision, active)

    async def _decided(
        self,
        group: Group,
        message: GroupMessage,
        text: str,
        decision: RouterDecision,
        active: Task | None,
    ) -> None:
        action = decision.action
        if action is TaskAction.SIMPLE_CHAT:
            await self._chat(group, message)
        elif action is TaskAction.NEW_TASK or active is None:
            await self._open(group, message, text, decision)
        elif action is TaskAction.CLOSE_TASK:
            await self.accept(group, active.id, message.author)
        elif action is TaskAction.ABANDON_TASK:
            await self.abandon(group, active.id, message.author)
        else:
            await self._again(group, active, message, text, action)

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

    async def _active(self, group_id: str) -> Task | None:
        task = await self.s.store.active_task(group_id)
        if task is not None and task.id in self._live:
            return self._live[task.id]
        return task

    async def _task(self, group_id: str, task_id: str) -> Task:
        live = self._live.get(task_id)
        if live is not None and live.group_id == group_id:
            return live
        task = await self.s.store.get_task(group_id, task_id)
        if task is None:
            raise GroupError(GroupErrorCode.NOT_FOUND, f"no task {task_id} in this group")
        return task

    # -- attempts --------------------------------------------------------------
    async def _open(
        self, group: Group, message: GroupMessage, text: str, decision: RouterDecision
    ) -> None:
        now = self.s.clock()
        title = decision.short_title or text[:60]
        task = Task(
            id=f"task_{uuid.uuid4().hex[:12]}",
            group_id=group.id,
            title=title,
            goal=text,
            created_by=message.author,
            created_at=now,
            updated_at=now,
        )
        task.attempts.append(self._attempt(1, message, text, TaskAction.NEW_TASK))
        await self._run(group, task, None)

    async def _again(
        self, group: Group, task: Task, message: GroupMessage, text: str, action: TaskAction
    ) -> None:
        if task.status is not TaskStatus.REVIEW:
            await GroupEvents(self.s.store, group.id).notice(
                f"The task “{task.title}” is still running: wait for its answer, "
                "or abandon it first.",
                message.id,
                "task_busy",
                taskId=task.id,
            )
            return
        history = _history(task)
        task.attempts.append(self._attempt(len(task.attempts) + 1, message, text, action))
        task.advance(TaskStatus.PLANNING, self.s.clock())
        await self._run(group, task, history)

    def _attempt(self, index: int, message: GroupMessage, text: str, action: TaskAction) -> Attempt:
        return Attempt(
            index=index,
            request=text,
            message_id=message.id,
            action=action,
            started_at=self.s.clock(),
        )

    async def _run(self, group: Group, task: Task, history: str | None) -> None:
        self._live[task.id] = task
        try:
            await self.s.board.publish(task)
            await AttemptRun(self.s, group, task, self.complete_for(group), history).run()
        finally:
            self._live.pop(task.id, None)

    async def revise(self, group: Group, task_id: str, by: str, text: str) -> Task:
        """A person asks for another attempt with changes (the task card's Revise)."""
        task = await self._task(group.id, task_id)
        _require_review(task, "revised")
        message = GroupMessage(
            author=by, role="user", text=text, meta={"trigger": "task", "taskId": task.id}
        )
        stored, _ = await GroupEvents(self.s.store, group.id).store_message(message)
        self._spawn(
            self._again(group, task, stored, text, TaskAction.REVISE_TASK), f"revise {task.id}"
        )
        return task

    # -- the person's verdict ----------------------------------------------------
    def _verdict_lock(self, task_id: str) -> asyncio.Lock:
        """One verdict at a time per task: two people accepting at once accept it once."""
        return self._verdicts.setdefault(task_id, asyncio.Lock())

    async def accept(self, group: Group, task_id: str, by: str) -> Task:
        """The person accepts the newest attempt's answer: the task is done."""
        async with self._verdict_lock(task_id):
            task = await self._task(group.id, task_id)
            _require_review(task, "accepted")
            attempt = task.attempt
            if attempt is None or attempt.failed or not attempt.final_run:
                raise GroupError(
                    GroupErrorCode.CONFLICT,
                    "the last attempt gave no answer to accept: revise the task or abandon it",
                )
            task.accepted_by = by
            task.advance(TaskStatus.ACCEPTED, self.s.clock())
            # The final attempt's answer is the accepted one (run ids repeat per attempt).
            for item in await self.s.store.evidence_of(group.id, task.id):
                if item.attempt == attempt.index:
                    [marked] = accept_evidence([item], attempt.final_run)
                    await self.s.store.save_evidence(marked)
            await self.s.board.publish(task)
        self._spawn(self._learn(group, task), f"learning from {task.id}")
        return task

    async def abandon(self, group: Group, task_id: str, by: str) -> Task:
        """The person drops the task; a running attempt's turns are stopped."""
        async with self._verdict_lock(task_id):
            task = await self._task(group.id, task_id)
            if not task.open:
                raise GroupError(
                    GroupErrorCode.CONFLICT, f"the task is {task.status.value} already"
                )
            task.advance(TaskStatus.ABANDONED, self.s.clock())
            await self.s.board.publish(task)
        attempt = task.attempt
        running = [r for r in attempt.runs if r.status is RunStatus.RUNNING] if attempt else []
        for run in running:
            try:
                await self.s.turns.vp(run.vp).abort.remote(group.id, run.turn_id)
            except RayError:
                log.warning("run %s of task %s could not be stopped", run.id, task.id)
        log.info("task %s abandoned by %s", task.id, by)
        return task

    async def _learn(self, group: Group, task: Task) -> None:
        """Synthesise a skill draft from an accepted task's evidence, for a person to publish."""
        evidence = await self.s.store.evidence_of(group.id, task.id)
        library = SkillLibrary.load(self.s.data_dir, await self.s.store.learned_skills()).all()
        draft: SkillDraft = await synthesize_draft(
            self.complete_for(group),
            task=task,
            evidence=evidence,
            library=library,
            draft_id=f"draft_{uuid.uuid4().hex[:12]}",
            ts=self.s.clock(),
        )
        await self.s.store.save_skill_draft(draft)
        task.draft_id = draft.id
        await self.s.board.publish(task)

    # -- restarts ----------------------------------------------------------------
    async def recover(self, tasks: list[Task]) -> int:
        """End the attempts a previous coordinator was running; returns how many."""
        ended = 0
        for task in tasks:
            if task.status not in (TaskStatus.PLANNING, TaskStatus.RUNNING):
                continue
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
            ended += 1
        return ended


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
