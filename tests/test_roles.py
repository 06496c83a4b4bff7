"""Instance roles (admin, member) stored with the account, and every route and frame checked.

``YEAFT_ADMINS`` only seeds roles: a role an administrator sets wins over
it, and the last administrator cannot be demoted. The walk at the end calls
every HTTP route of the real app as nobody, as a stranger to a group and as
a member who is no administrator, and sends every group frame as a
stranger: nobody is let in where they do not belong. Both store backends.
"""

from __future__ import annotations

import re
import typing
from typing import Any

import httpx
from fastapi.routing import APIRoute

from protocol import ClientFrame
from tests.fixtures.gateway import Gateway, StartGateway, WsClient, every_route

# Routes anyone may call: signing in, and what the login page and probes read.
PUBLIC = {
    "/api/login",
    "/api/logout",
    "/api/auth/providers",
    "/api/auth/oidc/login",
    "/api/auth/oidc/callback",
    # Following an invite link: the link's secret is the credential (test_invites.py).
    "/api/invites/lookup",
    "/api/invites/accept",
}

# Routes outside /api that check the bearer token themselves: the MCP server
# and the A2A agents (a stranger to a group: tests/test_a2a_serve.py).
SELF_AUTH = {
    "/mcp",
    "/a2a/groups",
    "/a2a/groups/{group_id}",
    "/a2a/groups/{group_id}/.well-known/agent-card.json",
    "/a2a/groups/{group_id}/vps/{vp_id}",
    "/a2a/groups/{group_id}/vps/{vp_id}/.well-known/agent-card.json",
}

# What the admin panel calls (gateway/static/admin_*.js).
ADMIN_PANEL_ROUTES = {
    ("GET", "/api/admin/users"),
    ("PUT", "/api/admin/users/{username}/role"),
    ("PUT", "/api/admin/users/{username}/disabled"),
    ("DELETE", "/api/admin/users/{username}/sessions"),
    ("GET", "/api/admin/lockouts"),
    ("DELETE", "/api/admin/lockouts/{username}"),
    ("GET", "/api/admin/groups"),
    ("PUT", "/api/admin/groups/{group_id}/owner"),
    ("DELETE", "/api/admin/groups/{group_id}"),
    ("GET", "/api/admin/audit"),
}


async def role(gw: Gateway, user: str) -> str:
    reply = await gw.http.get("/api/me", headers=gw.auth(user))
    return str(reply.json()["role"])


async def test_admins_seed_roles_and_a_set_role_wins(start_gateway: StartGateway) -> None:
    gw = await start_gateway(admins="root")
    for name in ("root", "bob", "carol"):
        await gw.user(name)
    assert [await role(gw, n) for n in ("root", "bob", "carol")] == ["admin", "member", "member"]

    listed = await gw.http.get("/api/admin/users", headers=gw.auth("root"))
    assert {p["username"]: p["role"] for p in listed.json()["people"]} == {
        "bob": "member",
        "carol": "member",
        "root": "admin",
    }
    refused = await gw.http.get("/api/admin/users", headers=gw.auth("bob"))
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    async with httpx.AsyncClient(base_url=gw.base_url) as nobody:
        assert (await nobody.get("/api/admin/users")).status_code == 401

    # The only administrator cannot step down; with a second one, they can.
    alone = await gw.http.put(
        "/api/admin/users/root/role", json={"role": "member"}, headers=gw.auth("root")
    )
    assert alone.status_code == 409 and "only administrator" in alone.json()["error"]["message"]
    made = await gw.http.put(
        "/api/admin/users/bob/role", json={"role": "admin"}, headers=gw.auth("root")
    )
    assert made.status_code == 200 and made.json()["role"] == "admin"
    assert (await gw.http.get("/api/admin/users", headers=gw.auth("bob"))).status_code == 200
    # Stored roles win over YEAFT_ADMINS, which names root.
    down = await gw.http.put(
        "/api/admin/users/root/role", json={"role": "member"}, headers=gw.auth("bob")
    )
    assert down.status_code == 200
    assert await role(gw, "root") == "member"
    assert (await gw.http.get("/api/admin/lockouts", headers=gw.auth("root"))).status_code == 403
    # The MCP servers follow the same role.
    listing = await gw.http.get("/api/mcp/servers", headers=gw.auth("bob"))
    assert listing.json()["canEdit"] is True
    bad = await gw.http.put(
        "/api/admin/users/bob/role", json={"role": "owner"}, headers=gw.auth("bob")
    )
    assert bad.status_code == 422
    missing = await gw.http.put(
        "/api/admin/users/nobody/role", json={"role": "admin"}, headers=gw.auth("bob")
    )
    assert missing.status_code == 404


def _path(route: APIRoute, ids: dict[str, str]) -> str:
    def fill(match: re.Match[str]) -> str:
        name = match.group(1).split(":")[0]
        return ids.get(name, "x")

    return re.sub(r"\{([^}]+)\}", fill, route.path)


