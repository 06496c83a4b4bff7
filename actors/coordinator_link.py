"""The coordinator a VP's turns call back, looked up by name when first needed.

A turn calls its group's coordinator only for a ``route_forward`` or to
remember a tool the person allowed for good. ``ray.get_actor`` costs a GCS
round trip and, the first time in a process, the import of the coordinator's
class: 60-70 ms measured in a VP host. Made on the event loop at the start of
a turn, that stopped every turn of the host for as long, on the first message
of each process; so a turn carries a :class:`CoordinatorLink` and the lookup
runs on a thread, once per process, when a call needs the handle.
"""

from __future__ import annotations

import asyncio
from typing import cast

import ray
from ray.actor import ActorHandle

from actors.commands import CommandTaker


class CoordinatorLink:
    """One coordinator actor by name; :meth:`handle` finds it once and keeps it."""

    __slots__ = ("_handle", "_lookup", "name", "namespace")

    def __init__(self, name: str, namespace: str) -> None:
        self.name = name
        self.namespace = namespace
        self._handle: ActorHandle[CommandTaker] | None = None
        self._lookup: asyncio.Task[ActorHandle[CommandTaker]] | None = None

    async def handle(self) -> ActorHandle[CommandTaker]:
        """The actor's handle; callers that come while it is looked up share the one lookup.

        A failed lookup (the coordinator restarting, say) raises to the
        callers that waited for it, and the next call looks again.
        """
        if self._handle is not None:
            return self._handle
        lookup = self._lookup
        if lookup is None:
            lookup = self._lookup = asyncio.create_task(asyncio.to_thread(self._find))
        try:
            self._handle = await asyncio.shield(lookup)
        except Exception:
            if self._lookup is lookup:
                self._lookup = None
            raise
        return self._handle

    def _find(self) -> ActorHandle[CommandTaker]:
        return cast("ActorHandle[CommandTaker]", ray.get_actor(self.name, namespace=self.namespace))

    def __repr__(self) -> str:
        return f"CoordinatorLink({self.name!r}, namespace={self.namespace!r})"
