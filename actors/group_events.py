"""The frames of a group's event log that are not one turn's: messages, changes, notices.

Everything a client learns about a group arrives through its event log, and
every frame in it is built as its ``protocol`` model and handed to the
store, which serialises it once. :class:`GroupEvents` writes a group's
frames; :class:`actors.writer.TurnWriter` writes one VP turn's through it.

A message stored in the group log by someone other than a turn's VP (a
person's message, a ``route_forward`` hand-off) is announced by its own
``group_message`` frame (:func:`message_frame`), appended with it, before
any turn it causes. A VP's own reply is not: its text has already streamed
in the turn's frames, so repeating it would double what every client
reads. Its id rides on the turn's ``result`` instead (``message_id``).

Results and notices are retried while the store is unreachable
(``store.retry``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from engine.bridge import Payload
from engine.events import (
    StopEvent,
    StopReason,
)
from engine.messages import Usage
from protocol import (
    AgentState,
    AgentStatus,
    AskUserQuestion,
    GroupMessageFrame,
    Handoff,
    MessageChanged,
    QueueOutcome,
    ReplyRouted,
    ResultData,
    SystemData,
    ToolApproval,
    YeaftOutput,
)
from protocol.attachments import message_attachments
from protocol.tasks import Task, TaskChanged
from store.base import GroupMessage, Store
from store.chatviews import TurnUsage
from store.retry import until_stored
from store.threads import THREAD_KEY, thread_of
from store.turns import TurnEnd, TurnRecord

log = logging.getLogger(__name__)

SYSTEM = "system"
"""The ``vpId`` of notices: what the group says, not any VP."""


def error_stop(reason: StopReason, message: str, kind: str, duration_ms: int = 0) -> StopEvent:
    """The stop event of a turn that ended before (or instead of) its engine run.

    ``duration_ms`` is how long the turn had been going when it was ended
    from outside (a shutdown, a lost actor); 0 when it never began.
    """
    return StopEvent(
        reason=reason,
        usage=Usage(),
        cost_usd=0.0,
        duration_ms=max(0, duration_ms),
        error=message,
        error_kind=kind,
    )


class GroupEvents:
    """Builds and appends every frame of one group's event log.

    With ``thread_id`` (a turn answering in a thread, ``store.threads``) its
    turn frames, statuses, questions and notices carry it, and its notices
    are stored in the thread.
    """

    def __init__(self, store: Store, group_id: str, thread_id: str | None = None) -> None:
        self.store = store
        self.group_id = group_id
        self.thread_id = thread_id

    def _frame(self, vp_id: str, turn_id: str, data: Payload) -> YeaftOutput:
        return YeaftOutput(
            conversation_id=self.group_id,
            group_id=self.group_id,
            vp_id=vp_id,
            turn_id=turn_id,
            data=data,
            thread_id=self.thread_id,
        )

    async def output(
        self, vp_id: str, turn_id: str, data: Payload, status: AgentStatus | None = None
    ) -> int:
        """Append one payload of a turn; ``status``, if given, goes just before it, in one write."""
        frame = self._frame(vp_id, turn_id, data)
        if status is None:
            return await self.store.append_event(self.group_id, frame)
        return (await self.store.append_events(self.group_id, [status, frame]))[-1]

    async def result(
        self,
        vp_id: str,
        turn_id: str,
        data: ResultData,
        end: TurnEnd,
        after: AgentStatus | None = None,
        usage: TurnUsage | None = None,
    ) -> bool:
        """End the turn with this result, unless it has ended already; True if this did.

        ``after`` (the VP's last status) follows the result in the same write,
        and ``usage`` is added to the group's totals with it (see
        ``TurnLog.finish_turn``). Retried until the store takes it: a turn
        whose result is lost never ends.
        """
        frame = self._frame(vp_id, turn_id, data)
        seq = await until_stored(
            lambda: self.store.finish_turn(
                self.group_id, turn_id, frame, end, after=after, usage=usage
            ),
            f"the result of turn {turn_id}",
        )
        return seq is not None

    async def status(
        self,
        vp_id: str,
        turn_id: str,
        state: AgentState,
        trigger_id: str | None = None,
        queue: QueueOutcome | None = None,
        other_turn_id: str | None = None,
    ) -> int:
        frame = self._status(vp_id, turn_id, state, trigger_id)
        if queue is not None:
            frame = frame.model_copy(update={"queue": queue, "other_turn_id": other_turn_id})
        return await self.store.append_event(self.group_id, frame)

    def status_frame(
        self, vp_id: str, turn_id: str, state: AgentState, trigger_id: str | None = None
    ) -> AgentStatus:
        return self._status(vp_id, turn_id, state, trigger_id)

    def _status(
        self, vp_id: str, turn_id: str, state: AgentState, trigger_id: str | None
    ) -> AgentStatus:
        return AgentStatus(
            group_id=self.group_id,
            vp_id=vp_id,
            turn_id=turn_id,
            state=state,
            trigger_id=trigger_id,
            thread_id=self.thread_id,
        )

    async def begin(
        self, vp_id: str, turn_id: str, state: AgentState, trigger_id: str | None = None
    ) -> bool:
        """Mark the turn started with its first status; False when it has already ended."""
        frame = self._status(vp_id, turn_id, state, trigger_id)
        return await self.store.start_turn(self.group_id, turn_id, frame)

    async def store_message(
        self, message: GroupMessage, turns: Sequence[TurnRecord] = ()
    ) -> tuple[GroupMessage, bool]:
        """Store a message in the group log and show it to every member, in one write.

        Returns the stored message and whether it is new (see
        ``GroupLog.append_message``). Its ``group_message`` frame is appended
        with it, so the event log has every stored message, always before the
        replies to it (its turns are dispatched after this returns), and a
        retried write can neither lose nor repeat the frame.
        """
        return await self.store.append_message(
            self.group_id, message, turns, announce=message_frame(self.group_id, message)
        )

    async def changed(self, frame: MessageChanged) -> int:
        """Tell every member a stored message changed (deleted, superseded); returns its seq."""
        return await until_stored(
            lambda: self.store.append_event(self.group_id, frame), f"change of {frame.message_id}"
        )

    async def reply_routed(self, frame: ReplyRouted) -> int:
        """Tell every member where a VP's reply went on (``protocol.reply_routes``); its seq."""
        return await until_stored(
            lambda: self.store.append_event(self.group_id, frame),
            f"routing of {frame.message_id}",
        )

    async def task_changed(self, task: Task) -> int:
        """Tell every member a task changed (its card); returns its seq.

        The card is the task without its runs' outputs: each output is a
        reply in the group log already, and the task's REST view has them,
        so the log does not repeat every output at every change of a run.
        """
        card = task.model_copy(deep=True)
        for attempt in card.attempts:
            for run in attempt.runs:
                run.output = ""
        frame = TaskChanged(group_id=self.group_id, task=card)
        return await until_stored(
            lambda: self.store.append_event(self.group_id, frame), f"change of task {task.id}"
        )

    async def question(
        self,
        vp_id: str,
        turn_id: str,
        request_id: str,
        prompt: str,
        choices: list[str] | None,
        expires_at: float,
        tool: ToolApproval | None = None,
        *,
        multi_select: bool = False,
        allow_other: bool = False,
    ) -> int:
        frame = AskUserQuestion(
            tool=tool,
            request_id=request_id,
            prompt=prompt,
            choices=choices,
            multi_select=multi_select,
            allow_other=allow_other,
            group_id=self.group_id,
            vp_id=vp_id,
            turn_id=turn_id,
            expires_at=expires_at,
            thread_id=self.thread_id,
        )
        return await self.store.append_event(self.group_id, frame)

    async def notice(self, message: str, chain_id: str, rule: str, **detail: object) -> None:
        """Tell every client something about the group, and keep it in the group log."""
        data = SystemData(subtype="notice", message=message, detail={"rule": rule, **detail})
        await until_stored(lambda: self.output(SYSTEM, chain_id, data), f"a {rule} notice")
        stored = GroupMessage(
            author=SYSTEM,
            role="system",
            text=message,
            meta={"notice": {"rule": rule, **detail}, "chainId": chain_id},
        )
        if self.thread_id is not None:
            stored.meta[THREAD_KEY] = self.thread_id
        # The same message id on every attempt: a retry of a write that did
        # land is then a repeat the group log ignores.
        await until_stored(
            lambda: self.store.append_message(self.group_id, stored), f"a {rule} notice"
        )


