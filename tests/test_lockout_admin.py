"""The login lockout across gateways, and the administrators' routes that lift it.

Two gateway apps on one runtime (one store), each its own process state,
as two replicas behind a load balancer: failures counted on one lock the
attacker out on the other, the owner from her own address still gets in on
both, and an administrator's unlock on one is in force on both. Clients
log in over real TCP from two loopback addresses (127.0.0.1 and 127.0.0.2),
so the gateways see two machines. Both store backends.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.fixtures.gateway import PASSWORD, Gateway, StartGateway

WRONG = {"username": "ann", "password": "not the password at all"}
RIGHT = {"username": "ann", "password": PASSWORD}
ATTACKER, OWNER = "127.0.0.1", "127.0.0.2"


@pytest.fixture
async def clients() -> AsyncIterator[list[httpx.AsyncClient]]:
    made: list[httpx.AsyncClient] = []
    yield made
    for client in made:
        await client.aclose()


def client_from(gw: Gateway, address: str, made: list[httpx.AsyncClient]) -> httpx.AsyncClient:
    transport = httpx.AsyncHTTPTransport(local_address=address)
    client = httpx.AsyncClient(base_url=gw.base_url, transport=transport, timeout=30)
    made.append(client)
    return client


async def two_gateways(start_gateway: StartGateway, **settings: object) -> tuple[Gateway, Gateway]:
    """Two gateways on one runtime and store, with one JWT secret (as replicas share it)."""
    secret = secrets.token_urlsafe(48)
    first = await start_gateway(jwt_secret=secret, **settings)
    second = await start_gateway(first.runtime, jwt_secret=secret, **settings)
    return first, second


async def test_failures_on_one_gateway_lock_the_attacker_on_another_not_the_owner(
    start_gateway: StartGateway, clients: list[httpx.AsyncClient]
) -> None:
    one, two = await two_gateways(start_gateway, login_max_failures=3, login_lockout_s=600)
    await one.user("ann")
    for _ in range(2):
        assert (
            await client_from(one, ATTACKER, clients).post("/api/login", json=WRONG)
        ).status_code == 401
    # The third failure, on the other gateway, locks the account for the attacker.
    locking = await client_from(two, ATTACKER, clients).post("/api/login", json=WRONG)
    assert locking.status_code == 429, locking.text
    for gw in (one, two):
        refused = await client_from(gw, ATTACKER, clients).post("/api/login", json=RIGHT)
        assert refused.status_code == 429  # the right password too: no oracle
        error = refused.json()["error"]
        assert error["code"] == "rate_limited" and error["detail"] == {"reason": "login_locked"}
        assert 590 < error["retryAfter"] <= 600
        assert "try again in" in error["message"]
        # The owner, from an address that has not failed, gets in on either gateway.
        mine = await client_from(gw, OWNER, clients).post("/api/login", json=RIGHT)
        assert mine.status_code == 200, mine.text


async def test_one_address_spraying_many_accounts_is_locked_out_of_all(
    start_gateway: StartGateway, clients: list[httpx.AsyncClient]
) -> None:
    one, two = await two_gateways(
        start_gateway, login_max_failures=10, login_address_max_failures=4
    )
    for name in ("ann", "bob"):
        await one.user(name)
    sprayer_one = client_from(one, ATTACKER, clients)
    sprayer_two = client_from(two, ATTACKER, clients)
    names = ["ann", "bob", "cat", "dan"]  # cat and dan do not exist: they count the same
    for i, name in enumerate(names[:-1]):
        sprayer = sprayer_one if i % 2 else sprayer_two
        wrong = await sprayer.post("/api/login", json={"username": name, "password": "guess"})
        assert wrong.status_code == 401
    last = await sprayer_one.post("/api/login", json={"username": "dan", "password": "guess"})
    assert last.status_code == 429
    # Locked out of every account, the right password included, on both gateways.
    for sprayer in (sprayer_one, sprayer_two):
        for name in ("ann", "bob"):
            body = {"username": name, "password": PASSWORD}
            assert (await sprayer.post("/api/login", json=body)).status_code == 429
    # Everyone else logs in.
    assert (
        await client_from(two, OWNER, clients).post("/api/login", json=RIGHT)
    ).status_code == 200


async def test_an_admin_lists_and_lifts_a_lockout_on_every_gateway(
    start_gateway: StartGateway, clients: list[httpx.AsyncClient]
) -> None:
    one, two = await two_gateways(start_gateway, login_max_failures=2, login_lockout_s=600)
    await one.user("admin")  # YEAFT_ADMINS is "admin" by default
    await one.user("ann")
    attacker = client_from(one, ATTACKER, clients)
    for _ in range(2):
        await attacker.post("/api/login", json=WRONG)
    assert (await attacker.post("/api/login", json=RIGHT)).status_code == 429
    listed = await two.http.get("/api/admin/lockouts", headers=one.auth("admin"))
    assert listed.status_code == 200, listed.text
    body = listed.json()
    assert body["addresses"] == []
    [account] = body["accounts"]
    assert account["username"] == "ann" and account["exists"] is True
    assert [a["address"] for a in account["addresses"]] == [ATTACKER]
    assert account["until"] == account["addresses"][0]["until"]
    lifted = await two.http.delete("/api/admin/lockouts/ann", headers=one.auth("admin"))
    assert lifted.status_code == 200, lifted.text
    assert lifted.json() == {"username": "ann", "wasLocked": True}
    # The next login works on both gateways, from the address that was locked.
    for gw in (one, two):
        again = await client_from(gw, ATTACKER, clients).post("/api/login", json=RIGHT)
        assert again.status_code == 200, again.text
    after = await one.http.get("/api/admin/lockouts", headers=one.auth("admin"))
    assert after.json() == {"accounts": [], "addresses": []}
    unknown = await one.http.delete("/api/admin/lockouts/nobody", headers=one.auth("admin"))
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "not_found"


async def test_a_member_gets_403_and_a_stranger_401(
    start_gateway: StartGateway, clients: list[httpx.AsyncClient]
) -> None:
    gw = await start_gateway(login_max_failures=2, login_lockout_s=600)
    await gw.user("bob")
    await gw.user("ann")
    attacker = client_from(gw, ATTACKER, clients)
    for _ in range(2):
        await attacker.post("/api/login", json=WRONG)
    for method, path in (("GET", "/api/admin/lockouts"), ("DELETE", "/api/admin/lockouts/ann")):
        member = await gw.http.request(method, path, headers=gw.auth("bob"))
        assert member.status_code == 403, member.text
        error = member.json()["error"]
        assert error["code"] == "forbidden" and "administrator" in error["message"]
        stranger = await client_from(gw, OWNER, clients).request(method, path)
        assert stranger.status_code == 401
        assert stranger.json()["error"]["code"] == "unauthorized"
    # Nothing was lifted.
    assert (await attacker.post("/api/login", json=RIGHT)).status_code == 429
