"""Self-service over HTTP (``gateway.me_http``): password, display name, sessions, usage.

On real Ray and both store backends. Sessions are recorded at each login and
checked on every request and WebSocket handshake; ending one refuses its
token at once and closes its WebSockets, also on a second gateway app on the
same store (standing for a second gateway process).
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from gateway.auth import issue_token, token_claims
from tests.fixtures.gateway import PASSWORD, Gateway, StartGateway, WsClient

NEW_PASSWORD = "a quite different passphrase 42"


async def login(gw: Gateway, username: str, password: str = PASSWORD, agent: str = "") -> str:
    headers = {"User-Agent": agent} if agent else {}
    reply = await gw.http.post(
        "/api/login", json={"username": username, "password": password}, headers=headers
    )
    assert reply.status_code == 200, reply.text
    return str(reply.json()["token"])


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def sid(gw: Gateway, token: str) -> str:
    return str(token_claims(gw.settings, token)["jti"])


def error(reply: httpx.Response, status: int) -> dict[str, Any]:
    assert reply.status_code == status, reply.text
    body: dict[str, Any] = reply.json()["error"]
    return body


async def test_changing_the_password_ends_the_other_sessions_and_keeps_this_one(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway()
    first = await gw.user("ann")
    other = await login(gw, "ann")
    watcher = await WsClient.open(gw, headers=bearer(other))
    assert (await watcher.request({"type": "ping"}))["type"] == "pong"

    wrong = await gw.http.post(
        "/api/me/password",
        json={"current": "not it at all", "new": NEW_PASSWORD},
        headers=bearer(first),
    )
    body = error(wrong, 403)
    assert body["code"] == "forbidden" and body["detail"]["reason"] == "wrong_password"
    assert body["field"] == "current"
    weak = await gw.http.post(
        "/api/me/password", json={"current": PASSWORD, "new": "short"}, headers=bearer(first)
    )
    body = error(weak, 422)
    assert body["code"] == "invalid_request" and body["field"] == "new"
    assert "too short" in body["message"]
    missing = await gw.http.post(
        "/api/me/password", json={"new": NEW_PASSWORD}, headers=bearer(first)
    )
    assert error(missing, 422)["field"] == "current"

    changed = await gw.http.post(
        "/api/me/password", json={"current": PASSWORD, "new": NEW_PASSWORD}, headers=bearer(first)
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["endedSessions"] == 1
    fresh = str(changed.json()["token"])
    # The same session goes on, with a token issued after the change.
    assert sid(gw, fresh) == sid(gw, first)
    me = await gw.http.get("/api/me", headers=bearer(fresh))
    assert me.status_code == 200 and me.json()["session"] == sid(gw, first)
    # The other session is over: its token is refused, its socket closed. (Its
    # token predates the change too, unless both fell in one second.)
    refused = error(await gw.http.get("/api/groups", headers=bearer(other)), 401)
    assert refused["detail"]["reason"] in ("session_ended", "password_changed")
    assert await watcher.closed_with(within=5) == 4401
    left = await gw.http.get("/api/me/sessions", headers=bearer(fresh))
    assert [s["id"] for s in left.json()["sessions"]] == [sid(gw, first)]
    # The new password logs in; the old one does not.
    await login(gw, "ann", NEW_PASSWORD)
    old = await gw.http.post("/api/login", json={"username": "ann", "password": PASSWORD})
    assert old.status_code == 401


async def test_an_account_without_a_password_is_told_so(start_gateway: StartGateway) -> None:
    gw = await start_gateway()
    store = await gw.store()
    await store.put_user({"username": "oid", "createdAt": time.time(), "identity": "x|y"})
    token = issue_token(gw.settings, "oid")
    reply = await gw.http.post(
        "/api/me/password", json={"current": "anything", "new": NEW_PASSWORD}, headers=bearer(token)
    )
    body = error(reply, 409)
    assert body["code"] == "conflict" and body["detail"]["reason"] == "no_password"
    me = await gw.http.get("/api/me", headers=bearer(token))
    assert me.json()["hasPassword"] is False


async def test_sessions_are_listed_and_ended_on_every_gateway(start_gateway: StartGateway) -> None:
    first = await start_gateway()
    second = await start_gateway(first.runtime, jwt_secret=first.settings.jwt_secret)
    mine = await first.user("ann")
    await first.user("bob")
    laptop = await login(first, "ann", agent="Laptop browser")
    phone = await login(second, "ann", agent="Phone browser")
    await first.ctx.people.started()
    await second.ctx.people.started()

    listed = await first.http.get("/api/me/sessions", headers=bearer(mine))
    assert listed.status_code == 200, listed.text
    sessions = listed.json()["sessions"]
    assert [s["id"] for s in sessions] == [sid(first, t) for t in (phone, laptop, mine)]
    assert [s["current"] for s in sessions] == [False, False, True]
    assert sessions[0]["userAgent"] == "Phone browser" and sessions[0]["how"] == "password"
    assert sessions[0]["address"] == "127.0.0.1" and sessions[0]["expires"] > time.time()
    assert listed.json()["current"] == sid(first, mine)

    # The laptop's socket is on the second gateway; the session is ended on the first.
    socket = await WsClient.open(second, headers=bearer(laptop))
    assert (await socket.request({"type": "ping"}))["type"] == "pong"
    # Someone else's session id is not found, and nothing ends.
    bobs = await first.http.delete(
        f"/api/me/sessions/{sid(first, laptop)}", headers=first.auth("bob")
    )
    assert error(bobs, 404)["code"] == "not_found"
    started = time.monotonic()
    ended = await first.http.delete(f"/api/me/sessions/{sid(first, laptop)}", headers=bearer(mine))
    assert ended.status_code == 204, ended.text
    assert await socket.closed_with(within=5) == 4401
    assert time.monotonic() - started < 2.5
    for gw in (first, second):
        refused = error(await gw.http.get("/api/groups", headers=bearer(laptop)), 401)
        assert refused["detail"]["reason"] == "session_ended"
    again = await WsClient.open(second, headers=bearer(laptop))
    assert await again.closed_with(within=5) == 4401
    missing = await first.http.delete(
        f"/api/me/sessions/{sid(first, laptop)}", headers=bearer(mine)
    )
    assert error(missing, 404)["code"] == "not_found"

    # All but this one: the phone's session ends, this one stays.
    others = await second.http.delete("/api/me/sessions", headers=bearer(mine))
    assert others.status_code == 200 and others.json() == {"ended": 1}
    assert error(await first.http.get("/api/me", headers=bearer(phone)), 401)
    left = await first.http.get("/api/me/sessions", headers=bearer(mine))
    assert [s["id"] for s in left.json()["sessions"]] == [sid(first, mine)]


async def test_a_renewed_token_keeps_its_session(start_gateway: StartGateway) -> None:
    gw = await start_gateway(jwt_ttl=3600)  # the renewal window is a day: always renewed
    token = await gw.user("ann")
    reply = await gw.http.get("/api/me", headers=bearer(token))
    fresh = reply.headers["X-New-Token"]
    assert sid(gw, fresh) == sid(gw, token)
    await gw.http.delete(f"/api/me/sessions/{sid(gw, token)}", headers=bearer(token))
    refused = error(await gw.http.get("/api/me", headers=bearer(fresh)), 401)
    assert refused["detail"]["reason"] == "session_ended"


async def test_the_display_name_is_changed_and_shown_to_the_group(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway()
    await gw.user("ann")
    await gw.user("bob")
    made = await gw.http.post("/api/groups", json={"name": "crew"}, headers=gw.auth("ann"))
    gid = made.json()["id"]
    await gw.http.post(
        f"/api/groups/{gid}/members", json={"username": "bob"}, headers=gw.auth("ann")
    )

    changed = await gw.http.patch(
        "/api/me", json={"displayName": "  Ann   Lee "}, headers=gw.auth("ann")
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["displayName"] == "Ann Lee" and changed.json()["username"] == "ann"
    assert (await gw.http.get("/api/me", headers=gw.auth("ann"))).json()["displayName"] == "Ann Lee"
    names = await gw.http.get(f"/api/groups/{gid}/display-names", headers=gw.auth("bob"))
    assert names.json()["names"] == {"ann": "Ann Lee"}
    long = await gw.http.patch("/api/me", json={"displayName": "x" * 81}, headers=gw.auth("ann"))
    assert error(long, 422)["field"] == "displayName"
    extra = await gw.http.patch("/api/me", json={"username": "eve"}, headers=gw.auth("ann"))
    assert error(extra, 422)["code"] == "invalid_request"
    cleared = await gw.http.patch("/api/me", json={"displayName": None}, headers=gw.auth("ann"))
    assert cleared.json()["displayName"] is None
    names = await gw.http.get(f"/api/groups/{gid}/display-names", headers=gw.auth("bob"))
    assert names.json()["names"] == {}
    # The password survives a profile change.
    await login(gw, "ann")


async def test_usage_adds_up_after_a_turn(start_gateway: StartGateway) -> None:
    gw = await start_gateway()
    await gw.user("ann")
    await gw.user("bob")
    empty = await gw.http.get("/api/me/usage", headers=gw.auth("ann"))
    assert empty.status_code == 200, empty.text
    assert empty.json()["tokens"] == 0 and empty.json()["byGroup"] == []
    made = await gw.http.post(
        "/api/groups", json={"name": "crew", "roster": ["steve"]}, headers=gw.auth("ann")
    )
    gid = made.json()["id"]
    client = await WsClient.open(gw, "ann")
    await client.request({"type": "subscribe", "groupId": gid})
    await client.send({"type": "yeaft_session_chat", "groupId": gid, "text": "@steve hello"})
    await client.recv_until(
        lambda f: f.get("type") == "yeaft_output" and f["data"].get("type") == "result"
    )
    usage = (await gw.http.get("/api/me/usage", headers=gw.auth("ann"))).json()
    assert usage["days"] == 30 and usage["tokens"] > 0
    today = time.strftime("%Y-%m-%d", time.gmtime())
    assert usage["to"] == today and [d["day"] for d in usage["byDay"]] == [today]
    assert usage["byDay"][0]["tokens"] == usage["tokens"]
    [group] = usage["byGroup"]
    assert (
        group["groupId"] == gid and group["name"] == "crew" and group["tokens"] == usage["tokens"]
    )
    # Not a member: none of it is bob's.
    theirs = (await gw.http.get("/api/me/usage", headers=gw.auth("bob"))).json()
    assert theirs["tokens"] == 0 and theirs["byGroup"] == []
    await client.close()
