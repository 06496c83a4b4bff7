"""Quotas end to end: admin routes, a person's quota across a fan-out on Ray, the meter."""

from __future__ import annotations

import time
from typing import Any

from pydantic import SecretStr

from tests.fixtures.gateway import Gateway, StartGateway, WsClient
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.ray_cluster import MakeRuntime

TODAY = time.strftime("%Y-%m-%d", time.gmtime())


def _engine(fake_llm: FakeLLM) -> dict[str, Any]:
    return {
        "model": "openai:gpt-quota",
        "openai_api_key": SecretStr("sk-quota-test"),
        "openai_base_url": fake_llm.openai_base_url,
        "max_retries": 0,
    }


async def _group(gw: Gateway, owner: str, roster: list[str]) -> str:
    made = await gw.http.post(
        "/api/groups", json={"name": "crew", "roster": roster}, headers=gw.auth(owner)
    )
    assert made.status_code in (200, 201), made.text
    return str(made.json()["id"])


def _result(frame: dict[str, Any]) -> bool:
    return frame.get("type") == "yeaft_output" and frame["data"].get("type") == "result"


async def test_quota_routes_answer_admins_only(start_gateway: StartGateway) -> None:
    gw = await start_gateway(admins="root")
    for name in ("root", "ann", "sam"):
        await gw.user(name)
    url = "/api/admin/users/ann/quota"
    assert (await gw.http.get(url, headers=gw.auth("ann"))).status_code == 403
    put = await gw.http.put(url, json={"tokensPerDay": 5}, headers=gw.auth("sam"))
    assert put.status_code == 403
    assert (await gw.http.get("/api/admin/usage", headers=gw.auth("ann"))).status_code == 403
    none = await gw.http.get(url, headers=gw.auth("root"))
    assert none.status_code == 200, none.text
    assert none.json() == {
        "username": "ann",
        "quota": None,
        "today": {"tokens": 0, "usd": 0.0},
        "month": {"tokens": 0, "usd": 0.0},
    }
    body = {"tokensPerDay": 5000, "usdPerMonth": 2.5}
    made = await gw.http.put(url, json=body, headers=gw.auth("root"))
    assert made.status_code == 200, made.text
    assert made.json()["quota"] == {
        "tokensPerDay": 5000,
        "usdPerDay": 0.0,
        "tokensPerMonth": 0,
        "usdPerMonth": 2.5,
    }
    read = await gw.http.get(url, headers=gw.auth("root"))
    assert read.json()["quota"] == made.json()["quota"]
    # Typed refusals: a negative limit, an unknown field, an unknown person.
    bad = await gw.http.put(url, json={"tokensPerDay": -1}, headers=gw.auth("root"))
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_request"
    odd = await gw.http.put(url, json={"tokens": 1}, headers=gw.auth("root"))
    assert odd.status_code == 422
    missing = await gw.http.put("/api/admin/users/nobody/quota", json=body, headers=gw.auth("root"))
    assert missing.status_code == 404
    # All limits 0: the quota goes.
    cleared = await gw.http.put(url, json={}, headers=gw.auth("root"))
    assert cleared.json()["quota"] is None
    # Each change is in the audit log, with the limits before and after.
    audit = await gw.http.get("/api/admin/audit?action=quota_changed", headers=gw.auth("root"))
    entries = audit.json()["entries"]
    assert [(e["actor"], e["target"]) for e in entries] == [("root", "ann"), ("root", "ann")]
    assert entries[0]["detail"]["previous"]["tokensPerDay"] == 5000
    assert entries[1]["detail"]["quota"]["usdPerMonth"] == 2.5


async def test_usage_dates_are_checked(start_gateway: StartGateway) -> None:
    gw = await start_gateway(admins="root")
    await gw.user("root")
    auth = gw.auth("root")
    default = await gw.http.get("/api/admin/usage", headers=auth)
    assert default.status_code == 200, default.text
    assert default.json()["to"] == TODAY and default.json()["rows"] == []
    assert default.json()["totals"] == {"inputTokens": 0, "outputTokens": 0, "usd": 0.0}
    for query, field in (
        ("from=2026-13-01", "from"),
        ("to=yesterday", "to"),
        ("from=2026-02-01&to=2026-01-01", "from"),
        ("from=2020-01-01&to=2026-01-01", "from"),
    ):
        answer = await gw.http.get(f"/api/admin/usage?{query}", headers=auth)
        assert answer.status_code == 422, (query, answer.text)
        error = answer.json()["error"]
        assert error["code"] == "invalid_request" and error["field"] == field, query


