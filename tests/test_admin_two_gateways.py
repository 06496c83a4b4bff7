"""Disabling and demoting between two ``yeaft serve`` processes on one Ray cluster and one Redis.

The deployment of ``tests.test_two_gateways``: two gateway processes that
share nothing but the store. root, an administrator, works on gateway A;
ann is connected to gateway B. root disables ann on A: B closes ann's
WebSocket (4401) within a second and refuses her token; root demotes bob on
A, and B refuses bob's next administrator's request.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from websockets.asyncio.client import connect

from gateway import users
from gateway.roles import ROLE_FIELD
from tests.fixtures.gateway import PASSWORD, WsClient
from tests.test_two_gateways import Deployment, _login
from tests.test_two_gateways import deployment as deployment

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


async def test_a_disable_on_one_gateway_closes_the_socket_on_the_other_within_a_second(
    deployment: Deployment,
) -> None:
    a, b = deployment.a, deployment.b
    store = deployment.store_config.open_store()
    try:
        for name in ("root", "ann", "bob"):
            await users.add_user(store, name, PASSWORD)
        for name in ("root", "bob"):
            record = await store.get_user(name)
            assert record is not None
            await store.put_user({**record, ROLE_FIELD: "admin"})
    finally:
        await store.close()
    root = {"Authorization": f"Bearer {await _login(a, 'root')}"}
    ann_token = await _login(b, "ann")
    bob = {"Authorization": f"Bearer {await _login(b, 'bob')}"}

    conn = await connect(b.ws_url, additional_headers={"Authorization": f"Bearer {ann_token}"})
    ann = WsClient(conn)
    assert (await ann.request({"type": "ping"}))["type"] == "pong"
    closed = asyncio.create_task(ann.closed_with(within=10))
    async with (
        httpx.AsyncClient(base_url=a.url, timeout=30) as on_a,
        httpx.AsyncClient(base_url=b.url, timeout=30) as on_b,
    ):
        started = time.monotonic()
        done = await on_a.put(
            "/api/admin/users/ann/disabled", json={"disabled": True}, headers=root
        )
        assert done.status_code == 200, done.text
        async with asyncio.timeout(1.0 - (time.monotonic() - started)):
            assert await closed == 4401
        refused = await on_b.get("/api/me", headers={"Authorization": f"Bearer {ann_token}"})
        assert refused.status_code == 401

        assert (await on_b.get("/api/admin/users", headers=bob)).status_code == 200
        down = await on_a.put("/api/admin/users/bob/role", json={"role": "member"}, headers=root)
        assert down.status_code == 200, down.text
        assert (await on_b.get("/api/admin/users", headers=bob)).status_code == 403
