"""The Redis of k8s/ runs as rendered, and keeps what it acknowledged.

The local overlay's Redis container command and redis.conf are run here
with the machine's redis-server, with the secret's password: only the paths
(the volume and the ConfigMap mount) and the port are moved into a
temporary directory. The server must refuse clients without the password,
accept the gateway's URL from the secret, pass its readiness probe, keep the
password out of its command line, and come back from a kill -9 with every
write it acknowledged, read from its append-only file.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from tests.k8s_render import SECRET, env_of, one, rendered


def quantity(text: str) -> int:
    """A Kubernetes memory quantity (``256Mi``, ``1Gi``, ``500M``, ``1024``) in bytes."""
    match = re.fullmatch(r"(\d+)([KMGT]i?)?", text)
    assert match is not None, text
    unit = match[2] or ""
    base = 1024 if unit.endswith("i") else 1000
    return int(match[1]) * base ** (" KMGT".index(unit[:1] or " "))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RenderedRedis:
    """The local overlay's Redis, runnable on this machine."""

    args: str
    config: str
    probe: str
    password: str
    memory_limit: int
    gateway_url: str
    data: Path
    conf: Path
    port: int
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> subprocess.Popen[bytes]:
        # As the kubelet would set them: the secret, and the memory limit in bytes.
        env = {
            "PATH": os.environ.get("PATH", ""),
            "REDIS_PASSWORD": self.password,
            "REDIS_MEMORY_LIMIT": str(self.memory_limit),
        }
        self.proc = subprocess.Popen(
            ["/bin/sh", "-c", self.args.replace("/etc/redis/redis.conf", str(self.conf))],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 15
        while not self.probe_ok():
            assert self.proc.poll() is None, "redis-server exited at start"
            assert time.monotonic() < deadline, "redis-server never passed its readiness probe"
            time.sleep(0.05)
        return self.proc

    def probe_ok(self) -> bool:
        """The pod's readiness probe, pointed at this server's port."""
        command = self.probe.replace("redis-cli", f"redis-cli -p {self.port}")
        env = {"PATH": os.environ.get("PATH", ""), "REDIS_PASSWORD": self.password}
        return subprocess.run(["/bin/sh", "-c", command], env=env, timeout=10).returncode == 0

    def stop(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=15)

    def client(self, url: str | None = None) -> redis.Redis:
        url = url or f"redis://127.0.0.1:{self.port}/0"
        return redis.Redis.from_url(url, socket_timeout=5)


@pytest.fixture
def local_redis(tmp_path: Path) -> Iterator[RenderedRedis]:
    for binary in ("redis-server", "redis-cli"):
        if shutil.which(binary) is None:
            pytest.fail(f"{binary} is not on PATH (.ci/run installs the redis-server package)")
    docs = list(rendered("local"))
    statefulset = one(docs, "StatefulSet", "redis")
    (container,) = statefulset["spec"]["template"]["spec"]["containers"]
    env = env_of(container)
    assert env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]["key"] == "redis-password"
    assert env["REDIS_MEMORY_LIMIT"]["valueFrom"]["resourceFieldRef"] == {
        "containerName": container["name"],
        "resource": "limits.memory",
    }
    secret = {
        k: base64.b64decode(v).decode() for k, v in one(docs, "Secret", SECRET)["data"].items()
    }
    config = one(docs, "ConfigMap", "redis-config")["data"]["redis.conf"]
    port = _free_port()
    data = tmp_path / "data"
    data.mkdir()
    assert "dir /data\n" in config
    conf = tmp_path / "redis.conf"
    conf.write_text(
        config.replace("dir /data\n", f"dir {data}\n") + f"port {port}\nbind 127.0.0.1\n"
    )
    server = RenderedRedis(
        args=container["args"][0],
        config=config,
        probe=container["readinessProbe"]["exec"]["command"][2],
        password=secret["redis-password"],
        memory_limit=quantity(container["resources"]["limits"]["memory"]),
        gateway_url=secret["redis-url"].replace("@redis:6379/", f"@127.0.0.1:{port}/"),
        data=data,
        conf=conf,
        port=port,
    )
    try:
        yield server
    finally:
        # Stop exactly the server this test started, by its own pid.
        server.stop(signal.SIGKILL)


def test_rendered_redis_needs_the_password_and_accepts_the_gateway_url(
    local_redis: RenderedRedis,
) -> None:
    proc = local_redis.start()
    cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
    assert local_redis.password.encode() not in cmdline
    with pytest.raises(redis.AuthenticationError):
        local_redis.client().ping()
    client = local_redis.client(local_redis.gateway_url)
    assert client.ping()
    assert client.config_get("appendonly") == {"appendonly": "yes"}
    assert client.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
    assert int(client.config_get("maxmemory")["maxmemory"]) == local_redis.memory_limit // 4 * 3
    client.close()


def test_rendered_redis_survives_kill_9_from_its_append_only_file(
    local_redis: RenderedRedis,
) -> None:
    local_redis.start()
    client = local_redis.client(local_redis.gateway_url)
    client.set("yeaft:k8s-test", "acked")
    client.close()

    def logged() -> bool:
        files = (local_redis.data / "appendonlydir").glob("*.aof")
        return b"yeaft:k8s-test" in b"".join(p.read_bytes() for p in files)

    # Redis writes a command to the AOF before it replies, unless a slow
    # fsync makes it put the write off (for at most two seconds).
    deadline = time.monotonic() + 5
    while not logged():
        assert time.monotonic() < deadline, "the write never reached the append-only file"
        time.sleep(0.05)
    # A kill -9 skips the snapshot a clean stop would make: only the AOF is left.
    local_redis.stop(signal.SIGKILL)
    assert not (local_redis.data / "dump.rdb").exists()
    local_redis.start()
    client = local_redis.client(local_redis.gateway_url)
    assert client.get("yeaft:k8s-test") == b"acked"
    client.close()