async def test_a_spent_person_quota_refuses_a_fan_out_with_one_notice(
    make_runtime: MakeRuntime, start_gateway: StartGateway, fake_llm: FakeLLM
) -> None:
    """ann may spend 1500 tokens a day: of three VPs, two start; then none, one notice each time."""
    for _ in range(2):
        fake_llm.text("Done.", input_tokens=900, output_tokens=100)
    runtime = make_runtime(engine=_engine(fake_llm), dream_every_turns=0, dream_idle_s=0)
    gw = await start_gateway(runtime, admins="root")
    for name in ("root", "ann"):
        await gw.user(name)
    set_quota = await gw.http.put(
        "/api/admin/users/ann/quota", json={"tokensPerDay": 1500}, headers=gw.auth("root")
    )
    assert set_quota.status_code == 200
    gid = await _group(gw, "ann", ["steve", "linus", "martin"])
    client = await WsClient.open(gw, "ann")
    await client.request({"type": "subscribe", "groupId": gid})
    # The meter comes with the subscription: nothing spent yet.
    first = await client.seen(lambda f: f["type"] == "quota_meter")
    assert (first["groupId"], first["percent"], first["scope"]) == (gid, 0.0, "person")
    assert first["text"] == "0% of today's budget"

    # Each turn reserves 1000 tokens before it starts: two fit under 1500, the third does not.
    await _say(client, gid, "@all go", "m1")
    ack = await client.seen(lambda f: f["type"] == "ack" and f["clientMessageId"] == "m1")
    while sum(map(_result, client.received)) < 2:
        await client.recv()
    meter = await client.seen(lambda f: f["type"] == "quota_meter" and f["spent"] == 2000)
    assert (meter["percent"], meter["limit"], meter["period"]) == (133.3, 1500, "day")
    notices = await _quota_notices(gw, gid)
    assert len(notices) == 1
    assert notices[0]["meta"]["chainId"] == ack["messageId"]
    assert "ann's own budget for today (1,500 tokens) is spent" in notices[0]["text"]
    assert "admin" in notices[0]["text"]
    assert notices[0]["meta"]["notice"] == {
        "rule": "quota",
        "scope": "person",
        "period": "day",
        "unit": "tokens",
        "limit": 1500.0,
        "user": "ann",
    }
    assert len(fake_llm.requests) == 2

    # Now the day's quota is spent: no VP starts, one notice, no model call.
    await _say(client, gid, "@all again", "m2")
    again = await client.seen(lambda f: f["type"] == "ack" and f["clientMessageId"] == "m2")
    notices = await _quota_notices(gw, gid)
    assert [n["meta"]["chainId"] for n in notices] == [ack["messageId"], again["messageId"]]
    turns = await runtime.store()
    assert await turns.turns_of(gid, again["messageId"]) == []
    assert len(fake_llm.requests) == 2

    # What it cost is recorded under ann, per VP, for the admin and for ann herself.
    usage = await gw.http.get(f"/api/admin/usage?from={TODAY}&to={TODAY}", headers=gw.auth("root"))
    rows = usage.json()["rows"]
    assert sorted(r["vp"] for r in rows) == ["linus", "steve"]
    assert {(r["user"], r["groupId"], r["groupName"], r["model"]) for r in rows} == {
        ("ann", gid, "crew", "openai:gpt-quota")
    }
    assert usage.json()["totals"]["inputTokens"] == 1800
    assert usage.json()["totals"]["outputTokens"] == 200
    mine = (await gw.http.get("/api/me/usage", headers=gw.auth("ann"))).json()
    assert mine["tokens"] == 2000 and mine["byGroup"][0]["groupId"] == gid
    spent = await gw.http.get("/api/admin/users/ann/quota", headers=gw.auth("root"))
    assert spent.json()["today"]["tokens"] == 2000
    await client.close()


