"""A group whose model provider is down, rate-limited or failing, on the real SDKs.

The VP actors' engines talk to the local fake server (``tests/fixtures/
llm_server.py``) through the real ``openai`` and ``anthropic`` clients. With
a fallback model configured, the fallback answers every VP; without one,
each turn ends with one error result that says what failed; nothing hangs
(every wait below is bounded), and once the provider is back the group's
next message is answered. Both store backends.
"""

from __future__ import annotations

from typing import Any

from pydantic import SecretStr

from coordinator.commands import Ingest, WaitIdle
from coordinator.runtime import Runtime
from tests.fixtures.llm_server import FakeLLM, Reply, refused_port
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import all_events, notices, results

PAIR = ["steve", "linus"]
# Retries quick enough for a test; deadlines generous enough for a loaded machine.
QUICK_RETRIES = {
    "max_retries": 1,
    "retry_base_delay": 0.01,
    "retry_max_delay": 0.05,
    "retry_jitter": 0.0,
    "model_connect_timeout": 5.0,
    "model_first_token_timeout": 10.0,
}


def _engine(
    fake: FakeLLM, model: str, fallbacks: tuple[str, ...] = (), **kw: Any
) -> dict[str, Any]:
    return {
        "model": model,
        "fallback_models": fallbacks,
        "openai_api_key": SecretStr("sk-test"),
        "openai_base_url": fake.openai_base_url,
        "anthropic_api_key": SecretStr("sk-ant-test"),
        "anthropic_base_url": fake.anthropic_base_url,
        **QUICK_RETRIES,
        **kw,
    }


async def _ask_both(rt: Runtime, text: str, cmid: str) -> tuple[str, dict[str, list[Any]]]:
    """Send ``text`` to both VPs of a new group; wait (bounded) until both turns ended."""
    group = await rt.create_group("team", PAIR, members=["ann"])
    out = await rt.send(Ingest(group.id, "ann", text, client_message_id=cmid))
    assert sorted(out.dispatched) == sorted(PAIR)
    assert await rt.send(WaitIdle(group.id, 60)), "a turn hung"
    return group.id, results(await all_events(rt, group.id))


async def _every_acked_message_has_one_result(rt: Runtime, group_id: str) -> None:
    """Each turn of each person's message has exactly one result; no turn is open."""
    store = await rt.store()
    by_turn: dict[str, int] = {}
    for env in await all_events(rt, group_id):
        if env.get("type") == "yeaft_output" and env["data"]["type"] == "result":
            by_turn[env["turnId"]] = by_turn.get(env["turnId"], 0) + 1
    asked = [m for m in await store.read_messages(group_id) if m.role == "user"]
    assert asked
    for message in asked:
        turns = await store.turns_of(group_id, message.id)
        assert turns and all(by_turn.get(t.turn_id) == 1 for t in turns), (turns, by_turn)
    assert await store.open_turns() == []


async def test_a_provider_that_is_down_falls_back_for_every_vp(
    make_runtime: MakeRuntime, fake_llm: FakeLLM
) -> None:
    fake_llm.default = Reply(text="from the backup")
    with refused_port() as down:
        engine = _engine(
            fake_llm,
            "anthropic:primary",
            ("openai:backup",),
            # Nothing listens there: the primary is down.
            anthropic_base_url=f"http://127.0.0.1:{down}",
        )
        rt = make_runtime(engine=engine)
        group_id, by_vp = await _ask_both(rt, "how do we cache this?", "c1")
    for vp in PAIR:
        [result] = by_vp[vp]
        assert result["subtype"] == "success" and result["model"] == "openai:backup", result
        assert result["result"] == "from the backup"
    # Only the backup was reached: the two turns' requests all went to it.
    assert {r.path for r in fake_llm.requests} == {"/v1/chat/completions"}
    await _every_acked_message_has_one_result(rt, group_id)


async def test_a_rate_limited_provider_falls_back_for_every_vp(
    make_runtime: MakeRuntime, fake_llm: FakeLLM
) -> None:
    # The primary (OpenAI, on fake_llm) refuses every request with a 429;
    # the backup (Anthropic, on a second fake server) answers.
    fake_llm.default = Reply(
        status=429, error_message="Rate limit reached", headers={"Retry-After": "0"}
    )
    backup = FakeLLM()
    try:
        backup.default = Reply(text="from the backup")
        engine = _engine(
            fake_llm,
            "openai:primary",
            ("anthropic:backup",),
            anthropic_base_url=backup.anthropic_base_url,
        )
        rt = make_runtime(engine=engine)
        group_id, by_vp = await _ask_both(rt, "what should we cut?", "c1")
    finally:
        backup.close()
    for vp in PAIR:
        [result] = by_vp[vp]
        assert result["subtype"] == "success" and result["model"] == "anthropic:backup", result
        assert [a["reason"] for a in result["attempts"]][:2] == ["rate_limit", "rate_limit"]
    # A first try and one retry per turn on the primary, then the fallback.
    assert len(fake_llm.requests) == 2 * len(PAIR) and len(backup.requests) == len(PAIR)
    await _every_acked_message_has_one_result(rt, group_id)


