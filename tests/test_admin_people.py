"""The administrators' people routes: list and search, disable, re-enable, sign out, roles.

On real Ray and both store backends. A disabled person is refused at the
password login and at an OpenID sign-in, their tokens are refused at once,
and their open WebSockets close within a second on every gateway: two
gateway apps on one store (as two replicas share it), the socket on one,
the disable on the other. A demotion is in force on the other gateway at
once too. ``yeaft user disable|enable`` do the same from a shell, and a
changed display name is in the audit log.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

import pytest

from gateway.auth import issue_token
from gateway.oidc import Identity
from gateway.oidc_http import NotAllowed, account_for
from gateway.users import add_user
from store.audit import AuditAction, AuditQuery
from tests.fixtures.gateway import PASSWORD, Gateway, StartGateway, WsClient
from tests.fixtures.stores import StoreFactory
from tests.test_accounts import run_cli


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def error(reply: Any, status: int) -> dict[str, Any]:
    assert reply.status_code == status, reply.text
    body: dict[str, Any] = reply.json()["error"]
    return body


async def two_gateways(start_gateway: StartGateway) -> tuple[Gateway, Gateway]:
    """Two gateways on one store with one JWT secret, as replicas of one deployment."""
    secret = secrets.token_urlsafe(48)
    first = await start_gateway(jwt_secret=secret, admins="root")
    second = await start_gateway(first.runtime, jwt_secret=secret, admins="root")
    await first.ctx.people.started()
    await second.ctx.people.started()
    return first, second


async def disable(gw: Gateway, who: str, name: str, disabled: bool = True) -> Any:
    return await gw.http.put(
        f"/api/admin/users/{name}/disabled", json={"disabled": disabled}, headers=gw.auth(who)
    )


async def audit(gw: Gateway, action: AuditAction) -> list[Any]:
    page = await (await gw.store()).read_audit(AuditQuery(action=action))
    return page.entries


async def test_people_are_listed_searched_and_signed_out(start_gateway: StartGateway) -> None:
    gw = await start_gateway(admins="root", login_max_failures=2, login_lockout_s=600)
    for name in ("root", "ann", "bob"):
        await gw.user(name)
    renamed = await gw.http.patch(
        "/api/me", json={"displayName": "Annabel Lee"}, headers=gw.auth("ann")
    )
    assert renamed.status_code == 200
    for _ in range(2):
        await gw.http.post("/api/login", json={"username": "bob", "password": "wrong guess!"})

    listed = await gw.http.get("/api/admin/users", headers=gw.auth("root"))
    assert listed.status_code == 200, listed.text
    people = {p["username"]: p for p in listed.json()["people"]}
    assert set(people) == {"root", "ann", "bob"}
    assert people["ann"]["displayName"] == "Annabel Lee"
    assert people["ann"]["disabled"] is False and people["ann"]["lockedUntil"] is None
    assert people["bob"]["lockedUntil"] > time.time()
    # Search finds by display name and by username, whatever the case.
    found = await gw.http.get("/api/admin/users", params={"q": "annabel"}, headers=gw.auth("root"))
    assert [p["username"] for p in found.json()["people"]] == ["ann"]
    found = await gw.http.get("/api/admin/users", params={"q": "BO"}, headers=gw.auth("root"))
    assert [p["username"] for p in found.json()["people"]] == ["bob"]

    # Signing ann out everywhere: her token is refused, her socket closed.
    second = await gw.http.post("/api/login", json={"username": "ann", "password": PASSWORD})
    socket = await WsClient.open(gw, headers=bearer(second.json()["token"]))
    assert (await socket.request({"type": "ping"}))["type"] == "pong"
    out = await gw.http.delete("/api/admin/users/ann/sessions", headers=gw.auth("root"))
    assert out.status_code == 200 and out.json() == {"username": "ann", "ended": 2}
    assert await socket.closed_with(within=5) == 4401
    refused = error(await gw.http.get("/api/me", headers=gw.auth("ann")), 401)
    assert refused["detail"]["reason"] == "session_ended"
    missing = await gw.http.delete("/api/admin/users/nobody/sessions", headers=gw.auth("root"))
    assert error(missing, 404)["code"] == "not_found"

    (ended,) = await audit(gw, AuditAction.SESSIONS_ENDED)
    assert (ended.actor, ended.target) == ("root", "ann")
    assert ended.detail == {"ended": 2, "byAdmin": True}
    (named,) = await audit(gw, AuditAction.DISPLAY_NAME_CHANGED)
    assert (named.actor, named.target) == ("ann", "ann")
    assert named.detail == {"displayName": "Annabel Lee", "previous": None}
    # The same name again changes nothing and records nothing.
    fresh = await gw.http.post("/api/login", json={"username": "ann", "password": PASSWORD})
    again = await gw.http.patch(
        "/api/me", json={"displayName": "Annabel  Lee "}, headers=bearer(fresh.json()["token"])
    )
    assert again.status_code == 200
    assert len(await audit(gw, AuditAction.DISPLAY_NAME_CHANGED)) == 1


async def test_a_disabled_person_is_refused_everywhere_and_let_back_in(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway(admins="root")
    for name in ("root", "ann"):
        await gw.user(name)
    # A token without a session (as `yeaft user token` makes) dies with the mark too.
    scripted = issue_token(gw.settings, "ann")

    myself = await disable(gw, "root", "root")
    assert error(myself, 409)["detail"] == {"reason": "self"}
    assert error(await disable(gw, "root", "nobody"), 404)["code"] == "not_found"
    bad = await gw.http.put(
        "/api/admin/users/ann/disabled", json={"disabled": "maybe"}, headers=gw.auth("root")
    )
    assert bad.status_code == 422

    done = await disable(gw, "root", "ann")
    assert done.status_code == 200, done.text
    person = done.json()
    assert person["disabled"] is True and person["disabledBy"] == "root"
    assert person["disabledAt"] <= time.time()
    for token in (gw.tokens["ann"], scripted):
        refused = error(await gw.http.get("/api/groups", headers=bearer(token)), 401)
        assert refused["detail"]["reason"] in ("account_disabled", "session_ended")
    refused = error(await gw.http.get("/api/me", headers=bearer(scripted)), 401)
    assert refused["detail"]["reason"] == "account_disabled"
    assert await (await WsClient.open(gw, headers=bearer(scripted))).closed_with(within=5) == 4401
    # The right password gets a clear refusal; a wrong one is just wrong.
    login = await gw.http.post("/api/login", json={"username": "ann", "password": PASSWORD})
    body = error(login, 403)
    assert body["detail"] == {"reason": "account_disabled"} and "disabled" in body["message"]
    wrong = await gw.http.post("/api/login", json={"username": "ann", "password": "nope nope"})
    assert wrong.status_code == 401
    failed = await audit(gw, AuditAction.SIGN_IN_FAILED)
    assert [e.detail["reason"] for e in failed] == ["wrong_password", "account_disabled"]

    back = await disable(gw, "root", "ann", disabled=False)
    assert back.status_code == 200 and back.json()["disabled"] is False
    # Old sessions stay ended; a new login works.
    assert (await gw.http.get("/api/me", headers=gw.auth("ann"))).status_code == 401
    again = await gw.http.post("/api/login", json={"username": "ann", "password": PASSWORD})
    assert again.status_code == 200
    assert (await gw.http.get("/api/me", headers=bearer(again.json()["token"]))).status_code == 200

    (off,) = await audit(gw, AuditAction.ACCOUNT_DISABLED)
    (on,) = await audit(gw, AuditAction.ACCOUNT_ENABLED)
    assert (off.actor, off.target, off.detail) == (
        "root",
        "ann",
        {"endedSessions": 1, "changed": True},
    )
    assert (on.actor, on.target) == ("root", "ann")
    assert off.address == "127.0.0.1"


async def test_disabling_closes_the_sockets_on_another_gateway_within_a_second(
    start_gateway: StartGateway,
) -> None:
    first, second = await two_gateways(start_gateway)
    await first.user("root")
    await first.user("ann")
    await first.user("bob")
    # ann has two sockets on the second gateway, one with a token that has no session.
    sockets = [
        await WsClient.open(second, headers=first.auth("ann")),
        await WsClient.open(second, headers=bearer(issue_token(first.settings, "ann"))),
    ]
    bobs = await WsClient.open(second, headers=first.auth("bob"))
    for ws in [*sockets, bobs]:
        assert (await ws.request({"type": "ping"}))["type"] == "pong"

    closes = [asyncio.create_task(ws.closed_with(within=10)) for ws in sockets]
    started = time.monotonic()
    done = await disable(first, "root", "ann")
    assert done.status_code == 200, done.text
    # Each close is awaited, bounded by one second from the request.
    async with asyncio.timeout(1.0 - (time.monotonic() - started)):
        codes = await asyncio.gather(*closes)
    assert codes == [4401, 4401]
    assert time.monotonic() - started < 1.0
    # Everyone else stays connected.
    assert (await bobs.request({"type": "ping"}))["type"] == "pong"
    for gw in (first, second):
        refused = error(await gw.http.get("/api/groups", headers=first.auth("ann")), 401)
        assert refused["detail"]["reason"] in ("account_disabled", "session_ended")
    await bobs.close()


async def test_a_demotion_is_in_force_on_every_gateway_at_once(
    start_gateway: StartGateway,
) -> None:
    first, second = await two_gateways(start_gateway)
    await first.user("root")
    await first.user("ann")
    made = await first.http.put(
        "/api/admin/users/ann/role", json={"role": "admin"}, headers=first.auth("root")
    )
    assert made.status_code == 200 and made.json()["role"] == "admin"
    assert (await second.http.get("/api/admin/users", headers=first.auth("ann"))).status_code == 200
    down = await first.http.put(
        "/api/admin/users/ann/role", json={"role": "member"}, headers=first.auth("root")
    )
    assert down.status_code == 200 and down.json()["role"] == "member"
    # The very next request on the other gateway is refused.
    refused = await second.http.get("/api/admin/users", headers=first.auth("ann"))
    assert error(refused, 403)["code"] == "forbidden"
    # A disabled administrator does not count as the one who remains.
    await first.http.put(
        "/api/admin/users/ann/role", json={"role": "admin"}, headers=first.auth("root")
    )
    assert (await disable(first, "root", "ann")).status_code == 200
    alone = await first.http.put(
        "/api/admin/users/root/role", json={"role": "member"}, headers=first.auth("root")
    )
    assert error(alone, 409)["code"] == "conflict"


async def test_a_disabled_person_cannot_sign_in_with_the_provider(
    store_factory: StoreFactory,
) -> None:
    from gateway.settings import GatewaySettings
    from store.disabled import DisabledMark

    store = store_factory()
    settings = GatewaySettings(jwt_secret=secrets.token_urlsafe(48))
    identity = Identity("https://idp.example", "sub-1", "ann@example.org", True, "Ann", "ann")
    name = await account_for(store, identity, settings)
    assert await account_for(store, identity, settings) == name
    await store.disable_account(DisabledMark(name, time.time(), "root"))
    with pytest.raises(NotAllowed, match="disabled"):
        await account_for(store, identity, settings)
    await store.enable_account(name)
    assert await account_for(store, identity, settings) == name


async def test_yeaft_user_disable_and_enable(
    start_gateway: StartGateway, store_factory: StoreFactory
) -> None:
    gw = await start_gateway()
    await gw.ctx.people.started()
    await gw.user("ann")
    socket = await WsClient.open(gw, "ann")
    assert (await socket.request({"type": "ping"}))["type"] == "pong"
    off = run_cli(store_factory, "user", "disable", "ann")
    assert off.returncode == 0, off.stderr
    assert "disabled ann" in off.stdout and "1 session(s) ended" in off.stdout
    # The gateway hears of it through the store and closes the socket.
    assert await socket.closed_with(within=5) == 4401
    login = await gw.http.post("/api/login", json={"username": "ann", "password": PASSWORD})
    assert error(login, 403)["detail"] == {"reason": "account_disabled"}
    on = run_cli(store_factory, "user", "enable", "ann")
    assert on.returncode == 0 and "enabled ann" in on.stdout
    assert (
        await gw.http.post("/api/login", json={"username": "ann", "password": PASSWORD})
    ).status_code == 200
    missing = run_cli(store_factory, "user", "disable", "nobody")
    assert missing.returncode == 2 and "no user 'nobody'" in missing.stderr
    (entry,) = await audit(gw, AuditAction.ACCOUNT_DISABLED)
    assert entry.actor is None and entry.detail["via"] == "cli"


async def test_a_store_made_user_needs_no_gateway_to_be_disabled(
    store_factory: StoreFactory,
) -> None:
    from gateway import disabling

    store = store_factory()
    await add_user(store, "ann", PASSWORD)
    done = await disabling.disable(store, "ann", "root")
    assert done.changed and done.ended_sessions == 0
    assert not (await disabling.disable(store, "ann", "root")).changed
    assert await disabling.enable(store, "ann", "root")
    assert not await disabling.enable(store, "ann", "root")
