"""Sign-in with an OpenID provider: the real ``oidc-provider`` (Node.js) and the real gateway.

The provider (``tests/fixtures/oidc.py``) runs on 127.0.0.1 with the
gateway's callback as its client's redirect address; the gateway runs on a
socket bound first, so that address is known before either starts. A
person's way through the provider's own login and consent pages is walked
over HTTP here (``sign_in``) and in Chromium in
``test_browser_oidc.py``.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
from joserfc import jwt
from joserfc.jwk import RSAKey

from gateway.oidc import OidcClient, OidcError, PendingSignIn
from tests.fixtures.browser import LiveGateway, serve_gateway
from tests.fixtures.llm_server import refused_port
from tests.fixtures.oidc import CALLBACK, LocalProvider, Signed
from tests.fixtures.ray_cluster import MakeRuntime


def _form(page: str, base: str) -> tuple[str, dict[str, str]]:
    """The action and hidden fields of the first form of a provider page."""
    action = re.search(r'<form[^>]*action="([^"]+)"', page)
    assert action is not None, page[:500]
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page))
    return urljoin(base, action.group(1)), fields


async def sign_in(http: httpx.AsyncClient, start: str, login: str) -> str:
    """Walk the provider's login and consent pages from ``start``; the callback URL it sends."""
    url = start
    for _ in range(20):
        if urlsplit(url).path == CALLBACK:
            return url
        reply = await http.get(url)
        if reply.status_code in (302, 303):
            url = urljoin(url, reply.headers["location"])
            continue
        assert reply.status_code == 200, reply.text[:500]
        action, fields = _form(reply.text, url)
        if fields.get("prompt") == "login":
            fields.update(login=login, password="any password")
        reply = await http.post(action, data=fields)
        assert reply.status_code in (302, 303), reply.text[:500]
        url = urljoin(action, reply.headers["location"])
    raise AssertionError("the provider never sent the browser back")


async def begin(http: httpx.AsyncClient, gateway: LiveGateway) -> str:
    reply = await http.get(urljoin(gateway.url, "/api/auth/oidc/login"))
    assert reply.status_code == 302
    return reply.headers["location"]


async def me(http: httpx.AsyncClient, gateway: LiveGateway) -> str | None:
    reply = await http.get(urljoin(gateway.url, "/api/me"))
    return reply.json()["username"] if reply.status_code == 200 else None


# -- the way in -----------------------------------------------------------------
async def test_a_first_sign_in_makes_the_account_and_a_second_finds_it(signed: Signed) -> None:
    async with signed() as (gateway, provider), httpx.AsyncClient() as http:
        offered = (await http.get(urljoin(gateway.url, "/api/auth/providers"))).json()
        assert offered == {
            "oidc": {"name": "Test ID", "url": "/api/auth/oidc/login"},
            "password": True,
        }
        start = await begin(http, gateway)
        query = parse_qs(urlsplit(start).query)
        assert start.startswith(provider.issuer)
        assert query["code_challenge_method"] == ["S256"] and query["nonce"] and query["state"]
        done = await http.get(await sign_in(http, start, "alice"))
        assert done.status_code == 200 and "Signed in." in done.text
        assert await me(http, gateway) == "alice"
        user = await (await gateway.runtime.store()).get_user("alice")
        assert user is not None and user["displayName"] == "Alice Example"
        assert "passwordHash" not in user
        # A second sign-in (a new browser) lands in the same account.
        async with httpx.AsyncClient() as other:
            await other.get(await sign_in(other, await begin(other, gateway), "alice"))
            assert await me(other, gateway) == "alice"
        # Each sign-in began a session of its own, recorded as an OpenID one.
        sessions = (await http.get(urljoin(gateway.url, "/api/me/sessions"))).json()["sessions"]
        assert [s["how"] for s in sessions] == ["oidc", "oidc"]
        assert [s["current"] for s in sessions] == [False, True]
        no_password = await http.post(
            urljoin(gateway.url, "/api/me/password"),
            json={"current": "any password", "new": "a long enough passphrase"},
        )
        assert no_password.status_code == 409
        assert no_password.json()["error"]["detail"]["reason"] == "no_password"
        assert [u["username"] for u in await (await gateway.runtime.store()).list_users()] == [
            "admin",
            "alice",
        ]


async def test_an_account_is_linked_by_issuer_and_subject_never_by_name(signed: Signed) -> None:
    # mallory's provider account goes by "admin", the name of the server's administrator.
    async with signed() as (gateway, _), httpx.AsyncClient() as http:
        await http.get(await sign_in(http, await begin(http, gateway), "mallory"))
        assert await me(http, gateway) == "admin-2"


async def test_a_claim_seeds_the_admin_role_of_a_new_account(signed: Signed) -> None:
    async with signed(oidc_admin_claim="groups=yeaft-admins") as (gateway, _):
        for login, role in (("alice", "admin"), ("bob", "member")):
            async with httpx.AsyncClient() as http:
                await http.get(await sign_in(http, await begin(http, gateway), login))
                reply = await http.get(urljoin(gateway.url, "/api/me"))
                assert (reply.json()["username"], reply.json()["role"]) == (login, role)
        # Stored with the account: the role is the account's, not the token's.
        user = await (await gateway.runtime.store()).get_user("alice")
        assert user is not None and user["role"] == "admin"


