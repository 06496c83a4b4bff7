"""What the audit log records, done through the real doors: HTTP, the WebSocket, the CLI.

Each test acts as a person would (a login, a group change over HTTP or a
frame over the WebSocket, an MCP server added by an administrator, ``yeaft
user unlock``) and then reads the log back through the administrators'
route (or the store, for the provider's sign-ins), checking who, what,
when and from where. People act from another
loopback address (127.0.0.2) than the test's own client, so the address
recorded is seen to be the client's. Both store backends.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from store.audit import AuditAction, AuditQuery
from store.embedded import DB_FILENAME
from tests.fixtures.gateway import PASSWORD, Gateway, StartGateway, WsClient
from tests.fixtures.oidc import Signed
from tests.fixtures.stores import StoreFactory
from tests.test_accounts import run_cli
from tests.test_oidc import begin, sign_in

ELSEWHERE = "127.0.0.2"
SECRET_ENV = "env-secret-5f1d2c9a8b7e"
SECRET_HEADER = "header-secret-0a9b8c7d6e5f"
MCP_FIXTURE = str(Path(__file__).resolve().parent / "fixtures" / "mcp_server.py")


@pytest.fixture
async def clients() -> AsyncIterator[list[httpx.AsyncClient]]:
    made: list[httpx.AsyncClient] = []
    yield made
    for client in made:
        await client.aclose()


def client_from(gw: Gateway, made: list[httpx.AsyncClient], user: str | None = None) -> Any:
    """An HTTP client whose connections leave from 127.0.0.2, signed in as ``user``."""
    transport = httpx.AsyncHTTPTransport(local_address=ELSEWHERE)
    headers = gw.auth(user) if user else {}
    client = httpx.AsyncClient(
        base_url=gw.base_url, transport=transport, timeout=30, headers=headers
    )
    made.append(client)
    return client


async def audit(gw: Gateway, **filters: Any) -> list[dict[str, Any]]:
    """Every entry matching ``filters``, oldest first, as the administrators' route gives them."""
    reply = await gw.http.get(
        "/api/admin/audit", params={"limit": 1000, **filters}, headers=gw.auth("admin")
    )
    assert reply.status_code == 200, reply.text
    return list(reversed(reply.json()["entries"]))


def brief(entries: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(e["action"], e["actor"], e["target"], e["address"]) for e in entries]


async def test_sign_ins_and_failed_sign_ins_say_who_and_from_where(
    start_gateway: StartGateway, clients: list[httpx.AsyncClient]
) -> None:
    gw = await start_gateway(login_max_failures=2, login_lockout_s=600)
    await gw.user("admin")
    before = time.time()
    await gw.user("ann")
    elsewhere = client_from(gw, clients)
    wrong = {"username": "ann", "password": "not the password at all"}
    assert (await elsewhere.post("/api/login", json=wrong)).status_code == 401
    assert (await elsewhere.post("/api/login", json=wrong)).status_code == 429
    refused = await elsewhere.post("/api/login", json={"username": "ann", "password": PASSWORD})
    assert refused.status_code == 429
    after = time.time()
    entries = await audit(gw, target="ann")
    assert brief(entries) == [
        ("sign_in", "ann", "ann", "127.0.0.1"),
        ("sign_in_failed", None, "ann", ELSEWHERE),
        ("sign_in_failed", None, "ann", ELSEWHERE),
        ("sign_in_failed", None, "ann", ELSEWHERE),
    ]
    assert [e["detail"] for e in entries] == [
        {"method": "password"},
        {"method": "password", "reason": "wrong_password"},
        {"method": "password", "reason": "wrong_password", "lockedOut": True},
        {"method": "password", "reason": "locked_out"},
    ]
    assert all(before <= e["at"] <= after for e in entries)
    # No password, right or wrong, is in the log.
    text = (await gw.http.get("/api/admin/audit", headers=gw.auth("admin"))).text
    assert PASSWORD not in text and "not the password" not in text

    # An administrator lifts the lockout: recorded with who did it.
    lifted = await client_from(gw, clients, "admin").delete("/api/admin/lockouts/ann")
    assert lifted.status_code == 200
    [entry] = await audit(gw, action="lockout_lifted")
    assert (entry["actor"], entry["target"], entry["address"]) == ("admin", "ann", ELSEWHERE)
    assert entry["detail"] == {"wasLocked": True}


