"""The gateway's HTTP side and its authentication, over a real uvicorn server.

Tests that do not depend on the store backend run on the embedded store
only; those that do (users, groups, isolation) run on both.
"""

from __future__ import annotations

import json
import os
import pickle
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jwt
import pytest

from coordinator.errors import GroupError, GroupErrorCode
from gateway import users
from gateway.auth import AuthError, AuthFailure, issue_token, verify_token
from gateway.connection import Connection, ConnectionState
from gateway.errors import GROUP_ERROR_CODES, IllegalTransition, from_group_error
from gateway.limits import AbuseMeter, TokenBucket
from gateway.metrics import Metrics
from gateway.server import configure_ray_auth
from gateway.settings import GatewaySettings, WeakSecretError, load_or_create_secret
from gateway.tail import Subscription, SubscriptionState
from gateway.views import group_view
from store.base import Group, GroupSettings
from store.events import EventHeader, StoredEvent
from tests.fixtures.gateway import PASSWORD, StartGateway, WsClient

ROOT = Path(__file__).resolve().parents[1]
embedded_only = pytest.mark.parametrize("store_factory", ["embedded"], indirect=True)


# -- settings, secrets, tokens (no server) -------------------------------------
def test_settings_defaults_and_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in [v for v in os.environ if v.startswith("YEAFT_")]:
        monkeypatch.delenv(var)
    defaults = GatewaySettings()
    assert (defaults.host, defaults.port) == ("127.0.0.1", 8765)
    assert defaults.jwt_ttl.total_seconds() == 3 * 24 * 3600
    assert defaults.frame_max_bytes == 262144 and defaults.client_queue_size == 2000
    assert (defaults.ping_interval, defaults.idle_timeout) == (25.0, 60.0)
    monkeypatch.setenv("YEAFT_PORT", "9000")
    monkeypatch.setenv("YEAFT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("YEAFT_JWT_TTL", "3600")
    configured = GatewaySettings()
    assert configured.port == 9000 and configured.data_dir == tmp_path
    assert configured.jwt_ttl.total_seconds() == 3600
    assert configured.persona_dir() == tmp_path / "personas"


@pytest.mark.parametrize(
    "weak", ["secret", "changeme", "CHANGEME", "short-but-random-ish", "a" * 64]
)
def test_weak_jwt_secrets_are_refused(weak: str) -> None:
    with pytest.raises(ValueError, match="YEAFT_JWT_SECRET is too weak"):
        GatewaySettings(jwt_secret=weak)


def test_generated_secret_is_private_kept_and_reused(tmp_path: Path) -> None:
    settings = GatewaySettings(data_dir=tmp_path / "d")
    key = settings.jwt_key()
    path = tmp_path / "d" / "jwt_secret"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert GatewaySettings(data_dir=tmp_path / "d").jwt_key() == key
    path.chmod(0o644)  # loosened by someone: made private again on read
    assert load_or_create_secret(path) == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.write_text("changeme\n")
    with pytest.raises(WeakSecretError):
        GatewaySettings(data_dir=tmp_path / "d").jwt_key()


def test_tokens_round_trip_and_fail_typed(tmp_path: Path) -> None:
    settings = GatewaySettings(data_dir=tmp_path)
    assert verify_token(settings, issue_token(settings, "ann")) == "ann"
    for token, reason in [(None, AuthFailure.MISSING), ("", AuthFailure.MISSING)]:
        with pytest.raises(AuthError) as missing:
            verify_token(settings, token)
        assert missing.value.reason is reason
    forged = jwt.encode(
        {"sub": "ann", "iat": int(time.time()), "exp": int(time.time()) + 60},
        "another-secret-that-is-long-enough-0123456789",
        algorithm="HS256",
    )
    expired = jwt.encode(
        {"sub": "ann", "iat": 1, "exp": int(time.time()) - 5}, settings.jwt_key(), algorithm="HS256"
    )
    unsigned = jwt.encode({"sub": "ann", "iat": 1, "exp": 2**40}, None, algorithm="none")
    for token, reason in [
        ("not.a.jwt", AuthFailure.INVALID),
        (forged, AuthFailure.INVALID),
        (unsigned, AuthFailure.INVALID),
        (expired, AuthFailure.EXPIRED),
    ]:
        with pytest.raises(AuthError) as failed:
            verify_token(settings, token)
        assert failed.value.reason is reason


def test_password_hashes_are_salted_slow_and_self_describing() -> None:
    one = users.hash_password("hunter2hunter2")
    two = users.hash_password("hunter2hunter2")
    assert one != two and one.startswith(f"scrypt${users.DEFAULT_PARAMS.n}$8$1$")
    assert users.DEFAULT_PARAMS.n >= 2**14
    assert users.password_matches("hunter2hunter2", one)
    assert not users.password_matches("hunter2hunter3", one)
    cheap = users.hash_password("hunter2hunter2", users.ScryptParams(n=2**4, r=1, p=1))
    assert users.password_matches("hunter2hunter2", cheap) and users.needs_rehash(cheap)
    for broken in (
        "",
        "scrypt$1$1$1$x$y",
        "md5$abc",
        "scrypt$4194304$8$1$AAAA$AAAAAAAAAAAAAAAAAAAAAA==",
    ):
        assert not users.password_matches("x", broken)


def test_username_and_password_rules() -> None:
    for name in ("", "a" * 41, "ann smith", "ann/..", "änn"):
        with pytest.raises(users.UserError, match="invalid username"):
            users.check_username(name)
    users.check_username("Ann.Smith_2-x")
    for password, why in [
        ("short", "too short"),
        ("password", "most common"),
        ("annsmith", "must not be the username"),
        ("aaaaaaaaaaaa", "too few different"),
    ]:
        with pytest.raises(users.UserError, match=why):
            users.check_password("annsmith", password)


def test_importing_the_gateway_does_not_import_ray() -> None:
    # run_server must configure Ray's auth before ray is imported, and the
    # CLI imports these modules first.
    code = "import sys, gateway.server, gateway.users; assert 'ray' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_ray_auth_is_configured_with_a_private_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(var, raising=False)
    configure_ray_auth(tmp_path, local=True)
    path = Path(os.environ["RAY_AUTH_TOKEN_PATH"])
    assert os.environ["RAY_AUTH_MODE"] == "token" and path.parent == tmp_path
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(path.read_text().strip()) == 64
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH")
    monkeypatch.delenv("RAY_AUTH_MODE")
    configure_ray_auth(tmp_path, local=False)  # joining a cluster: its own token
    assert "RAY_AUTH_MODE" not in os.environ and "RAY_AUTH_TOKEN_PATH" not in os.environ


# -- coordinator refusals and group views (no server) ------------------------
def test_every_group_error_code_has_a_wire_code() -> None:
    # A new GroupErrorCode must be given its wire code on purpose.
    assert set(GROUP_ERROR_CODES) == set(GroupErrorCode)


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (GroupErrorCode.NOT_FOUND, 404),
        (GroupErrorCode.CONFLICT, 409),
        (GroupErrorCode.DEFAULT_NOT_IN_ROSTER, 422),
        (GroupErrorCode.NOT_IN_ROSTER, 422),
        (GroupErrorCode.UNKNOWN_VP, 422),
        (GroupErrorCode.INVALID_NAME, 422),
        (GroupErrorCode.BUSY, 503),
    ],
)
def test_group_errors_become_gateway_errors_with_their_reason(
    code: GroupErrorCode, status: int
) -> None:
    # The error crosses Ray pickled; what arrives must translate the same.
    refused = pickle.loads(pickle.dumps(GroupError(code, "refused because")))
    assert refused.code is code
    translated = from_group_error(refused)
    assert translated is not None
    assert translated.code is GROUP_ERROR_CODES[code] and translated.status == status
    assert translated.message == "refused because"
    assert translated.to_json()["error"]["detail"] == {"reason": code.value}
    # Ray hands the caller a wrapper whose ``cause`` is the original error.
    wrapped = RuntimeError("ray task error")
    wrapped.cause = refused  # type: ignore[attr-defined]
    assert from_group_error(wrapped) is not None
    assert from_group_error(RuntimeError("something else")) is None


