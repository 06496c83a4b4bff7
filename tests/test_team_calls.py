"""Team mode's one-off model calls on a VP's engine: bounded by their own timeout.

A router or planner call that its caller gave up on must not go on (and be
charged) in the VP actor, and a timeout, whichever side saw it, reaches the
caller as ``TimeoutError`` so that the router retries it once (see
``team.router``), never as a provider failure.
"""

from __future__ import annotations

import time

import pytest
from ray.exceptions import RayTaskError

from actors.completion import complete_call
from coordinator.team.calls import _timed_out
from engine.errors import ErrorKind, ModelError
from engine.providers.scripted import Reply
from personas.loader import load_personas
from store.base import Store
from team.calls import ModelCall, Purpose
from tests.engine_helpers import scripted_engine


def _call(timeout_s: float) -> ModelCall:
    return ModelCall(
        purpose=Purpose.ROUTER, system="route", prompt="hello", max_tokens=50, timeout_s=timeout_s
    )


async def test_a_call_ends_at_its_own_timeout(store: Store) -> None:
    engine, _, _ = scripted_engine(Reply('{"action": "simple_chat"}', delay=30))
    persona = load_personas().get("linus")
    assert persona is not None
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        await complete_call(
            engine, persona, store, _call(0.2), model=None, group_id="g1", chain_id="c1"
        )
    assert time.monotonic() - started < 10


async def test_a_call_in_time_returns_the_models_text(store: Store) -> None:
    engine, model, _ = scripted_engine(Reply('{"action": "simple_chat"}'))
    persona = load_personas().get("linus")
    assert persona is not None
    text = await complete_call(
        engine, persona, store, _call(10), model=None, group_id="g1", chain_id="c1"
    )
    assert text == '{"action": "simple_chat"}'
    model.assert_complete()
    assert model.requests[0].context.purpose == "team.router"


def _remote(cause: BaseException) -> RayTaskError:
    return RayTaskError("complete", "traceback", cause)


def test_a_remote_timeout_is_a_timeout_and_other_failures_are_not() -> None:
    assert _timed_out(_remote(TimeoutError()))
    assert _timed_out(_remote(ModelError(ErrorKind.TIMEOUT, "no first token")))
    assert not _timed_out(_remote(ModelError(ErrorKind.AUTH, "bad key")))
    assert not _timed_out(_remote(RuntimeError("boom")))