async def test_group_and_member_changes_over_http(
    start_gateway: StartGateway, clients: list[httpx.AsyncClient]
) -> None:
    gw = await start_gateway()
    for name in ("admin", "ann", "bob", "cat"):
        await gw.user(name)
    ann, bob = client_from(gw, clients, "ann"), client_from(gw, clients, "bob")
    made = await ann.post("/api/groups", json={"name": "crew", "roster": ["steve"]})
    assert made.status_code == 201, made.text
    gid = made.json()["id"]
    url = f"/api/groups/{gid}"
    assert (await ann.post(f"{url}/vps", json={"vpId": "linus"})).status_code == 200
    assert (await ann.delete(f"{url}/vps/steve")).status_code == 200
    for who in ("bob", "cat"):
        assert (await ann.post(f"{url}/members", json={"username": who})).status_code == 200
    assert (await ann.delete(f"{url}/members/cat")).status_code == 200
    patch = {"name": "ops", "settings": {"fanoutCap": 2}}
    assert (await ann.patch(f"{url}/settings", json=patch)).status_code == 200
    assert (await ann.patch(url, json={"name": "ops-2"})).status_code == 200
    # A refused change is not recorded as one.
    assert (await bob.patch(f"{url}/settings", json={"name": "x"})).status_code == 403
    assert (await ann.put(f"{url}/owner", json={"username": "bob"})).status_code == 200
    assert (await ann.post(f"{url}/leave")).status_code == 204
    assert (await bob.delete(url)).status_code == 204

    entries = await audit(gw, target=gid)
    assert brief(entries) == [
        ("group_created", "ann", gid, ELSEWHERE),
        ("vp_added", "ann", gid, ELSEWHERE),
        ("vp_removed", "ann", gid, ELSEWHERE),
        ("member_added", "ann", gid, ELSEWHERE),
        ("member_added", "ann", gid, ELSEWHERE),
        ("member_removed", "ann", gid, ELSEWHERE),
        ("group_settings_changed", "ann", gid, ELSEWHERE),
        ("group_settings_changed", "ann", gid, ELSEWHERE),
        ("role_changed", "ann", gid, ELSEWHERE),
        ("member_left", "ann", gid, ELSEWHERE),
        ("group_deleted", "bob", gid, ELSEWHERE),
    ]
    details = [e["detail"] for e in entries]
    assert details[0] == {"name": "crew"}
    assert details[1] == {"vpId": "linus"} and details[2] == {"vpId": "steve"}
    assert details[3] == {"username": "bob"} and details[5] == {"username": "cat"}
    assert details[6] == {"name": "ops", "settings": {"fanoutCap": 2}}
    assert details[7] == {"name": "ops-2"}
    assert details[8] == {
        "scope": "group",
        "username": "bob",
        "role": "owner",
        "previousOwner": "ann",
    }
    assert details[10] == {"name": "ops-2"}