async def test_without_a_fallback_each_turn_ends_with_one_clear_error(
    make_runtime: MakeRuntime, fake_llm: FakeLLM
) -> None:
    fake_llm.default = Reply(status=500, error_message="upstream exploded")
    rt = make_runtime(engine=_engine(fake_llm, "openai:primary"))
    group_id, by_vp = await _ask_both(rt, "anyone there?", "c1")
    for vp in PAIR:
        [result] = by_vp[vp]
        assert result["is_error"] and result["error_kind"] == "server_error", result
        assert "openai:primary: server_error 500 (upstream exploded" in result["error"]
    await _every_acked_message_has_one_result(rt, group_id)

    # The provider is back: the group's next message is answered.
    fake_llm.default = Reply(text="back again")
    await rt.send(Ingest(group_id, "ann", "@steve and now?", client_message_id="c2"))
    assert await rt.send(WaitIdle(group_id, 60)), "a turn hung"
    steve = results(await all_events(rt, group_id))["steve"]
    assert [r["subtype"] for r in steve][-1] == "success" and steve[-1]["result"] == "back again"
    await _every_acked_message_has_one_result(rt, group_id)


async def test_a_rate_limit_without_a_fallback_ends_each_turn_with_one_error(
    make_runtime: MakeRuntime, fake_llm: FakeLLM
) -> None:
    fake_llm.default = Reply(
        status=429, error_message="Rate limit reached", headers={"Retry-After": "0"}
    )
    rt = make_runtime(engine=_engine(fake_llm, "anthropic:primary"))
    group_id, by_vp = await _ask_both(rt, "anyone there?", "c1")
    for vp in PAIR:
        [result] = by_vp[vp]
        assert result["is_error"] and result["error_kind"] == "rate_limit", result
        assert "anthropic:primary: rate_limit" in result["error"]
    # One first try and one retry per turn, then it gave up.
    assert len(fake_llm.requests) == 2 * len(PAIR)
    await _every_acked_message_has_one_result(rt, group_id)


async def test_a_short_rate_limit_is_waited_out_and_shown_to_every_client(
    make_runtime: MakeRuntime, fake_llm: FakeLLM
) -> None:
    # The provider asks for a 1 s pause: within the wait bound, so the turn
    # waits it out, the VP shows why (queued, with a notice), then answers.
    fake_llm.error(429, "Rate limit reached", headers={"Retry-After": "1"}).text("after the pause")
    rt = make_runtime(engine=_engine(fake_llm, "openai:primary"))
    group = await rt.create_group("team", ["linus"], members=["ann"])
    await rt.send(Ingest(group.id, "ann", "anyone there?", client_message_id="c1"))
    assert await rt.send(WaitIdle(group.id, 60)), "a turn hung"
    events = await all_events(rt, group.id)
    [result] = results(events)["linus"]
    assert result["subtype"] == "success" and result["result"] == "after the pause", result
    said = [n["message"] for n in notices(events)]
    assert "waiting for the provider's rate limit (about 1 s)" in said, said
    states = [e["state"] for e in events if e.get("type") == "agent_status"]
    assert "queued" in states and states.index("queued") < states.index("streaming"), states


async def test_a_reply_the_content_policy_stops_ends_each_vps_turn_as_a_refusal(
    make_runtime: MakeRuntime, fake_llm: FakeLLM
) -> None:
    # The primary (Anthropic) streams a few words, then its classifier stops
    # the reply (``stop_reason: "refusal"``); the backup must not be asked.
    explanation = "This request was declined because it could enable cyber harm."
    fake_llm.default = Reply(text="Step one is", stop="refusal", refusal=explanation)
    backup = FakeLLM()
    try:
        backup.default = Reply(text="from the backup")
        engine = _engine(
            fake_llm,
            "anthropic:primary",
            ("openai:backup",),
            openai_base_url=backup.openai_base_url,
        )
        rt = make_runtime(engine=engine)
        group_id, by_vp = await _ask_both(rt, "how do I get in?", "c1")
    finally:
        backup.close()
    assert backup.requests == [] and len(fake_llm.requests) == len(PAIR)
    events = await all_events(rt, group_id)
    assert not [n for n in notices(events) if n["detail"].get("kind") in ("fallback", "retry")]
    replies = {
        m.author: m for m in await (await rt.store()).read_messages(group_id) if m.role != "user"
    }
    for vp in PAIR:
        [result] = by_vp[vp]
        assert result["is_error"] and result["stop_reason"] == "error", result
        assert result["error_kind"] == "content_policy", result
        assert result["error"].startswith("anthropic refused the content"), result
        assert explanation in result["error"] and result["model"] == "anthropic:primary"
        # What it said before the refusal is its (incomplete) reply in the group.
        assert replies[vp].text == "Step one is" and replies[vp].meta["incomplete"] is True
        states = [e["state"] for e in events if e.get("type") == "agent_status" and e["vpId"] == vp]
        assert states[-1] == "error", states
    await _every_acked_message_has_one_result(rt, group_id)
