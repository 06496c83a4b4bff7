"""Who is connected, and changes to a group's people that reach every gateway process.

One :class:`People` per gateway process. It knows the WebSocket connections
of this process by user, and it tails the store's directory log
(``store.members.DIRECTORY_LOG``), where coordinators write member changes
and deletions and gateway processes write presence changes. So whichever
process a client is connected to:

- a removed member's subscriptions end at once with a ``removed`` frame, and
  every connection of theirs gets ``group_update {action: "removed"}``; an
  invited user's connections get ``group_update {action: "added"}``, so the
  group appears in their list without a reload;
- the watchers of a deleted group get ``group_update {action: "deleted"}``
  and their subscriptions end; the group's other members are told too;
- presence: a user is online while some process serves one of their
  connections. Each process records its users in the store with an expiry
  (``presence_ttl_s``) and renews it every third of that; the first
  connection of a user, and the last one closing, are announced in the
  directory log, and every process sends the groups its clients watch a
  ``presence`` frame with the new list. Every renewal also re-reads the lists
  of the watched groups, so a process that died (and announced nothing)
  drops out within a TTL;
- ended sessions (``gateway.sessions``): every connection their tokens
  opened closes with 4401, whichever process serves it; a disabled account
  (``gateway.disabling``): every connection of that person closes with 4401.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Literal

from gateway.connection import CloseCode
from gateway.log_follow import follow
from gateway.views import group_update
from protocol import dumps
from protocol.conversations import ConversationDeleted
from protocol.members import DirectoryEvent, PresenceFrame, RemovedFrame
from store.base import Store
from store.conversation import is_conversation_id
from store.members import DIRECTORY_LOG

if TYPE_CHECKING:
    from gateway.connection import Connection
    from gateway.tail import Hub

log = logging.getLogger(__name__)


class People:
    """This process's connections by user, presence, and the directory log's tail."""

    def __init__(
        self,
        store: Callable[[], Awaitable[Store]],
        hub: Hub,
        *,
        presence_ttl_s: float = 30.0,
        wait_s: float = 5.0,
    ) -> None:
        self.store = store
        self.hub = hub
        self.node = f"gw-{uuid.uuid4().hex[:12]}"
        self.ttl = presence_ttl_s
        self.wait_s = wait_s
        self.connections: dict[str, set[Connection]] = {}
        # Members of the groups this process's clients watch, and the online
        # list each was last told, for the presence frames.
        self.members: dict[str, frozenset[str]] = {}
        self.shown: dict[str, frozenset[str]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False
        self._ready = asyncio.Event()

    # -- connections -----------------------------------------------------------
    async def connected(self, conn: Connection, username: str) -> None:
        """A client of ``username`` was authenticated on this process."""
        self._start()
        first = username not in self.connections
        self.connections.setdefault(username, set()).add(conn)
        if first:
            try:
                await self._announce(username, online=True)
            except Exception:
                # Presence is a courtesy: a store hiccup must not refuse the
                # connection. The next renewal records the user again.
                log.warning("could not announce %s online", username, exc_info=True)

    def disconnected(self, conn: Connection, username: str) -> None:
        """A connection ended (synchronous: called from the connection's close)."""
        conns = self.connections.get(username)
        if conns is None:
            return
        conns.discard(conn)
        if not conns:
            del self.connections[username]
            self._spawn(self._went_away(username), f"offline:{username}")

    async def _went_away(self, username: str) -> None:
        if username in self.connections:
            return  # reconnected meanwhile
        store = await self.store()
        await store.mark_offline(username, self.node)
        if not await store.online([username]):
            await self._announce(username, online=False)

    async def _announce(self, username: str, *, online: bool) -> None:
        store = await self.store()
        if online:
            await store.mark_online([username], self.node, self.ttl)
        event = DirectoryEvent(action="presence", user=username, online=online)
        await store.append_event(DIRECTORY_LOG, event)

    # -- presence of watched groups ----------------------------------------------
    async def watching(self, group_id: str, members: list[str]) -> list[str]:
        """A client subscribes to a group: remember its members; who of them is online.

        The list goes out with the ``subscribed`` reply; changes after it
        come as ``presence`` frames.
        """
        self.members[group_id] = frozenset(members)
        online = await (await self.store()).online(members)
        self.shown[group_id] = frozenset(online)
        return sorted(online)

    async def _refresh(self, group_id: str, user: str | None = None, online: bool = True) -> None:
        members = self.members.get(group_id)
        if members is None or group_id not in self.hub.tails:
            return  # not watched here (yet: a subscribe registers before its tail starts)
        now = frozenset(await (await self.store()).online(members))
        if now == self.shown.get(group_id) and user is None:
            return
        self.shown[group_id] = now
        state: Literal["online", "offline"] | None = None
        if user is not None:
            state = "online" if online else "offline"
        frame = PresenceFrame(group_id=group_id, online=sorted(now), user=user, state=state)
        self._to_watchers(group_id, dumps(frame))

    def _to_watchers(self, group_id: str, text: str) -> None:
        tail = self.hub.tails.get(group_id)
        for sub in list(tail.subscriptions) if tail is not None else []:
            sub.sink.offer(text, envelope=False)

    def _to_user(self, username: str, text: str) -> None:
        for conn in list(self.connections.get(username, ())):
            conn.offer(text, envelope=False)

    # -- the directory log ----------------------------------------------------
    def _start(self) -> None:
        if self._started:
            return
        self._started = True
        self._spawn(self._tail(), "directory-tail")
        self._spawn(self._renew(), "presence-renew")

    async def started(self) -> None:
        """Wait until the directory tail reads (tests; a client never needs to)."""
        self._start()
        await self._ready.wait()

    def _spawn(self, coro: Awaitable[None], name: str) -> None:
        async def run() -> None:
            try:
                await coro
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("%s failed", name, exc_info=True)

        task = asyncio.create_task(run(), name=name)
        self._tasks.append(task)
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        if task in self._tasks:
            self._tasks.remove(task)

    async def _tail(self) -> None:
        async for _, events in follow(
            self.store, DIRECTORY_LOG, self.wait_s, self._ready, "directory tail"
        ):
            for event in events:
                try:
                    await self._handle(DirectoryEvent.model_validate_json(event.text))
                except Exception:
                    log.warning("directory event %d not handled", event.seq, exc_info=True)

    async def _handle(self, event: DirectoryEvent) -> None:
        gid = event.group_id
        if event.action == "presence" and event.user is not None:
            for group_id, members in list(self.members.items()):
                if event.user in members:
                    await self._refresh(group_id, event.user, bool(event.online))
        elif event.action == "sessions_ended" and event.user is not None:
            self._sessions_ended(event.user, frozenset(event.sessions))
        elif event.action == "account_disabled" and event.user is not None:
            self.close_user(event.user, "this account was disabled by an administrator")
        elif event.action == "members" and gid is not None:
            self._members_changed(gid, event)
            if gid in self.members:
                self.members[gid] = frozenset(event.members)
                await self._refresh(gid)
        elif event.action == "deleted" and gid is not None:
            text = dumps(group_update({"id": gid}, "deleted"))
            if is_conversation_id(gid):
                text = dumps(ConversationDeleted(conversation_id=gid))
            # A conversation's watcher is its connection behind a ConversationSink.
            subs = self.hub.group_subscriptions(gid)
            watchers = {id(getattr(sub.sink, "conn", sub.sink)) for sub in subs}
            self.hub.group_deleted(gid)
            for user in event.members:
                for conn in list(self.connections.get(user, ())):
                    if id(conn) not in watchers:  # the watchers were told just now
                        conn.offer(text, envelope=False)
            self.members.pop(gid, None)
            self.shown.pop(gid, None)

    def _sessions_ended(self, username: str, ended: frozenset[str]) -> None:
        for conn in list(self.connections.get(username, ())):
            if conn.session in ended:
                conn.request_close(CloseCode.UNAUTHORIZED, "this session was ended: log in again")

    def close_user(self, username: str, reason: str) -> None:
        """Close every connection of ``username`` on this process (4401)."""
        for conn in list(self.connections.get(username, ())):
            conn.request_close(CloseCode.UNAUTHORIZED, reason)

    def _members_changed(self, gid: str, event: DirectoryEvent) -> None:
        group = event.group or {"id": gid}
        for user in event.removed:
            reason: Literal["removed", "left"] = "left" if event.by == user else "removed"
            message = (
                f"you left the group {group.get('name', gid)}"
                if reason == "left"
                else f"you were removed from the group {group.get('name', gid)}"
            )
            removed = dumps(RemovedFrame(group_id=gid, reason=reason, message=message))
            for sub in self.hub.group_subscriptions(gid):
                if sub.sink.username == user:
                    sub.sink.offer(removed, envelope=False)
                    self.hub.drop(sub)
            self._to_user(user, dumps(group_update({"id": gid}, "removed", reason=reason)))
        for user in event.added:
            self._to_user(user, dumps(group_update(group, "added")))

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self.ttl / 3)
            try:
                if self.connections:
                    store = await self.store()
                    await store.mark_online(list(self.connections), self.node, self.ttl)
                for group_id in list(self.members):
                    if group_id in self.hub.tails:
                        await self._refresh(group_id)
                    else:  # nobody here watches it any more
                        self.members.pop(group_id, None)
                        self.shown.pop(group_id, None)
            except Exception:
                log.warning("presence renewal failed", exc_info=True)

    async def close(self) -> None:
        """Stop the tail and the renewals; this process's users go offline (by expiry too)."""
        tasks, self._tasks = list(self._tasks), []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        users = list(self.connections)
        self.connections.clear()
        with contextlib.suppress(Exception):
            store = await self.store()
            for user in users:
                await store.mark_offline(user, self.node)