async def test_member_and_settings_frames_over_the_websocket(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway()
    for name in ("admin", "ann", "bob"):
        await gw.user(name)
    made = await gw.http.post(
        "/api/groups", json={"name": "crew", "roster": ["steve"]}, headers=gw.auth("ann")
    )
    gid = made.json()["id"]
    ws = await WsClient.open(gw, "ann", local_addr=(ELSEWHERE, 0))
    try:
        for n, (frame, answer) in enumerate(
            (
                ({"type": "invite_member", "username": "bob"}, "invited"),
                ({"type": "remove_member", "username": "bob"}, "removed"),
                ({"type": "update_group_settings", "name": "ops"}, "settings"),
                ({"type": "yeaft_settings", "settings": {"autoApprove": True}}, None),
                ({"type": "invite_member", "username": "bob"}, "invited"),
                ({"type": "transfer_ownership", "username": "bob"}, "owner"),
                ({"type": "leave_group"}, "left"),
            )
        ):
            await ws.send({**frame, "groupId": gid, "requestId": f"r{n}"})
            reply = await ws.seen(lambda f, n=n: f.get("requestId") == f"r{n}")
            assert reply.get("action") == answer and reply["type"] != "error", reply
    finally:
        await ws.close()
    bob = await WsClient.open(gw, "bob", local_addr=(ELSEWHERE, 0))
    try:
        await bob.send({"type": "delete_group", "groupId": gid})
        # Frames other than chat are handled one after another: the pong
        # comes once the deletion (and its recording) is done.
        await bob.send({"type": "ping"})
        await bob.seen(lambda f: f["type"] == "pong")
        assert not [f for f in bob.received if f["type"] == "error"], bob.received
    finally:
        await bob.close()

    entries = await audit(gw, target=gid)
    assert brief(entries)[0] == ("group_created", "ann", gid, "127.0.0.1")
    assert brief(entries[1:]) == [
        ("member_added", "ann", gid, ELSEWHERE),
        ("member_removed", "ann", gid, ELSEWHERE),
        ("group_settings_changed", "ann", gid, ELSEWHERE),
        ("group_settings_changed", "ann", gid, ELSEWHERE),
        ("member_added", "ann", gid, ELSEWHERE),
        ("role_changed", "ann", gid, ELSEWHERE),
        ("member_left", "ann", gid, ELSEWHERE),
        ("group_deleted", "bob", gid, ELSEWHERE),
    ]
    assert entries[3]["detail"] == {"name": "ops"}
    assert entries[4]["detail"] == {"settings": {"autoApprove": True}}


async def test_mcp_server_changes_are_recorded_without_their_secrets(
    start_gateway: StartGateway, clients: list[httpx.AsyncClient]
) -> None:
    gw = await start_gateway()
    await gw.user("admin")
    admin = client_from(gw, clients, "admin")
    stdio = {
        "name": "fx",
        "command": sys.executable,
        "args": [MCP_FIXTURE, "stdio", f"--token={SECRET_ENV}"],
        "env": {"FIXTURE_SECRET": SECRET_ENV},
    }
    web = {
        "name": "web",
        "url": f"http://127.0.0.1:9/mcp?key={SECRET_HEADER}",
        "headers": {"Authorization": f"Bearer {SECRET_HEADER}"},
    }
    for body in (stdio, web):
        added = await admin.post("/api/mcp/servers", json=body)
        assert added.status_code == 201, added.text
    assert (await admin.delete("/api/mcp/servers/web")).status_code == 204

    entries = await audit(gw, actor="admin")
    mcp = [e for e in entries if e["action"].startswith("mcp_")]
    assert brief(mcp) == [
        ("mcp_server_added", "admin", "fx", ELSEWHERE),
        ("mcp_server_added", "admin", "web", ELSEWHERE),
        ("mcp_server_removed", "admin", "web", ELSEWHERE),
    ]
    assert mcp[0]["detail"] == {"transport": "stdio", "envNames": ["FIXTURE_SECRET"]}
    assert mcp[1]["detail"] == {
        "transport": "http",
        "host": "127.0.0.1",
        "headerNames": ["Authorization"],
    }
    page = await gw.http.get("/api/admin/audit", headers=gw.auth("admin"))
    export = await gw.http.get("/api/admin/audit.jsonl", headers=gw.auth("admin"))
    assert page.status_code == 200 and export.status_code == 200
    for text in (page.text, export.text):
        assert "mcp_server_added" in text
        assert SECRET_ENV not in text and SECRET_HEADER not in text


async def test_yeaft_user_on_the_command_line_is_recorded(
    start_gateway: StartGateway, store_factory: StoreFactory
) -> None:
    gw = await start_gateway(login_max_failures=2, login_lockout_s=600)
    await gw.user("admin")
    added = run_cli(store_factory, "user", "add", "ann", "--password-stdin", stdin=PASSWORD)
    assert added.returncode == 0, added.stderr
    unlocked = run_cli(store_factory, "user", "unlock", "ann")
    assert unlocked.returncode == 0, unlocked.stderr
    entries = await audit(gw, target="ann")
    assert brief(entries) == [
        ("user_added", None, "ann", None),
        ("lockout_lifted", None, "ann", None),
    ]
    assert entries[0]["detail"]["via"] == "cli" and entries[0]["detail"]["osUser"]
    assert entries[1]["detail"]["wasLocked"] is False


async def _refuse_audit_writes(gw: Gateway, factory: StoreFactory) -> None:
    """Make the store refuse every audit append, and nothing else (a real failure)."""
    if factory.url is None:
        conn = sqlite3.connect(factory.data_dir / DB_FILENAME)
        try:
            conn.execute(
                "CREATE TRIGGER audit_refused BEFORE INSERT ON audit_log"
                " BEGIN SELECT RAISE(ABORT, 'the disk is full'); END"
            )
            conn.commit()
        finally:
            conn.close()
        return
    client = aioredis.Redis.from_url(factory.url)
    try:
        # A key of another type where the stream should be: XADD fails (WRONGTYPE).
        await client.delete(f"{factory.prefix}:audit")
        await client.set(f"{factory.prefix}:audit", "not a stream")
    finally:
        await client.aclose()


async def test_a_failing_audit_write_does_not_fail_the_action(
    start_gateway: StartGateway, store_factory: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    gw = await start_gateway()
    await gw.user("ann")
    await _refuse_audit_writes(gw, store_factory)
    with caplog.at_level(logging.WARNING, logger="gateway.audit"):
        right = await gw.http.post("/api/login", json={"username": "ann", "password": PASSWORD})
        wrong = await gw.http.post("/api/login", json={"username": "ann", "password": "nope"})
        made = await gw.http.post(
            "/api/groups", json={"name": "crew", "roster": ["steve"]}, headers=gw.auth("ann")
        )
    assert right.status_code == 200, right.text
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "unauthorized"
    assert made.status_code == 201, made.text
    said = [r.getMessage() for r in caplog.records if r.name == "gateway.audit"]
    assert len(said) == 3, said
    assert all("the audit log did not record" in line for line in said)
    assert "sign_in by ann" in said[0] and "group_created by ann" in said[2]


async def test_sign_ins_with_the_provider_and_their_failures(signed: Signed) -> None:
    async with signed() as (gateway, _), httpx.AsyncClient() as http:
        done = await http.get(await sign_in(http, await begin(http, gateway), "alice"))
        assert done.status_code == 200
        callback = await sign_in(http, await begin(http, gateway), "alice")
        forged = re.sub(r"state=[^&]+", "state=forged", callback)
        assert (await http.get(forged)).status_code == 400
        store = await gateway.runtime.store()
        page = await store.read_audit(AuditQuery())
    entries = list(reversed(page.entries))
    assert [(e.action, e.actor, e.target, e.address) for e in entries] == [
        (AuditAction.SIGN_IN, "alice", "alice", "127.0.0.1"),
        (AuditAction.SIGN_IN_FAILED, None, None, "127.0.0.1"),
    ]
    assert entries[0].detail["method"] == "oidc" and entries[0].detail["issuer"]
    assert entries[1].detail == {
        "method": "oidc",
        "reason": "this sign-in's state does not match the one it began with",
    }


async def test_a_conversations_settings_and_deletion_are_recorded_without_its_title(
    start_gateway: StartGateway, clients: list[httpx.AsyncClient]
) -> None:
    gw = await start_gateway()
    await gw.user("admin")
    await gw.user("ann")
    ann = client_from(gw, clients, "ann")
    made = await ann.post("/api/conversations", json={"vpId": "linus"})
    assert made.status_code == 201, made.text
    cid = made.json()["conversationId"]
    url = f"/api/conversations/{cid}"
    patch = {"title": "my private plans", "settings": {"autoApprove": True}}
    assert (await ann.patch(f"{url}/settings", json=patch)).status_code == 200
    assert (await ann.delete(url)).status_code == 204
    entries = await audit(gw, target=cid)
    assert brief(entries) == [
        ("group_settings_changed", "ann", cid, ELSEWHERE),
        ("group_deleted", "ann", cid, ELSEWHERE),
    ]
    assert entries[0]["detail"] == {
        "kind": "conversation",
        "settings": {"autoApprove": True},
        "renamed": True,
    }
    assert entries[1]["detail"] == {"kind": "conversation"}
    assert (
        "my private plans"
        not in (await gw.http.get("/api/admin/audit.jsonl", headers=gw.auth("admin"))).text
    )


async def test_role_changes_password_changes_and_ended_sessions(
    start_gateway: StartGateway, clients: list[httpx.AsyncClient]
) -> None:
    gw = await start_gateway()
    for name in ("admin", "ann"):
        await gw.user(name)
    admin = client_from(gw, clients, "admin")
    made = await admin.put("/api/admin/users/ann/role", json={"role": "admin"})
    assert made.status_code == 200, made.text
    back = await admin.put("/api/admin/users/ann/role", json={"role": "member"})
    assert back.status_code == 200, back.text
    # ann signs in a second time, changes her password (ending the other
    # session), and ends the rest of her sessions but this one.
    second = await gw.http.post("/api/login", json={"username": "ann", "password": PASSWORD})
    assert second.status_code == 200
    ann = client_from(gw, clients, "ann")
    new = "a brand new passphrase 42"
    changed = await ann.post("/api/me/password", json={"current": PASSWORD, "new": new})
    assert changed.status_code == 200, changed.text
    ann.headers["Authorization"] = f"Bearer {changed.json()['token']}"
    assert (await ann.delete("/api/me/sessions")).status_code == 200

    entries = await audit(gw, target="ann")
    changes = [e for e in entries if e["action"] not in ("sign_in",)]
    assert brief(changes) == [
        ("role_changed", "admin", "ann", ELSEWHERE),
        ("role_changed", "admin", "ann", ELSEWHERE),
        ("password_changed", "ann", "ann", ELSEWHERE),
        ("sessions_ended", "ann", "ann", ELSEWHERE),
    ]
    assert changes[0]["detail"] == {"scope": "instance", "role": "admin", "previousRole": "member"}
    assert changes[1]["detail"] == {"scope": "instance", "role": "member", "previousRole": "admin"}
    assert changes[2]["detail"] == {"endedSessions": 1}
    assert changes[3]["detail"] == {"ended": 0, "allButCurrent": True}
    export = await gw.http.get("/api/admin/audit.jsonl", headers=gw.auth("admin"))
    assert new not in export.text and PASSWORD not in export.text