async def test_every_route_and_frame_refuses_who_does_not_belong(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway(admins="root")
    for name in ("root", "olive", "mia", "sam"):
        await gw.user(name)
    made = await gw.http.post(
        "/api/groups", json={"name": "team", "roster": ["linus"]}, headers=gw.auth("olive")
    )
    gid = made.json()["id"]
    joined = await gw.http.post(
        f"/api/groups/{gid}/members", json={"username": "mia"}, headers=gw.auth("olive")
    )
    assert joined.status_code in (200, 201), joined.text
    conv = await gw.http.post(
        "/api/conversations", json={"vpId": "linus"}, headers=gw.auth("olive")
    )
    cid = conv.json()["conversationId"]
    ids = {
        "group_id": gid,
        "gid": gid,
        "conversation_id": cid,
        "cid": cid,
        "username": "olive",
        "name": "fx",
        "vp_id": "linus",
        "message_id": "msg_x",
        "thread_id": "msg_x",
        "task_id": "task_x",
        "file_id": "file_x",
        "path": "README.md",
        "invite_id": "inv_x",
    }
    routes = [
        r
        for r in every_route(gw.app.routes)
        if isinstance(r, APIRoute) and r.path.startswith("/api/") and r.path not in PUBLIC
    ]
    assert len(routes) > 40
    # Usage and quotas (gateway.usage_http) are walked like every other route.
    walked_paths = {r.path for r in routes}
    assert {"/api/admin/usage", "/api/admin/users/{username}/quota"} <= walked_paths
    # The admin panel's routes are walked like every other (and stay admin-only).
    walked = {(m, r.path) for r in routes for m in r.methods}
    assert ADMIN_PANEL_ROUTES <= walked, ADMIN_PANEL_ROUTES - walked
    # The inbox's routes are walked too: they read only the caller's own groups.
    assert {"/api/inbox", "/api/mentions"} <= {r.path for r in routes}
    problems: list[str] = []

    # No cookie jar: who calls is the Authorization header alone, or nobody.
    http = httpx.AsyncClient(base_url=gw.base_url, timeout=30)

    async def call(route: APIRoute, method: str, headers: dict[str, str]) -> httpx.Response:
        body: Any = {} if method in ("POST", "PUT", "PATCH") else None
        return await http.request(method, _path(route, ids), json=body, headers=headers)

    for route in routes:
        for method in sorted(route.methods - {"HEAD"}):
            anonymous = await call(route, method, {})
            if anonymous.status_code != 401:
                problems.append(f"{method} {route.path} as nobody: {anonymous.status_code}")
            scoped = "{" in route.path and not route.path.startswith("/api/mcp")
            admin_only = route.path.startswith("/api/admin")
            if scoped or admin_only:
                stranger = await call(route, method, gw.auth("sam"))
                if stranger.status_code < 400 or stranger.status_code >= 500:
                    problems.append(f"{method} {route.path} as a stranger: {stranger.status_code}")
            if admin_only:
                member = await call(route, method, gw.auth("mia"))
                if member.status_code != 403:
                    problems.append(f"{method} {route.path} as a member: {member.status_code}")
    # Endpoints outside /api that check the bearer token themselves refuse
    # nobody (what a stranger gets from the MCP server: tests/test_mcp_serve.py).
    own_auth = [r for r in every_route(gw.app.routes) if getattr(r, "path", None) in SELF_AUTH]
    assert {r.path for r in own_auth} == SELF_AUTH
    for route in own_auth:
        for method in sorted(route.methods - {"HEAD"}):
            anonymous = await http.request(method, route.path)
            if anonymous.status_code != 401:
                problems.append(f"{method} {route.path} as nobody: {anonymous.status_code}")
    await http.aclose()
    assert problems == []

    # Every client frame that names a group, sent by a stranger to it, is refused.
    values = {"text": "hello", "name": "x", "vp_id": "linus", "username": "mia"}
    values.update(request_id="q_1", answer="yes", message_id="msg_x", emoji="👍", pinned=True)
    values.update(thread_id="msg_x")
    client = await WsClient.open(gw, "sam")
    walked = []
    for model in typing.get_args(typing.get_args(ClientFrame)[0]):
        fields = model.model_fields
        if "group_id" not in fields:
            continue
        kind = fields["type"].default
        given = {k: values[k] for k in fields if k in values and fields[k].is_required()}
        frame = model.model_validate({"group_id": gid, **given})
        wire = frame.model_dump(by_alias=True, mode="json", exclude_none=True)
        walked.append(kind)
        if kind == "unsubscribe":
            continue  # answered by nothing: it ends only the caller's own subscription
        answer = await client.request(wire)
        assert answer["type"] == "error", (kind, answer)
        assert answer["code"] in ("forbidden", "not_found"), (kind, answer)
    assert len(walked) >= 15
    await client.close()
    # And nothing of the group changed.
    after = await gw.http.get(f"/api/groups/{gid}", headers=gw.auth("olive"))
    assert after.status_code == 200 and after.json()["name"] == "team"
    assert {"olive", "mia"} <= set(after.json()["members"])
    assert "sam" not in after.json()["members"]
    messages = await gw.http.get(f"/api/groups/{gid}/messages", headers=gw.auth("olive"))
    assert all(m.get("author") != "sam" for m in messages.json()["messages"])

    # A mention in the group reaches its member's list, never a stranger's.
    olive = await WsClient.open(gw, "olive")
    ack = await olive.request(
        {"type": "yeaft_session_chat", "groupId": gid, "text": "@mia look", "clientMessageId": "m"}
    )
    assert ack["type"] == "ack", ack
    await olive.close()
    mia = (await gw.http.get("/api/mentions", headers=gw.auth("mia"))).json()["mentions"]
    assert [m["messageId"] for m in mia] == [ack["messageId"]]
    assert (await gw.http.get("/api/mentions", headers=gw.auth("sam"))).json() == {"mentions": []}
    inbox = (await gw.http.get("/api/inbox", headers=gw.auth("sam"))).json()["groups"]
    assert gid not in {g["groupId"] for g in inbox}