async def test_a_group_month_budget_refuses_with_one_notice(
    make_runtime: MakeRuntime, start_gateway: StartGateway, fake_llm: FakeLLM
) -> None:
    """An owner's month limit in the group settings stops every VP with one notice."""
    fake_llm.text("Done.", input_tokens=1500, output_tokens=500)
    runtime = make_runtime(engine=_engine(fake_llm), dream_every_turns=0, dream_idle_s=0)
    gw = await start_gateway(runtime)
    await gw.user("ann")
    gid = await _group(gw, "ann", ["steve", "linus"])
    patched = await gw.http.patch(
        f"/api/groups/{gid}/settings",
        json={"settings": {"budgetTokensPerMonth": 1000}},
        headers=gw.auth("ann"),
    )
    assert patched.status_code == 200, patched.text
    client = await WsClient.open(gw, "ann")
    await client.request({"type": "subscribe", "groupId": gid})
    await _say(client, gid, "@steve go", "m1")
    await client.seen(_result)
    meter = await client.seen(lambda f: f["type"] == "quota_meter" and f["spent"] == 2000)
    assert (meter["scope"], meter["period"], meter["percent"]) == ("group", "month", 200.0)
    assert meter["text"] == "200% of the group's budget for this month"
    await _say(client, gid, "@all more", "m2")
    await client.seen(lambda f: f["type"] == "ack" and f["clientMessageId"] == "m2")
    [notice] = await _quota_notices(gw, gid)
    assert notice["meta"]["notice"]["scope"] == "group"
    assert "group's budget for this month (1,000 tokens)" in notice["text"]
    assert "group owner" in notice["text"]
    assert len(fake_llm.requests) == 1
    await client.close()


async def _say(client: WsClient, gid: str, text: str, cmid: str) -> None:
    frame = {"type": "yeaft_session_chat", "groupId": gid, "text": text, "clientMessageId": cmid}
    await client.send(frame)


async def _quota_notices(gw: Gateway, gid: str) -> list[dict[str, Any]]:
    page = await gw.http.get(f"/api/groups/{gid}/messages", headers=gw.auth("ann"))
    return [
        m
        for m in page.json()["messages"]
        if m["role"] == "system" and (m.get("meta") or {}).get("notice", {}).get("rule") == "quota"
    ]


async def test_spending_in_one_group_moves_the_meter_watched_in_another(
    make_runtime: MakeRuntime, start_gateway: StartGateway, fake_llm: FakeLLM
) -> None:
    """ann watches "plans" on one gateway and writes in "crew" on another: both meters move."""
    fake_llm.text("Done.", input_tokens=900, output_tokens=100)
    runtime = make_runtime(engine=_engine(fake_llm), dream_every_turns=0, dream_idle_s=0)
    first = await start_gateway(runtime, admins="root")
    second = await start_gateway(runtime, admins="root", jwt_secret=first.settings.jwt_secret)
    for name in ("root", "ann"):
        await first.user(name)
    second.tokens["ann"] = first.tokens["ann"]
    put = await first.http.put(
        "/api/admin/users/ann/quota", json={"tokensPerDay": 4000}, headers=first.auth("root")
    )
    assert put.status_code == 200
    crew = await _group(first, "ann", ["steve"])
    plans = await _group(first, "ann", ["linus"])
    watching = await WsClient.open(first, "ann")
    await watching.request({"type": "subscribe", "groupId": plans})
    opened = await watching.seen(lambda f: f["type"] == "quota_meter")
    assert (opened["groupId"], opened["spent"]) == (plans, 0)

    writing = await WsClient.open(second, "ann")
    await writing.request({"type": "subscribe", "groupId": crew})
    await _say(writing, crew, "@steve go", "m1")
    await writing.seen(_result)
    # No turn ran in "plans", and this gateway does not tail "crew": the activity log told it.
    moved = await watching.seen(
        lambda f: f["type"] == "quota_meter" and f["groupId"] == plans and f["spent"] == 1000
    )
    assert (moved["percent"], moved["scope"]) == (25.0, "person")
    await watching.close()
    await writing.close()
