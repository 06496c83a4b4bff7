"""Invite links over HTTP, on both store backends: who may make them, and following them.

An administrator makes, lists and revokes links; a group's owner makes
links to their group only when ``YEAFT_OWNER_INVITES`` allows it; members
and strangers never. Following a link makes the account, joins the group
and signs in; a person signed in joins; expired, used-up, revoked and
tampered links get a clear answer (a page for the browser, a typed error
for the JSON API), never a traceback. The secret is shown once and never
stored or logged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import httpx

from gateway import invites
from gateway.log_filters import _RedactTokens
from store.audit import AuditAction, AuditQuery
from store.invites import InviteRecord
from tests.fixtures.gateway import Gateway, StartGateway

NEW_PASSWORD = "a fine long passphrase"


async def team(start_gateway: StartGateway, **settings: Any) -> tuple[Gateway, str]:
    """A gateway with root (administrator), olive (owns "team"), mia (in it) and sam (not)."""
    gw = await start_gateway(**{"admins": "root", **settings})
    for name in ("root", "olive", "mia", "sam"):
        await gw.user(name)
    made = await gw.http.post(
        "/api/groups", json={"name": "team", "roster": ["linus"]}, headers=gw.auth("olive")
    )
    gid = str(made.json()["id"])
    added = await gw.http.post(
        f"/api/groups/{gid}/members", json={"username": "mia"}, headers=gw.auth("olive")
    )
    assert added.status_code == 200, added.text
    return gw, gid


async def make(gw: Gateway, who: str, **body: Any) -> httpx.Response:
    return await gw.http.post("/api/admin/invites", json=body, headers=gw.auth(who))


async def audit(gw: Gateway, action: AuditAction) -> list[Any]:
    store = await gw.store()
    return (await store.read_audit(AuditQuery(action=action))).entries


async def members(gw: Gateway, gid: str) -> list[str]:
    group = await (await gw.store()).get_group(gid)
    assert group is not None
    return list(group.members)


async def test_an_administrator_makes_lists_and_revokes_links(
    start_gateway: StartGateway,
) -> None:
    gw, gid = await team(start_gateway)
    made = await make(gw, "root", groupId=gid, maxUses=2, expiresIn=3600)
    assert made.status_code == 201, made.text
    link = made.json()
    assert link["groupId"] == gid and link["groupName"] == "team"
    assert (link["maxUses"], link["uses"], link["state"], link["createdBy"]) == (
        2,
        0,
        "valid",
        "root",
    )
    assert 3590 < link["expiresAt"] - time.time() <= 3600
    assert link["url"] == f"{gw.base_url}/invite/{link['token']}"
    secret = link["token"].split(".", 1)[1]
    assert len(secret) >= 43  # 32 random bytes

    # The store keeps a hash of the secret, never the secret; listing never shows it.
    stored = await (await gw.store()).get_invite(link["id"])
    assert stored is not None and secret not in stored.secret_hash
    assert stored.secret_hash == invites.secret_hash(secret)
    listed = await gw.http.get("/api/admin/invites", headers=gw.auth("root"))
    assert listed.status_code == 200 and secret not in listed.text
    assert [i["id"] for i in listed.json()["invites"]] == [link["id"]]
    assert "token" not in listed.json()["invites"][0]
    account_only = await make(gw, "root")
    assert account_only.status_code == 201 and account_only.json()["groupId"] is None
    assert account_only.json()["maxUses"] == 1
    by_group = await gw.http.get(f"/api/admin/invites?groupId={gid}", headers=gw.auth("root"))
    assert [i["id"] for i in by_group.json()["invites"]] == [link["id"]]

    # Bounds are typed refusals.
    for body in ({"maxUses": 0}, {"expiresIn": 5}, {"expiresIn": 10**9}, {"extra": 1}):
        bad = await make(gw, "root", **body)
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_request"
    for group_id in ("grp_nope", "../x", "x" * 200):
        unknown_group = await make(gw, "root", groupId=group_id)
        assert unknown_group.status_code == 404, unknown_group.text

    revoked = await gw.http.delete(f"/api/admin/invites/{link['id']}", headers=gw.auth("root"))
    assert revoked.status_code == 200 and revoked.json()["state"] == "revoked"
    again = await gw.http.delete(f"/api/admin/invites/{link['id']}", headers=gw.auth("root"))
    assert again.status_code == 200 and again.json()["revokedAt"] == revoked.json()["revokedAt"]
    missing = await gw.http.delete("/api/admin/invites/inv_nope", headers=gw.auth("root"))
    assert missing.status_code == 404

    # Members and strangers may do none of it.
    for who in ("olive", "mia", "sam"):
        assert (await make(gw, who)).status_code == 403
        assert (await make(gw, who, groupId=gid)).status_code == 403
        assert (await gw.http.get("/api/admin/invites", headers=gw.auth(who))).status_code == 403
        url = f"/api/admin/invites/{account_only.json()['id']}"
        assert (await gw.http.delete(url, headers=gw.auth(who))).status_code == 403

    created = await audit(gw, AuditAction.INVITE_CREATED)
    assert {(e.actor, e.target) for e in created} == {
        ("root", link["id"]),
        ("root", account_only.json()["id"]),
    }
    assert all(secret not in str(e.detail) for e in created)
    revokes = await audit(gw, AuditAction.INVITE_REVOKED)
    assert [(e.actor, e.target) for e in revokes] == [("root", link["id"])]


async def test_a_group_owner_makes_links_only_when_the_setting_allows(
    start_gateway: StartGateway,
) -> None:
    gw, gid = await team(start_gateway)
    url = f"/api/groups/{gid}/invites"

    async def group_invite(server: Gateway, who: str) -> httpx.Response:
        return await server.http.post(url, json={"maxUses": 3}, headers=server.auth(who))

    off = await group_invite(gw, "olive")
    assert off.status_code == 403
    assert off.json()["error"]["detail"]["reason"] == "owner_invites_off"
    assert (await gw.http.get("/api/me", headers=gw.auth("olive"))).json()["ownerInvites"] is False
    member = await group_invite(gw, "mia")
    assert member.status_code == 403 and member.json()["error"]["detail"]["reason"] == "not_owner"
    stranger = await group_invite(gw, "sam")
    assert stranger.status_code == 404
    admin = await group_invite(gw, "root")
    assert admin.status_code == 201 and admin.json()["groupId"] == gid

    # A second gateway on the same deployment and store, with owners allowed.
    secret = gw.settings.jwt_secret
    allowed = await start_gateway(gw.runtime, admins="root", owner_invites=True, jwt_secret=secret)
    allowed.tokens.update(gw.tokens)
    mine = await group_invite(allowed, "olive")
    assert mine.status_code == 201, mine.text
    assert mine.json()["groupId"] == gid and mine.json()["maxUses"] == 3
    assert mine.json()["url"].startswith(f"{allowed.base_url}/invite/inv_")
    me = await allowed.http.get("/api/me", headers=allowed.auth("olive"))
    assert me.json()["ownerInvites"] is True
    assert (await group_invite(allowed, "mia")).status_code == 403
    assert (await group_invite(allowed, "sam")).status_code == 404
    # An owner's link is to their group only: a link for an account stays the administrators'.
    assert (await make(allowed, "olive")).status_code == 403
    olive_made = await audit(gw, AuditAction.INVITE_CREATED)
    assert [e.actor for e in olive_made] == ["olive", "root"]


async def test_following_a_link_makes_the_account_joins_the_group_and_signs_in(
    start_gateway: StartGateway,
) -> None:
    gw, gid = await team(start_gateway)
    link = (await make(gw, "root", groupId=gid, maxUses=1)).json()
    token = link["token"]
    async with httpx.AsyncClient(base_url=gw.base_url) as browser:
        page = await browser.get(f"/invite/{token}")
        assert page.status_code == 200 and "<title>Yeaft</title>" in page.text
        assert page.headers["referrer-policy"] == "no-referrer"
        assert page.headers["cache-control"] == "no-store"
        preview = await browser.post("/api/invites/lookup", json={"token": token})
        assert preview.status_code == 200
        assert preview.json()["groupName"] == "team" and preview.json()["invitedBy"] == "root"
        assert preview.json()["usesLeft"] == 1

        # A weak password and a taken name are refused, and cost the link no use.
        weak = await browser.post(
            "/api/invites/accept", json={"token": token, "username": "nina", "password": "short"}
        )
        assert weak.status_code == 422 and weak.json()["error"]["field"] == "password"
        taken = await browser.post(
            "/api/invites/accept",
            json={"token": token, "username": "MIA", "password": NEW_PASSWORD},
        )
        assert taken.status_code == 409 and taken.json()["error"]["field"] == "username"
        bad_name = await browser.post(
            "/api/invites/accept",
            json={"token": token, "username": "a b", "password": NEW_PASSWORD},
        )
        assert bad_name.status_code == 422 and bad_name.json()["error"]["field"] == "username"

        done = await browser.post(
            "/api/invites/accept",
            json={
                "token": token,
                "username": "nina",
                "displayName": "  Nina  Simone ",
                "password": NEW_PASSWORD,
            },
        )
        assert done.status_code == 200, done.text
        assert done.json()["username"] == "nina" and done.json()["groupId"] == gid
        assert "yeaft_session" in done.headers["set-cookie"]
        me = await browser.get("/api/me")  # the session cookie
        assert me.json()["username"] == "nina" and me.json()["displayName"] == "Nina Simone"
        assert me.json()["role"] == "member" and me.json()["hasPassword"] is True
        groups = await browser.get("/api/groups")
        assert [g["id"] for g in groups.json()["groups"]] == [gid]
    assert "nina" in await members(gw, gid)
    # The password set works for a login of its own.
    login = await gw.http.post("/api/login", json={"username": "nina", "password": NEW_PASSWORD})
    assert login.status_code == 200

    # The link had one use: it is spent now, for the API and for the browser.
    async with httpx.AsyncClient(base_url=gw.base_url) as other:
        spent = await other.post(
            "/api/invites/accept",
            json={"token": token, "username": "otto", "password": NEW_PASSWORD},
        )
        assert spent.status_code == 409
        assert spent.json()["error"]["detail"]["reason"] == "used_up"
        page = await other.get(f"/invite/{token}")
        assert page.status_code == 410 and "used as many times" in page.text
        assert "Traceback" not in page.text
    assert await (await gw.store()).get_user("otto") is None

    redeemed = await audit(gw, AuditAction.INVITE_REDEEMED)
    assert [(e.actor, e.target, e.detail["groupId"]) for e in redeemed] == [
        ("nina", link["id"], gid)
    ]
    assert [e.target for e in await audit(gw, AuditAction.USER_ADDED)] == ["nina"]
    joined = await audit(gw, AuditAction.MEMBER_ADDED)
    assert ("nina", gid) in {(e.actor, e.target) for e in joined}


async def test_a_link_for_an_account_only_and_a_name_in_yeaft_admins(
    start_gateway: StartGateway,
) -> None:
    # YEAFT_ADMINS names "boss", who has no account yet: a link is no way to become them.
    gw, _ = await team(start_gateway, admins="root,boss")
    token = (await make(gw, "root")).json()["token"]
    async with httpx.AsyncClient(base_url=gw.base_url) as browser:
        done = await browser.post(
            "/api/invites/accept",
            json={"token": token, "username": "boss", "password": NEW_PASSWORD},
        )
        assert done.status_code == 200 and done.json()["groupId"] is None
        me = await browser.get("/api/me")
        assert me.json()["role"] == "member"


async def test_two_people_racing_for_the_last_use_one_gets_it(
    start_gateway: StartGateway,
) -> None:
    gw, gid = await team(start_gateway)
    token = (await make(gw, "root", groupId=gid)).json()["token"]

    async def accept(name: str) -> httpx.Response:
        async with httpx.AsyncClient(base_url=gw.base_url, timeout=30) as browser:
            body = {"token": token, "username": name, "password": NEW_PASSWORD}
            return await browser.post("/api/invites/accept", json=body)

    replies = await asyncio.gather(accept("pia"), accept("quin"))
    assert sorted(r.status_code for r in replies) == [200, 409]
    winner = next(r.json()["username"] for r in replies if r.status_code == 200)
    store = await gw.store()
    assert [await store.get_user(n) is not None for n in ("pia", "quin")].count(True) == 1
    assert winner in await members(gw, gid)
    stored = await store.list_invites(gid)
    assert [i.uses for i in stored] == [1]


async def test_a_person_signed_in_joins_the_group_of_a_link(start_gateway: StartGateway) -> None:
    gw, gid = await team(start_gateway)
    link = (await make(gw, "root", groupId=gid, maxUses=5)).json()
    joined = await gw.http.post(
        "/api/invites/join", json={"token": link["token"]}, headers=gw.auth("sam")
    )
    assert joined.status_code == 200 and joined.json() == {"groupId": gid, "joined": True}
    assert "sam" in await members(gw, gid)
    # Following it again, or as someone in the group already, costs the link nothing.
    for who in ("sam", "mia"):
        again = await gw.http.post(
            "/api/invites/join", json={"token": link["token"]}, headers=gw.auth(who)
        )
        assert again.status_code == 200 and again.json()["joined"] is False
    stored = await (await gw.store()).get_invite(link["id"])
    assert stored is not None and stored.uses == 1
    # An account-only link has no group to join.
    account_only = (await make(gw, "root")).json()["token"]
    refused = await gw.http.post(
        "/api/invites/join", json={"token": account_only}, headers=gw.auth("sam")
    )
    assert refused.status_code == 409 and refused.json()["error"]["detail"]["reason"] == "no_group"
    async with httpx.AsyncClient(base_url=gw.base_url) as nobody:
        anonymous = await nobody.post("/api/invites/join", json={"token": link["token"]})
        assert anonymous.status_code == 401


async def test_expired_revoked_tampered_and_orphaned_links_are_refused_clearly(
    start_gateway: StartGateway,
) -> None:
    gw, gid = await team(start_gateway)
    store = await gw.store()
    # Expired: an invite made an hour ago for a minute, stored as the gateway would.
    invite_id, hashed, expired = invites.new_token()
    now = time.time()
    await store.create_invite(
        InviteRecord(
            id=invite_id,
            secret_hash=hashed,
            created_by="root",
            created_at=now - 3600,
            expires_at=now - 3540,
            max_uses=1,
            group_id=gid,
        )
    )
    revoked_link = (await make(gw, "root", groupId=gid)).json()
    await gw.http.delete(f"/api/admin/invites/{revoked_link['id']}", headers=gw.auth("root"))
    good = (await make(gw, "root", groupId=gid)).json()["token"]
    head, secret = good.split(".")
    flipped = secret[:-1] + ("A" if secret[-1] != "A" else "B")
    # The group of this one is deleted before it is followed.
    other = await gw.http.post("/api/groups", json={"name": "gone"}, headers=gw.auth("olive"))
    orphan = (await make(gw, "root", groupId=other.json()["id"])).json()["token"]
    deleted = await gw.http.delete(f"/api/groups/{other.json()['id']}", headers=gw.auth("olive"))
    assert deleted.status_code == 204

    cases = [
        (expired, 409, "expired", 410, "has expired"),
        (revoked_link["token"], 409, "revoked", 410, "was withdrawn"),
        (f"{head}.{flipped}", 404, "invalid", 404, "is not valid"),
        (f"{head}.", 404, "invalid", 404, "is not valid"),
        ("inv_0123456789abcdef." + "x" * 43, 404, "invalid", 404, "is not valid"),
        ("not-a-link-at-all", 404, "invalid", 404, "is not valid"),
        (orphan, 409, "group_gone", 410, "no longer exists"),
    ]
    async with httpx.AsyncClient(base_url=gw.base_url) as browser:
        for token, status, reason, page_status, words in cases:
            for route, body in (
                ("/api/invites/lookup", {"token": token}),
                (
                    "/api/invites/accept",
                    {"token": token, "username": "eve", "password": NEW_PASSWORD},
                ),
            ):
                reply = await browser.post(route, json=body)
                assert reply.status_code == status, (token, route, reply.text)
                error = reply.json()["error"]
                assert error["detail"]["reason"] == reason and words in error["message"]
            page = await browser.get(f"/invite/{token}")
            assert page.status_code == page_status, (token, page.text)
            assert page.headers["content-type"].startswith("text/html")
            assert words in page.text and "Traceback" not in page.text
        joined = await gw.http.post(
            "/api/invites/join", json={"token": expired}, headers=gw.auth("sam")
        )
        assert joined.status_code == 409 and joined.json()["error"]["detail"]["reason"] == "expired"
    assert await store.get_user("eve") is None
    assert "sam" not in await members(gw, gid)
    # The good link was never counted by any of it.
    assert [i.uses for i in await store.list_invites(gid) if i.revoked_at is None] == [0, 0]


def test_links_secrets_are_hidden_in_log_lines() -> None:
    token = "inv_0123456789abcdef.S3cr3t-S3cr3t_S3cr3t-S3cr3t_S3cr3t-S3cr3t_S3c"
    access = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d', None, None
    )
    access.args = ("127.0.0.1:5", "GET", f"/invite/{token}", "1.1", 200)
    # A line with the path in its message rather than its arguments.
    line = f"GET /api/auth/oidc/login?invite={token}&x=1"
    oidc = logging.LogRecord("uvicorn.error", logging.INFO, __file__, 1, line, None, None)
    for record in (access, oidc):
        _RedactTokens().filter(record)
        assert "S3cr3t" not in record.getMessage()
    assert "/invite/[redacted]" in access.getMessage()
    assert "invite=[redacted]&x=1" in oidc.getMessage()