def test_group_error_refuses_an_unknown_code() -> None:
    with pytest.raises(ValueError):
        GroupError("no_such_code", "x")  # type: ignore[arg-type]


def test_group_view_shows_settings_by_their_wire_names() -> None:
    group = Group(id="g1", name="team", settings=GroupSettings(fanout_cap=3, language="zh"))
    settings = group_view(group)["settings"]
    assert settings == GroupSettings(fanout_cap=3, language="zh").model_dump(by_alias=True)
    assert settings["fanoutCap"] == 3 and settings["throttleWindowS"] == 5.0
    assert settings["model"] == "" and "fanout_cap" not in settings


# -- users in the store (both backends) ---------------------------------------
async def test_add_user_and_authenticate(start_gateway: StartGateway) -> None:
    gw = await start_gateway()
    store = await gw.store()
    await users.add_user(store, "ann", PASSWORD)
    with pytest.raises(users.UserError, match="already exists"):
        await users.add_user(store, "ANN", PASSWORD)
    with pytest.raises(users.UserError, match="too short"):
        await users.add_user(store, "bob", "abc")
    assert await users.authenticate(store, "ann", PASSWORD)
    assert not await users.authenticate(store, "ann", PASSWORD + "!")
    assert not await users.authenticate(store, "nobody", PASSWORD)
    assert not await users.authenticate(store, "../etc", PASSWORD)
    record = await store.get_user("ann")
    assert record is not None and "password" not in record
    assert PASSWORD not in str(record) and record["passwordHash"].startswith("scrypt$")


