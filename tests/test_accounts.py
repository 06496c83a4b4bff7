"""Accounts: the login lockout at the door, ``yeaft user passwd|unlock``, store refusal.

The lockout's counting rules are tested on the store in
``tests/test_login_counts.py``; across gateways and through the admin
routes in ``tests/test_lockout_admin.py``.

The lockout tests log in over real TCP from two loopback addresses
(127.0.0.1 and 127.0.0.2), so the gateway sees two clients the way it would
see two machines. The CLI runs as a real subprocess against the same store
the gateway uses, on both backends.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import jwt
import pytest

from gateway import users
from store import redact_url
from tests.fixtures.gateway import PASSWORD, Gateway, StartGateway, WsClient
from tests.fixtures.stores import StoreFactory
from tests.test_cli import PROVIDER_VARS, ROOT, yeaft

WRONG = {"username": "ann", "password": "not the password at all"}
RIGHT = {"username": "ann", "password": PASSWORD}


def run_cli(
    factory: StoreFactory, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``yeaft ARGS`` on the store of ``factory`` (the one the test's gateway uses)."""
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    env.update(YEAFT_DATA_DIR=str(factory.data_dir), YEAFT_REDIS_PREFIX=factory.prefix)
    env.pop("YEAFT_REDIS_URL", None)
    if factory.url:
        env["YEAFT_REDIS_URL"] = factory.url
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", *args],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
async def from_elsewhere() -> AsyncIterator[list[httpx.AsyncClient]]:
    """HTTP clients whose connections leave from another loopback address (127.0.0.2)."""
    made: list[httpx.AsyncClient] = []
    yield made
    for client in made:
        await client.aclose()


def client_from(gw: Gateway, address: str, made: list[httpx.AsyncClient]) -> httpx.AsyncClient:
    transport = httpx.AsyncHTTPTransport(local_address=address)
    client = httpx.AsyncClient(base_url=gw.base_url, transport=transport, timeout=30)
    made.append(client)
    return client


# -- the lockout at the door ---------------------------------------------------
async def test_an_attacker_locks_out_only_their_own_address(
    start_gateway: StartGateway, from_elsewhere: list[httpx.AsyncClient]
) -> None:
    gw = await start_gateway(login_max_failures=3, login_lockout_s=600)
    await users.add_user(await gw.store(), "ann", PASSWORD)
    attacker = client_from(gw, "127.0.0.1", from_elsewhere)
    ann = client_from(gw, "127.0.0.2", from_elsewhere)
    for _ in range(2):
        assert (await attacker.post("/api/login", json=WRONG)).status_code == 401
    locking = await attacker.post("/api/login", json=WRONG)
    assert locking.status_code == 429
    # The right password is refused too from there: the lockout is no oracle.
    refused = await attacker.post("/api/login", json=RIGHT)
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["code"] == "rate_limited" and error["detail"] == {"reason": "login_locked"}
    assert 590 < error["retryAfter"] <= 600
    assert "try again in 9 min" in error["message"] or "try again in 10 min" in error["message"]
    assert 590 < int(refused.headers["Retry-After"]) <= 600
    # ann, from her own address, logs in as usual, however often the attacker tries.
    for _ in range(5):
        assert (await attacker.post("/api/login", json=WRONG)).status_code == 429
    mine = await ann.post("/api/login", json=RIGHT)
    assert mine.status_code == 200, mine.text
    # While her account is locked, though, an address that fails is refused too:
    # only an address that has not failed is sure to get in.
    typo = await ann.post("/api/login", json=WRONG)
    assert typo.status_code == 429
    assert "ask an administrator" in typo.json()["error"]["message"]


async def test_yeaft_user_unlock_lifts_a_lockout(
    start_gateway: StartGateway, store_factory: StoreFactory
) -> None:
    gw = await start_gateway(login_max_failures=2, login_lockout_s=600)
    await users.add_user(await gw.store(), "ann", PASSWORD)
    for _ in range(2):
        await gw.http.post("/api/login", json=WRONG)
    assert (await gw.http.post("/api/login", json=RIGHT)).status_code == 429
    unlocked = run_cli(store_factory, "user", "unlock", "ann")
    assert unlocked.returncode == 0, unlocked.stderr
    assert "unlocked ann" in unlocked.stdout
    assert (await gw.http.post("/api/login", json=RIGHT)).status_code == 200
    unknown = run_cli(store_factory, "user", "unlock", "nobody")
    assert unknown.returncode == 2 and "no user 'nobody'" in unknown.stderr