def message_frame(group_id: str, message: GroupMessage) -> GroupMessageFrame:
    """The ``group_message`` frame of a stored group-log message.

    Its fields come from the message's ``meta`` as the coordinator wrote
    them: ``clientMessageId`` of a person's message, ``causedBy`` and
    ``chainId`` of a hand-off, and the ``route_forward`` fields. A person's
    message starts its own chain, so its chain id is its own id.
    """
    meta = message.meta
    handoff = None
    if meta.get("injectedBy") == "route_forward":
        # ``from`` is a Python keyword, so the model is built from wire names.
        handoff = Handoff.model_validate(
            {
                "from": meta.get("senderVpId") or message.author,
                "to": meta.get("routeForwardTarget") or "",
                "reason": meta.get("reason"),
            }
        )
    chain_id = meta.get("chainId") or (message.id if message.role == "user" else None)
    return GroupMessageFrame(
        group_id=group_id,
        message_id=message.id,
        author=message.author,
        role=message.role,
        text=message.text,
        ts=message.ts,
        mentions=list(message.mentions),
        people=list(message.people) or None,
        client_message_id=meta.get("clientMessageId"),
        caused_by=meta.get("causedBy"),
        chain_id=chain_id,
        handoff=handoff,
        attachments=message_attachments(group_id, meta.get("attachments")),
        thread_id=thread_of(meta),
    )