# -- HTTP authentication (embedded only) --------------------------------------
@embedded_only
async def test_login_cookie_bearer_logout(start_gateway: StartGateway) -> None:
    gw = await start_gateway()
    await users.add_user(await gw.store(), "ann", PASSWORD)
    bad = await gw.http.post("/api/login", json={"username": "ann", "password": "wrong-password"})
    assert bad.status_code == 401 and bad.json()["error"]["code"] == "unauthorized"
    unknown = await gw.http.post("/api/login", json={"username": "zed", "password": PASSWORD})
    assert unknown.status_code == 401 and unknown.json() == bad.json()
    assert (await gw.http.post("/api/login", json={"username": "ann"})).status_code == 422

    ok = await gw.http.post("/api/login", json={"username": "ann", "password": PASSWORD})
    assert ok.status_code == 200 and ok.json()["username"] == "ann"
    cookie = ok.headers["set-cookie"]
    assert "yeaft_session=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
    token = ok.json()["token"]
    assert verify_token(gw.settings, token) == "ann"
    # The client kept the cookie, so this request is authenticated by it.
    me = (await gw.http.get("/api/me")).json()
    assert (me["username"], me["displayName"], me["role"]) == ("ann", None, "member")
    gw.http.cookies.clear()
    assert (await gw.http.get("/api/me")).status_code == 401
    me = await gw.http.get("/api/me", headers={"Authorization": f"Bearer {token}"})
    assert me.json()["username"] == "ann"
    out = await gw.http.post("/api/logout")
    assert out.status_code == 204 and "yeaft_session=" in out.headers["set-cookie"]
    garbage = await gw.http.get("/api/me", headers={"Authorization": "Bearer x.y.z"})
    assert garbage.status_code == 401 and garbage.json()["error"]["detail"]["reason"] == "invalid"


@embedded_only
async def test_cookie_from_a_foreign_origin_is_refused(start_gateway: StartGateway) -> None:
    gw = await start_gateway()
    await gw.user("ann")
    evil = {"Origin": "https://evil.example"}
    refused = await gw.http.post("/api/groups", json={"name": "x", "roster": []}, headers=evil)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    cookie = {"Cookie": f"yeaft_session={gw.tokens['ann']}"}
    ws = await WsClient.open(gw, headers={**evil, **cookie})
    assert await ws.closed_with() == 4403
    # The same cookie from the server's own page is fine.
    ws = await WsClient.open(gw, headers={"Origin": gw.base_url, **cookie})
    assert (await ws.request({"type": "ping"}))["type"] == "pong"
    await ws.close()


@embedded_only
async def test_failed_logins_are_throttled_per_user(start_gateway: StartGateway) -> None:
    gw = await start_gateway(login_max_failures=3)
    await users.add_user(await gw.store(), "ann", PASSWORD)
    wrong = {"username": "ann", "password": "not-the-password"}
    for _ in range(2):
        assert (await gw.http.post("/api/login", json=wrong)).status_code == 401
    # The failure that reaches the limit already says how long to wait.
    assert (await gw.http.post("/api/login", json=wrong)).status_code == 429
    blocked = await gw.http.post("/api/login", json={"username": "ann", "password": PASSWORD})
    assert blocked.status_code == 429 and blocked.json()["error"]["code"] == "rate_limited"