# -- yeaft user passwd ---------------------------------------------------------
async def test_yeaft_user_passwd_changes_the_password_and_ends_older_sessions(
    start_gateway: StartGateway, store_factory: StoreFactory
) -> None:
    gw = await start_gateway()
    await gw.user("ann")
    # A session that began a few seconds before the change.
    older = jwt.encode(
        {"sub": "ann", "iat": int(time.time()) - 5, "exp": int(time.time()) + 3600},
        gw.settings.jwt_key(),
        "HS256",
    )
    assert (await gw.http.get("/api/me", headers=bearer(older))).status_code == 200
    weak = run_cli(store_factory, "user", "passwd", "ann", stdin="short\n")
    assert weak.returncode == 2 and "too short" in weak.stderr
    changed = run_cli(store_factory, "user", "passwd", "ann", stdin="a brand new passphrase\n")
    assert changed.returncode == 0, changed.stderr
    assert "changed the password of ann" in changed.stdout
    assert (await gw.http.post("/api/login", json=RIGHT)).status_code == 401
    fresh = await gw.http.post(
        "/api/login", json={"username": "ann", "password": "a brand new passphrase"}
    )
    assert fresh.status_code == 200
    stale = await gw.http.get("/api/me", headers=bearer(older))
    assert stale.status_code == 401
    assert stale.json()["error"]["detail"] == {"reason": "password_changed"}
    ws = await WsClient.open(gw, headers=bearer(older))
    assert await ws.closed_with() == 4401
    new = bearer(fresh.json()["token"])
    assert (await gw.http.get("/api/me", headers=new)).status_code == 200
    missing = run_cli(store_factory, "user", "passwd", "nobody", stdin="a brand new passphrase\n")
    assert missing.returncode == 2 and "no user 'nobody'" in missing.stderr


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# -- which store, and never a new empty one by accident -------------------------
def test_token_and_user_refuse_a_missing_store_and_say_where_they_looked(tmp_path: Path) -> None:
    nowhere = tmp_path / "typo"
    for args in (("token", "ann"), ("user", "list"), ("user", "unlock", "ann")):
        out = yeaft(*args, tmp=nowhere)
        assert out.returncode == 2, args
        assert f"no Yeaft store in the data directory {nowhere}" in out.stderr
        assert "Traceback" not in out.stderr
    assert not nowhere.exists()
    # An existing directory without a store is refused the same way.
    tmp_path.joinpath("empty").mkdir()
    out = yeaft("user", "list", tmp=tmp_path / "empty")
    assert out.returncode == 2 and "--create" in out.stderr
    assert list((tmp_path / "empty").iterdir()) == []


def test_user_list_says_which_directory_it_reads(tmp_path: Path) -> None:
    made = yeaft("user", "list", "--create", tmp=tmp_path)
    assert made.returncode == 0 and made.stdout == ""
    assert f"using the data directory {tmp_path}" in made.stderr
    # Now the store exists: no flag needed.
    assert yeaft("user", "list", tmp=tmp_path).returncode == 0


def test_redis_store_is_named_without_its_password(tmp_path: Path) -> None:
    assert (
        redact_url("redis://:hunter2secret@db.example:6380/1") == "redis://:***@db.example:6380/1"
    )
    assert redact_url("redis://bob:pw@h/0") == "redis://bob:***@h/0"
    assert redact_url("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"
    # Nothing listens on port 1: the command fails, but says where without the password.
    out = yeaft(
        "user", "list", tmp=tmp_path, YEAFT_REDIS_URL="redis://:hunter2secret@127.0.0.1:1/0"
    )
    assert out.returncode != 0
    assert "redis://:***@127.0.0.1:1/0" in out.stderr
    assert "hunter2secret" not in out.stderr + out.stdout


@pytest.mark.parametrize("store_factory", ["redis"], indirect=True)
async def test_an_empty_redis_prefix_is_refused_until_created(store_factory: StoreFactory) -> None:
    # (The embedded half is test_token_and_user_refuse_a_missing_store_...)
    out = run_cli(store_factory, "user", "list")
    assert out.returncode == 2 and "no Yeaft store in the Redis" in out.stderr
    assert f"key prefix {store_factory.prefix!r}" in out.stderr
    added = run_cli(
        store_factory, "user", "add", "ann", "--create", stdin="a long enough password\n"
    )
    assert added.returncode == 0, added.stderr
    assert run_cli(store_factory, "user", "list").stdout.split() == ["ann"]
