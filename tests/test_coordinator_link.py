"""A turn's link to its coordinator: looked up when a call needs it, once, off the event loop."""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest
import ray
from ray.actor import ActorHandle

from actors.commands import CommandTaker
from actors.coordinator_link import CoordinatorLink
from tests.fixtures.ray_cluster import NAMESPACE


class _Coordinator:
    async def ping(self) -> str:
        return "coordinator"


class _CountedLink(CoordinatorLink):
    """A link that notes on which thread each lookup ran."""

    def __init__(self, name: str) -> None:
        super().__init__(name, NAMESPACE)
        self.lookups: list[threading.Thread] = []

    def _find(self) -> ActorHandle[CommandTaker]:
        self.lookups.append(threading.current_thread())
        return super()._find()


@pytest.fixture
def name(ray_cluster: None) -> str:
    """A coordinator name no actor has yet."""
    return f"link-{uuid.uuid4().hex[:8]}"


def _start(name: str) -> object:
    """The coordinator under ``name``; it lives while the returned handle is held."""
    return ray.remote(_Coordinator).options(name=name, namespace=NAMESPACE, num_cpus=0).remote()


async def test_callers_share_one_lookup_made_on_a_thread_when_first_needed(name: str) -> None:
    started = _start(name)
    link = _CountedLink(name)
    assert link.lookups == []  # a turn that makes no call never looks it up
    handles = await asyncio.gather(*(link.handle() for _ in range(5)))
    assert len(link.lookups) == 1
    assert link.lookups[0] is not threading.current_thread()
    assert all(h is handles[0] for h in handles)
    assert await handles[0].ping.remote() == "coordinator"
    await link.handle()
    assert len(link.lookups) == 1
    del started


async def test_a_failed_lookup_is_tried_again_by_the_next_call(name: str) -> None:
    link = _CountedLink(name)
    with pytest.raises(ValueError):
        await link.handle()
    started = _start(name)
    handle = await link.handle()
    assert await handle.ping.remote() == "coordinator"
    assert len(link.lookups) == 2
    del started
