"""Shared test configuration.

Fixtures live in ``tests/fixtures/`` (one module per concern) and are loaded
here as plugins. The autouse guard below fails any connection to a host that
is not loopback, so no test can reach the internet by accident.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import socket
from collections.abc import Iterator
from typing import Any

import pytest

# Ray reads its auth mode when it is first imported, so token authentication
# is configured here, before any fixture module imports ray: a fresh random
# token for this test session, never a developer's own.
os.environ["RAY_AUTH_MODE"] = "token"
os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)

pytest_plugins = [
    "tests.fixtures.llm_server",
    "tests.fixtures.sdk_engines",
    "tests.fixtures.stores",
    "tests.fixtures.memory",
    "tests.fixtures.ray_cluster",
    "tests.fixtures.browser",
    "tests.fixtures.oidc",
    "tests.fixtures.phoenix",
    "tests.fixtures.gateway",
]

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


def _is_loopback(host: Any) -> bool:
    if not isinstance(host, str):
        return True  # AF_UNIX paths and other non-IP families are local by nature
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


class NetworkAccessError(RuntimeError):
    pass


def _check(address: Any) -> None:
    host = address[0] if isinstance(address, tuple) else address
    if not _is_loopback(host):
        raise NetworkAccessError(f"test tried to reach a non-loopback host: {address!r}")


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def connect(self: socket.socket, address: Any) -> Any:
        _check(address)
        return _real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> Any:
        _check(address)
        return _real_connect_ex(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, bytes):
            host = host.decode()
        if host is not None and not _is_loopback(host):
            raise NetworkAccessError(f"test tried to resolve a non-loopback host: {host!r}")
        return _real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    # Provider keys from the developer's shell must never leak into a test.
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    yield
