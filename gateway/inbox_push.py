"""Unread and mention counts pushed to people's WebSockets, from the store's activity log.

One :class:`InboxPush` per gateway process tails the store's activity log
(``store.mentions.ACTIVITY_LOG``): one blocking read for the whole process,
however many groups and people it serves. The store appends to it every
message it stores and every read mark that moves, on whichever process or
actor wrote them. For each batch read:

- a message in a group: each member of the group with a connection on this
  process gets the group's new ``inbox_summary`` (with ``mention`` when the
  message mentions them);
- a read mark that moved: that person's connections here get the group's
  new summary, so their other tabs and devices clear it too.

The work per message is one read of the group record and one summary per
member connected here; a batch asks for each (person, group) once. A gap
(the tail fell behind the log's retention) is skipped: clients read the
whole inbox when they reconnect.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from gateway.log_follow import follow
from protocol import dumps
from protocol.inbox import ActivityEvent, InboxSummary, LastMessageView, MentionView
from store.base import Store
from store.chatviews import GroupSummary
from store.mentions import ACTIVITY_LOG

if TYPE_CHECKING:
    from gateway.people import People

log = logging.getLogger(__name__)

# Characters of a group's last message a summary carries.
LAST_TEXT = 300


def summary_frame(summary: GroupSummary, mention: MentionView | None = None) -> InboxSummary:
    """A group's summary as the ``inbox_summary`` frame has it."""
    last = summary.last
    return InboxSummary(
        group_id=summary.group_id,
        unread=summary.unread,
        mentions=summary.mentions,
        last_message=None
        if last is None
        else LastMessageView(
            message_id=last.message_id,
            author=last.author,
            role=last.role,
            text=last.text[:LAST_TEXT],
            ts=last.ts,
        ),
        mention=mention,
    )


def summary_view(summary: GroupSummary) -> dict[str, Any]:
    """A group's summary as ``GET /api/inbox`` lists it (the frame without type)."""
    frame = summary_frame(summary)
    return frame.model_dump(mode="json", by_alias=True, exclude={"type", "mention"})


class InboxPush:
    """This process's tail of the activity log, and the summaries it pushes."""

    def __init__(
        self,
        store: Callable[[], Awaitable[Store]],
        people: People,
        *,
        wait_s: float = 5.0,
        on_spent: Callable[[str], None] | None = None,
    ) -> None:
        self.store = store
        self.people = people
        self.wait_s = wait_s
        # Told of each person a turn spent from (``gateway.quota_meter``).
        self.on_spent = on_spent
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

    def start(self) -> None:
        """Start the tail (idempotent): at the first connection of the process."""
        if self._task is None:
            self._task = asyncio.create_task(self._tail(), name="activity-tail")

    async def started(self, within: float | None = None) -> None:
        """Start the tail and wait until it has its place in the log (at most ``within`` s).

        A connection waits for it before it counts as open, so nothing
        stored after that is missed; a store that does not answer in time
        only delays the pushes, never the connection.
        """
        self.start()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ready.wait(), within)

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _tail(self) -> None:
        # A gap skipped: clients read their inbox again when they reconnect.
        async for store, batch in follow(
            self.store, ACTIVITY_LOG, self.wait_s, self._ready, "activity tail"
        ):
            events = []
            for event in batch:
                try:
                    found = ActivityEvent.model_validate_json(event.text)
                except ValueError:
                    log.warning("activity event %d is not one", event.seq, exc_info=True)
                    continue
                if found.kind != "spent":
                    events.append(found)
                elif self.on_spent is not None and found.user in self.people.connections:
                    self.on_spent(found.user)
            if events and self.people.connections:
                try:
                    await self._push(store, events)
                except Exception:
                    log.warning("activity: summaries not pushed", exc_info=True)

    async def _push(self, store: Store, events: list[ActivityEvent]) -> None:
        """Each (person here, group) the batch touched gets its summary once."""
        wanted: dict[str, dict[str, MentionView | None]] = {}
        members: dict[str, list[str]] = {}
        here = self.people.connections
        for event in events:
            gid = event.group_id
            if event.kind == "read":
                if event.user in here:
                    wanted.setdefault(event.user, {}).setdefault(gid, None)
                continue
            if gid not in members:
                group = await store.get_group(gid)
                members[gid] = list(group.members) if group is not None else []
            for user in members[gid]:
                if user not in here:
                    continue
                groups = wanted.setdefault(user, {})
                if user in event.people and user != event.user:
                    groups[gid] = MentionView(
                        group_id=gid,
                        message_id=event.message_id,
                        author=event.user,
                        excerpt=event.excerpt,
                        ts=event.ts,
                    )
                else:
                    groups.setdefault(gid, None)
        for user, groups in wanted.items():
            summaries = await store.summaries(list(groups), user)
            for summary in summaries:
                text = dumps(summary_frame(summary, groups[summary.group_id]))
                for conn in list(self.people.connections.get(user, ())):
                    conn.offer(text, envelope=False)
