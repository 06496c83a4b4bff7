"""API tokens (``gateway.api_tokens``): named, long-lived tokens a person makes for a program.

On real Ray and both store backends, through the gateway's HTTP API, its
WebSocket and its MCP endpoint (the ``mcp`` SDK's client): a token works
where a session token does, lives as long as it was made for (never
renewed), stays out of the sign-in sessions and their "end all others",
and is refused on every gateway once revoked or once the password changes.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from gateway.api_tokens import MAX_API_TOKENS
from store.audit import AuditQuery
from store.embedded import DB_FILENAME, EmbeddedStore
from store.sessions import SessionRecord, SignIn
from tests.fixtures.gateway import PASSWORD, Gateway, StartGateway, WsClient
from tests.test_selfservice import NEW_PASSWORD, bearer, error, login

DAY_S = 86_400


async def make(gw: Gateway, user: str, **body: Any) -> httpx.Response:
    return await gw.http.post("/api/me/tokens", json=body, headers=gw.auth(user))


async def test_a_token_works_everywhere_a_session_does_and_is_never_renewed(
    start_gateway: StartGateway,
) -> None:
    # The renewal window is a day: every session token is renewed, no API token is.
    gw = await start_gateway(jwt_ttl=3600)
    await gw.user("ann")
    made = await make(gw, "ann", name="  Desktop   MCP client ", days=30)
    assert made.status_code == 201, made.text
    body = made.json()
    token = body["token"]
    assert body["name"] == "Desktop MCP client"
    assert abs(body["expires"] - (time.time() + 30 * DAY_S)) < 60

    me = await gw.http.get("/api/me", headers=bearer(token))
    assert me.status_code == 200 and me.json()["username"] == "ann"
    assert "X-New-Token" not in me.headers
    session = await gw.http.get("/api/me", headers=gw.auth("ann"))
    assert "X-New-Token" in session.headers  # a sign-in's token is renewed
    # The WebSocket takes it too.
    socket = await WsClient.open(gw, headers=bearer(token))
    assert (await socket.request({"type": "ping"}))["type"] == "pong"
    # So does the group's MCP endpoint, through the SDK's client.
    made_group = await gw.http.post("/api/groups", json={"name": "crew"}, headers=bearer(token))
    assert made_group.status_code in (200, 201), made_group.text
    http = httpx2.AsyncClient(headers=bearer(token), timeout=30)
    async with http, Client(streamable_http_client(f"{gw.base_url}/mcp", http_client=http)) as mcp:
        listed = await mcp.call_tool("list_groups", {})
        assert not listed.is_error
        assert "crew" in json.dumps([c.model_dump() for c in listed.content])

    # Listed apart from the sign-in sessions, and never with the token itself.
    tokens = (await gw.http.get("/api/me/tokens", headers=gw.auth("ann"))).json()["tokens"]
    assert [t["name"] for t in tokens] == ["Desktop MCP client"]
    assert set(tokens[0]) == {"id", "name", "created", "expires", "lastUsed"}
    assert token not in json.dumps(tokens)
    sessions = (await gw.http.get("/api/me/sessions", headers=gw.auth("ann"))).json()
    assert tokens[0]["id"] not in {s["id"] for s in sessions["sessions"]}
    # "End all others" ends sign-ins, not API tokens.
    await login(gw, "ann")
    others = await gw.http.delete("/api/me/sessions", headers=gw.auth("ann"))
    assert others.json() == {"ended": 1}
    assert (await gw.http.get("/api/me", headers=bearer(token))).status_code == 200


async def test_a_revoked_token_is_refused_on_every_gateway(start_gateway: StartGateway) -> None:
    first = await start_gateway()
    second = await start_gateway(first.runtime, jwt_secret=first.settings.jwt_secret)
    await first.user("ann")
    await first.user("bob")
    await first.ctx.people.started()
    await second.ctx.people.started()
    token = (await make(first, "ann", name="ci bot")).json()["token"]
    tid = (await first.http.get("/api/me/tokens", headers=first.auth("ann"))).json()["tokens"][0][
        "id"
    ]
    socket = await WsClient.open(second, headers=bearer(token))
    assert (await socket.request({"type": "ping"}))["type"] == "pong"

    # Bob cannot revoke Ann's token, nor can a sign-in session's id be revoked as a token.
    bobs = await first.http.delete(f"/api/me/tokens/{tid}", headers=first.auth("bob"))
    assert error(bobs, 404)["code"] == "not_found"
    own_session = (await first.http.get("/api/me", headers=first.auth("ann"))).json()["session"]
    not_a_token = await first.http.delete(
        f"/api/me/tokens/{own_session}", headers=first.auth("ann")
    )
    assert error(not_a_token, 404)["code"] == "not_found"
    assert (await first.http.get("/api/me", headers=first.auth("ann"))).status_code == 200

    revoked = await second.http.delete(f"/api/me/tokens/{tid}", headers=first.auth("ann"))
    assert revoked.status_code == 204, revoked.text
    assert await socket.closed_with(within=5) == 4401
    for gw in (first, second):
        refused = error(await gw.http.get("/api/groups", headers=bearer(token)), 401)
        assert refused["detail"]["reason"] == "session_ended"
    again = await second.http.delete(f"/api/me/tokens/{tid}", headers=first.auth("ann"))
    assert error(again, 404)["code"] == "not_found"
    assert (await first.http.get("/api/me/tokens", headers=first.auth("ann"))).json() == {
        "tokens": []
    }

    # Made and revoked are audited, by name; the token never is.
    store = await first.store()
    entries = (await store.read_audit(AuditQuery(actor="ann"))).entries
    made = [e for e in entries if e.action.value == "api_token_created"]
    gone = [e for e in entries if e.action.value == "api_token_revoked"]
    assert made and made[0].detail == {"name": "ci bot", "days": 90} and made[0].actor == "ann"
    assert gone and gone[0].detail == {"name": "ci bot"}
    assert token not in json.dumps([e.model_dump() for e in entries])


async def test_a_password_change_ends_the_tokens(start_gateway: StartGateway) -> None:
    gw = await start_gateway()
    mine = await gw.user("ann")
    token = (await make(gw, "ann", name="script")).json()["token"]
    changed = await gw.http.post(
        "/api/me/password", json={"current": PASSWORD, "new": NEW_PASSWORD}, headers=bearer(mine)
    )
    assert changed.status_code == 200, changed.text
    refused = error(await gw.http.get("/api/me", headers=bearer(token)), 401)
    assert refused["detail"]["reason"] in ("session_ended", "password_changed")


async def test_bad_requests_are_refused_and_make_nothing(start_gateway: StartGateway) -> None:
    gw = await start_gateway()
    await gw.user("ann")
    for body, field in (
        ({"name": "x", "days": 0}, "days"),
        ({"name": "x", "days": 366}, "days"),
        ({"name": "   "}, "name"),
        ({"name": "x" * 81}, "name"),
        ({"days": 3}, "name"),
        ({"name": "x", "scope": "admin"}, None),
    ):
        refused = error(await make(gw, "ann", **body), 422)
        assert refused["code"] == "invalid_request"
        if field:
            assert refused["field"] == field, refused
    async with httpx.AsyncClient(base_url=gw.base_url) as stranger:  # no cookie, no token
        anonymous = await stranger.post("/api/me/tokens", json={"name": "x"})
    assert error(anonymous, 401)["code"] == "unauthorized"
    for i in range(MAX_API_TOKENS):
        assert (await make(gw, "ann", name=f"t{i}")).status_code == 201
    over = error(await make(gw, "ann", name="one too many"), 409)
    assert over["code"] == "conflict" and over["detail"]["reason"] == "too_many_tokens"
    listed = (await gw.http.get("/api/me/tokens", headers=gw.auth("ann"))).json()["tokens"]
    assert len(listed) == MAX_API_TOKENS


async def test_a_database_made_before_tokens_opens_with_its_sessions(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / DB_FILENAME) as conn:
        conn.executescript(
            """
            CREATE TABLE sessions (
                id TEXT PRIMARY KEY, username TEXT NOT NULL, created REAL NOT NULL,
                expires REAL NOT NULL, last_seen REAL NOT NULL, how TEXT NOT NULL,
                user_agent TEXT NOT NULL, address TEXT NOT NULL, ended REAL
            ) WITHOUT ROWID;
            """
        )
        now = time.time()
        conn.execute(
            "INSERT INTO sessions VALUES ('s1', 'ann', ?, ?, ?, 'password', 'ua', '::1', NULL)",
            (now, now + 3600, now),
        )
    conn.close()
    store = EmbeddedStore(tmp_path)
    try:
        (old,) = await store.user_sessions("ann", time.time())
        assert old.id == "s1" and old.label == "" and old.how is SignIn.PASSWORD
        await store.record_session(
            SessionRecord("s2", "ann", now, now + 3600, now, how=SignIn.API_TOKEN, label="bot")
        )
        assert (await store.get_session("s2")) is not None
        assert (await store.get_session("s2")).label == "bot"  # type: ignore[union-attr]
    finally:
        await store.close()