# -- ways it must not work ----------------------------------------------------------
async def test_a_callback_whose_state_does_not_match_is_refused(signed: Signed) -> None:
    async with signed() as (gateway, _), httpx.AsyncClient() as http:
        callback = await sign_in(http, await begin(http, gateway), "alice")
        forged = re.sub(r"state=[^&]+", "state=forged", callback)
        reply = await http.get(forged)
        assert reply.status_code == 400
        assert "state does not match" in reply.text and "Traceback" not in reply.text
        assert await me(http, gateway) is None


async def test_a_replayed_code_is_refused(signed: Signed) -> None:
    async with signed() as (gateway, _), httpx.AsyncClient() as http:
        start = await begin(http, gateway)
        pending = http.cookies.get("yeaft_oidc")
        callback = await sign_in(http, start, "alice")
        assert (await http.get(callback)).status_code == 200
        # The same callback again: this browser's sign-in is over.
        again = await http.get(callback)
        assert again.status_code == 400 and "no match" in again.text
        # With the sign-in's cookie put back, the provider refuses the used code.
        async with httpx.AsyncClient(cookies={"yeaft_oidc": pending or ""}) as thief:
            replay = await thief.get(callback)
        assert replay.status_code == 400 and "invalid_grant" in replay.text


async def test_a_domain_that_is_not_allowed_is_refused(signed: Signed) -> None:
    async with signed(oidc_allowed_domains=["example.com"]) as (gateway, _):
        async with httpx.AsyncClient() as http:
            reply = await http.get(await sign_in(http, await begin(http, gateway), "bob"))
            assert reply.status_code == 403
            assert "people of other.test may not sign in" in reply.text
            assert await me(http, gateway) is None
        async with httpx.AsyncClient() as http:
            await http.get(await sign_in(http, await begin(http, gateway), "alice"))
            assert await me(http, gateway) == "alice"


async def test_a_provider_that_is_down_gets_a_clear_page(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    from pydantic import SecretStr

    with refused_port() as port:
        settings = {
            "oidc_issuer": f"http://127.0.0.1:{port}",
            "oidc_client_id": "yeaft",
            "oidc_client_secret": SecretStr("s" * 32),
        }
        async with serve_gateway(make_runtime(), tmp_path / "gw", **settings) as gateway:
            async with httpx.AsyncClient() as http:
                reply = await http.get(urljoin(gateway.url, "/api/auth/oidc/login"))
    assert reply.status_code == 502
    assert "cannot be reached" in reply.text and "Traceback" not in reply.text
    assert reply.headers["content-type"].startswith("text/html")


# -- the ID token's checks ----------------------------------------------------------
async def _id_token(signed: Signed) -> tuple[LocalProvider, str, str]:
    """A real ID token of alice's from the provider, its nonce, and the redirect address."""
    async with signed() as (gateway, provider), httpx.AsyncClient() as http:
        redirect = urljoin(gateway.url, CALLBACK)
        client = OidcClient(provider.issuer, provider.client_id, provider.client_secret)
        pending = PendingSignIn.new(time.time())
        callback = await sign_in(http, await client.authorization_url(redirect, pending), "alice")
        code = parse_qs(urlsplit(callback).query)["code"][0]
        token = await client.exchange(redirect, pending, code)
        identity = await client.check_id_token(token, pending.nonce)
        assert (identity.subject, identity.email) == ("alice", "alice@example.com")
        # The checks need the provider's keys: made while it still runs.
        checks = []
        for check in (
            client.check_id_token(token, pending.nonce, now=time.time() + 86_400),
            OidcClient(provider.issuer, "someone-else", "x").check_id_token(token, pending.nonce),
            client.check_id_token(token, "another-nonce"),
            client.check_id_token(
                token[:-4] + ("AAAA" if token[-4:] != "AAAA" else "BBBB"), pending.nonce
            ),
            client.check_id_token(
                _forged(provider.issuer, provider.client_id, pending.nonce), pending.nonce
            ),
        ):
            try:
                await check
                checks.append("accepted")
            except OidcError as exc:
                checks.append(exc.message)
        return provider, token, "\n".join(checks)


def _forged(issuer: str, audience: str, nonce: str) -> str:
    """An ID token with every claim right, signed by a key that is not the provider's."""
    key = RSAKey.generate_key(2048, parameters={"kid": "forger"})
    now = int(time.time())
    claims = {
        "iss": issuer,
        "aud": audience,
        "sub": "alice",
        "nonce": nonce,
        "iat": now,
        "exp": now + 300,
    }
    return jwt.encode({"alg": "RS256", "kid": "forger"}, claims, key)


async def test_expired_forged_and_misaddressed_id_tokens_are_refused(signed: Signed) -> None:
    _, _, checks = await _id_token(signed)
    expired, audience, nonce, tampered, forged = checks.split("\n")
    assert "expired" in expired
    assert "aud" in audience
    assert "nonce" in nonce
    assert "signature is not valid" in tampered
    assert "signature is not valid" in forged
