"""A VP actor gets its whole configuration from the RuntimeConfig, not from its node.

The actor runs in a Ray worker whose environment holds WRONG values for
every setting it could read there (provider keys and URLs, the model, limits,
the prices file, the store): it must still answer through the provider the
config names, with the key the config holds. The worker itself checks that
its environment really is the wrong one, so the test cannot pass by running
somewhere that environment did not reach.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import ray
from pydantic import SecretStr

from actors.config import RuntimeConfig
from actors.turns import TurnOrigin, TurnOutcome, TurnRequest
from actors.vp_commands import RunTurn
from actors.vp_host import VPHost
from coordinator.vps import own_host
from engine.settings import EngineConfig
from store.base import Group, GroupMessage
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.ray_cluster import NAMESPACE, ROOT
from tests.fixtures.stores import StoreFactory

CONFIGURED_KEY = "sk-configured-for-the-actors-0123456789"
UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing answers there

# Every variable an engine setting, a provider SDK or the store settings
# could be read from, set to a value that would break the turn or show up in
# the request if it were used.
WRONG_ENV = {
    "OPENAI_API_KEY": "sk-wrong-worker-env",
    "OPENAI_BASE_URL": f"{UNREACHABLE}/v1",
    "ANTHROPIC_API_KEY": "sk-ant-wrong-worker-env",
    "ANTHROPIC_BASE_URL": UNREACHABLE,
    "YEAFT_MODEL": "anthropic:wrong-model",
    "YEAFT_FAST_MODEL": "anthropic:wrong-fast-model",
    "YEAFT_FALLBACK_MODELS": '["anthropic:wrong-fallback"]',
    "YEAFT_OPENAI_API_KEY": "sk-wrong-worker-env-yeaft",
    "YEAFT_OPENAI_BASE_URL": f"{UNREACHABLE}/v1",
    "YEAFT_ANTHROPIC_API_KEY": "sk-ant-wrong-worker-env-yeaft",
    "YEAFT_ANTHROPIC_BASE_URL": UNREACHABLE,
    "YEAFT_MAX_OUTPUT_TOKENS": "7",
    "YEAFT_PRICES_FILE": "/nonexistent/prices.json",
    "YEAFT_DATA_DIR": "/nonexistent/data",
    "YEAFT_REDIS_URL": "redis://127.0.0.1:9/0",
    "YEAFT_PERSONAS_DIR": "/nonexistent/personas",
}
PREFIXES = ("YEAFT_", "OPENAI_", "ANTHROPIC_")


class ProbedVPHost(VPHost):
    """The VP host actor, plus a check of the environment of the process it runs in."""

    async def provider_environment(self, expected: dict[str, str]) -> dict[str, str]:
        """Asserts, in the worker, that ``expected`` is its environment; returns what it saw."""
        seen = {k: v for k, v in os.environ.items() if k.startswith(PREFIXES)}
        wrong = {k: (seen.get(k), v) for k, v in expected.items() if seen.get(k) != v}
        assert not wrong, f"the worker's environment is not the one the test set: {wrong}"
        return seen


async def test_a_vp_actor_answers_through_the_configured_provider_whatever_its_env(
    ray_cluster: None, store_factory: StoreFactory, fake_llm: FakeLLM
) -> None:
    fake_llm.text("Answered by the configured server.", chunks=3)
    config = RuntimeConfig(
        namespace=NAMESPACE,
        prefix=f"t{uuid.uuid4().hex[:8]}-",
        store=store_factory.config,
        engine=EngineConfig(
            model="openai:gpt-configured",
            openai_api_key=SecretStr(CONFIGURED_KEY),
            openai_base_url=fake_llm.openai_base_url,
            max_output_tokens=321,
            max_retries=0,
        ),
        dream_every_turns=0,
        dream_idle_s=0,
    )
    env = {**WRONG_ENV, "PYTHONPATH": str(ROOT)}
    actor: Any = (
        ray.remote(ProbedVPHost)
        .options(
            name=own_host(config, "steve"),
            namespace=NAMESPACE,
            num_cpus=0,
            runtime_env={"env_vars": env},
        )
        .remote(config)
    )
    store = store_factory()
    try:
        seen = await actor.provider_environment.remote(WRONG_ENV)
        assert {k: seen.get(k) for k in WRONG_ENV} == WRONG_ENV

        gid = f"grp_{uuid.uuid4().hex[:10]}"
        await store.create_group(Group(id=gid, name="g", roster=["steve"]))
        msg, _ = await store.append_message(
            gid, GroupMessage(author="ann", role="user", text="@steve what now?")
        )
        origin = TurnOrigin(trigger_id=msg.id, chain_id=msg.id, user_id="ann")
        req = TurnRequest(gid, "steve", uuid.uuid4().hex, origin)
        outcome: TurnOutcome = await actor.call.remote("steve", RunTurn(req))
    finally:
        ray.kill(actor)

    assert outcome.error is None, outcome.error
    assert outcome.text == "Answered by the configured server."
    (call,) = fake_llm.requests
    assert call.headers["authorization"] == f"Bearer {CONFIGURED_KEY}"
    assert call.body["model"] == "gpt-configured"
    assert call.body["max_tokens"] == 321
    # The reply is in the store the config names, and no envelope carries the key.
    stored = await store.read_messages(gid)
    assert [(m.author, m.text) for m in stored][-1] == ("steve", outcome.text)
    events = (await store.read_events(gid, 0)).events
    assert events and not any(CONFIGURED_KEY in event.text for event in events)