@embedded_only
async def test_renewal_header_when_the_token_is_close_to_expiry(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway(jwt_ttl=3600)  # renewal window is one day: always renewed
    token = await gw.user("ann")
    reply = await gw.http.get("/api/me", headers={"Authorization": f"Bearer {token}"})
    assert verify_token(gw.settings, reply.headers["X-New-Token"]) == "ann"


@embedded_only
async def test_ws_refuses_missing_bad_expired_and_unknown_user_tokens(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway()
    await gw.user("ann")
    expired = jwt.encode(
        {"sub": "ann", "iat": 1, "exp": int(time.time()) - 1}, gw.settings.jwt_key(), "HS256"
    )
    ghost = issue_token(gw.settings, "ghost")  # well signed, but no such user
    attempts = [
        {},
        {"query": "token=garbage"},
        {"headers": {"Authorization": f"Bearer {expired}"}},
        {"headers": {"Cookie": f"yeaft_session={ghost}"}},
    ]
    for options in attempts:
        ws = await WsClient.open(gw, **options)
        assert await ws.closed_with() == 4401, options
        assert ws.received == []  # nothing before the close
    for options in [
        {"query": f"token={gw.tokens['ann']}"},
        {"headers": {"Cookie": f"yeaft_session={gw.tokens['ann']}"}},
        {"headers": gw.auth("ann")},
    ]:
        ws = await WsClient.open(gw, **options)
        assert (await ws.request({"type": "ping"}))["type"] == "pong"
        await ws.close()


@embedded_only
async def test_health_personas_static_and_errors(start_gateway: StartGateway) -> None:
    gw = await start_gateway()
    await gw.user("ann")
    auth = gw.auth("ann")
    assert (await gw.http.get("/healthz")).json() == {"status": "ok"}
    personas = (await gw.http.get("/api/personas", headers=auth)).json()["personas"]
    assert {"linus", "steve"} <= {p["id"] for p in personas}
    linus = (await gw.http.get("/api/personas/linus", headers=auth)).json()
    assert linus["id"] == "linus" and linus["body"]
    missing = await gw.http.get("/api/personas/nobody", headers=auth)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    gw.http.cookies.clear()
    assert (await gw.http.get("/api/personas")).status_code == 401
    assert (await gw.http.get("/")).status_code == 200
    assert (await gw.http.get("/static/does-not-exist.js")).status_code == 404
    nowhere = await gw.http.get("/api/nowhere")
    assert nowhere.status_code == 404 and nowhere.json()["error"]["code"] == "not_found"
    limit = await gw.http.get("/api/groups/grp_x/messages?limit=0", headers=auth)
    assert limit.status_code == 422 and limit.json()["error"]["field"] == "limit"


# -- state machines and limiters (no server) -------------------------------------
async def test_connection_and_subscription_states_refuse_illegal_moves(tmp_path: Path) -> None:
    settings = GatewaySettings(data_dir=tmp_path)
    conn = Connection(None, settings, Metrics())  # type: ignore[arg-type]
    with pytest.raises(IllegalTransition):
        conn.transition(ConnectionState.CLOSED)  # connecting -> closed skips closing
    conn.transition(ConnectionState.OPEN)
    with pytest.raises(IllegalTransition):
        conn.transition(ConnectionState.OPEN)
    conn.request_close(4409, "slow")
    conn.request_close(4429, "later requests are ignored")
    assert (conn.state, conn.close_code) == (ConnectionState.CLOSING, 4409)
    assert not conn.offer("{}", envelope=False)  # nothing is queued once closing
    conn.transition(ConnectionState.CLOSED)
    with pytest.raises(IllegalTransition):
        conn.transition(ConnectionState.OPEN)

    sub = Subscription(conn, "grp_x", None, buffer_limit=2)
    with pytest.raises(IllegalTransition):
        sub.transition(SubscriptionState.REPLAYING)
    sub.transition(SubscriptionState.ENDED)
    with pytest.raises(IllegalTransition):
        sub.transition(SubscriptionState.LIVE)


def _stored(envelope: dict[str, Any]) -> StoredEvent:
    """An event as the store hands it to the tail: its text and header."""
    return StoredEvent.from_header(1, json.dumps(envelope), EventHeader.of_envelope(envelope))


def test_vp_filter_keeps_what_the_whole_group_must_see() -> None:
    sub = Subscription(None, "g", ["Linus"], buffer_limit=10)  # type: ignore[arg-type]
    out = {"type": "yeaft_output", "groupId": "g"}

    def wants(envelope: dict[str, Any]) -> bool:
        return sub.wants(_stored(envelope))

    assert wants({**out, "vpId": "linus", "data": {"type": "assistant"}})
    assert not wants({**out, "vpId": "steve", "data": {"type": "assistant"}})
    assert not wants({"type": "agent_status", "vpId": "steve", "state": "streaming"})
    assert wants({**out, "vpId": "steve", "data": {"type": "result"}})
    assert wants({**out, "vpId": "steve", "data": {"type": "system"}})
    assert wants({**out, "vpId": "system", "data": {"type": "assistant"}})
    assert wants({"type": "ask_user_question", "vpId": "steve", "requestId": "r"})
    assert wants({"type": "agent_status", "state": "idle"})  # no vpId: the group's


def test_limiters() -> None:
    now = [0.0]
    bucket = TokenBucket(rate=2, burst=3, clock=lambda: now[0])
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]
    assert bucket.retry_after() == pytest.approx(0.5)
    now[0] = 0.5
    assert bucket.take() and not bucket.take()
    meter = AbuseMeter(limit=2, window=10, clock=lambda: now[0])
    assert [meter.hit(), meter.hit(), meter.hit()] == [False, False, True]
    now[0] = 20.0
    assert not meter.hit()  # the old hits left the window
