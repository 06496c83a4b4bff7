"""Invite links through an OpenID sign-in: the real ``oidc-provider`` and the real gateway.

A link followed with "Sign in with ..." (``/api/auth/oidc/login?invite=``)
is checked when the sign-in begins and travels in its signed state (the id
only, never the secret); when the person comes back, the just-in-time
account is made, the link counted and the group joined. A link that is used
up, tampered with, or revoked while the person was at the provider is
refused with a page, never a traceback.
"""

from __future__ import annotations

from urllib.parse import urljoin

import httpx
import jwt as pyjwt

from store.audit import AuditAction, AuditQuery
from tests.fixtures.browser import LiveGateway
from tests.fixtures.oidc import Signed
from tests.test_oidc import me, sign_in


async def admin_client(gateway: LiveGateway) -> httpx.AsyncClient:
    http = httpx.AsyncClient(base_url=gateway.url)
    login = await http.post(
        "/api/login", json={"username": "admin", "password": "a-long-admin-password"}
    )
    assert login.status_code == 200
    http.headers["Authorization"] = f"Bearer {login.json()['token']}"
    return http


async def begin(http: httpx.AsyncClient, gateway: LiveGateway, token: str) -> httpx.Response:
    return await http.get(urljoin(gateway.url, f"/api/auth/oidc/login?invite={token}"))


async def test_a_first_sign_in_with_a_link_makes_the_account_and_joins_the_group(
    signed: Signed,
) -> None:
    async with signed() as (gateway, _):
        store = await gateway.runtime.store()
        group = await gateway.runtime.create_group("Team", ["linus"], members=["admin"])
        admin = await admin_client(gateway)
        made = await admin.post("/api/admin/invites", json={"groupId": group.id})
        link = made.json()
        secret = link["token"].split(".", 1)[1]

        async with httpx.AsyncClient() as http:
            started = await begin(http, gateway, link["token"])
            assert started.status_code == 302
            # The sign-in's state carries the invite's id, never its secret.
            sealed = http.cookies.get("yeaft_oidc") or ""
            claims = pyjwt.decode(sealed, options={"verify_signature": False})
            assert claims["invite"] == link["id"] and secret not in sealed
            done = await http.get(await sign_in(http, started.headers["location"], "alice"))
            assert done.status_code == 200 and "Signed in." in done.text
            assert f"url=/#g={group.id}" in done.text  # the page moves on into the group
            assert await me(http, gateway) == "alice"
            groups = (await http.get(urljoin(gateway.url, "/api/groups"))).json()["groups"]
            assert [g["id"] for g in groups] == [group.id]
        stored = await store.get_invite(link["id"])
        assert stored is not None and stored.uses == 1
        redeemed = (await store.read_audit(AuditQuery(action=AuditAction.INVITE_REDEEMED))).entries
        assert [(e.actor, e.detail["newAccount"]) for e in redeemed] == [("alice", True)]

        # The link had one use: the next person is turned away before the provider.
        async with httpx.AsyncClient() as http:
            spent = await begin(http, gateway, link["token"])
            assert spent.status_code == 410 and "used as many times" in spent.text
            assert "yeaft_oidc" not in http.cookies
            head = link["token"].split(".")[0]
            tampered = await begin(http, gateway, f"{head}.{'A' * 43}")
            assert tampered.status_code == 404 and "is not valid" in tampered.text
            assert "Traceback" not in tampered.text
        await admin.aclose()


async def test_a_link_revoked_during_the_sign_in_lets_the_person_in_without_the_group(
    signed: Signed,
) -> None:
    async with signed() as (gateway, _):
        store = await gateway.runtime.store()
        group = await gateway.runtime.create_group("Team", ["linus"], members=["admin"])
        admin = await admin_client(gateway)
        link = (await admin.post("/api/admin/invites", json={"groupId": group.id})).json()
        async with httpx.AsyncClient() as http:
            started = await begin(http, gateway, link["token"])
            callback = await sign_in(http, started.headers["location"], "bob")
            revoked = await admin.delete(f"/api/admin/invites/{link['id']}")
            assert revoked.status_code == 200
            done = await http.get(callback)
            assert done.status_code == 200
            assert "the invite could not be used: this invite link was withdrawn" in done.text
            assert await me(http, gateway) == "bob"
        after = await store.get_group(group.id)
        assert after is not None and after.members == ["admin"]
        stored = await store.get_invite(link["id"])
        assert stored is not None and stored.uses == 0
        await admin.aclose()


async def test_someone_with_an_account_signing_in_with_a_link_joins_its_group(
    signed: Signed,
) -> None:
    async with signed() as (gateway, _):
        store = await gateway.runtime.store()
        group = await gateway.runtime.create_group("Team", ["linus"], members=["admin"])
        admin = await admin_client(gateway)
        link = (await admin.post("/api/admin/invites", json={"groupId": group.id})).json()
        # Alice has signed in before: her account exists.
        async with httpx.AsyncClient() as first:
            start = (await first.get(urljoin(gateway.url, "/api/auth/oidc/login"))).headers
            await first.get(await sign_in(first, start["location"], "alice"))
        async with httpx.AsyncClient() as http:
            started = await begin(http, gateway, link["token"])
            await http.get(await sign_in(http, started.headers["location"], "alice"))
            assert await me(http, gateway) == "alice"
        after = await store.get_group(group.id)
        assert after is not None and "alice" in after.members
        redeemed = (await store.read_audit(AuditQuery(action=AuditAction.INVITE_REDEEMED))).entries
        assert [(e.actor, e.detail["newAccount"]) for e in redeemed] == [("alice", False)]
        await admin.aclose()
