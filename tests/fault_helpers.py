"""Processes the fault tests start, kill and start again: Ray nodes and gateways.

(A Redis of a test's own is ``tests.fixtures.stores.RedisProcess``.)

Each runs in a session of its own (``start_new_session``), so a test can
SIGKILL every process of one node (its raylet, its workers, the actors on
it) by session id and leave the others running. Nothing here waits with a
fixed sleep where a process's own output or a health check can be awaited;
process exits cannot be awaited across sessions, so those are polled with
a bound.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench import nodes
from tests.fixtures.stores import _free_port
from tests.test_cli import ROOT

RAY = str(Path(sys.executable).with_name("ray"))
# A killed node's raylet refuses the GCS's health checks at once, so it is
# declared dead after about three periods (3 s instead of Ray's default of
# about 15 s) and its actors restart elsewhere; a node that is only slow
# (a loaded machine) still has the default timeout to answer.
FAST_NODE_DEATH = {
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
    # On a loaded machine a raylet can take longer than the default 10 s to register.
    "RAY_raylet_start_wait_time_s": "120",
}


def kill_session(sid: int) -> list[int]:
    """SIGKILL every process of session ``sid``; returns their pids."""
    pids = nodes.session_pids(sid)
    nodes.kill_pids(pids)
    return pids


def wait_gone(sid: int, within: float = 15.0) -> list[int]:
    """Poll until no process of session ``sid`` is left (or ``within`` passed); the rest."""
    deadline = time.monotonic() + within
    while (left := nodes.session_pids(sid)) and time.monotonic() < deadline:
        time.sleep(0.05)  # exits of processes that are not our children cannot be awaited
    return left


def processes_named(title: str, sid: int) -> list[int]:
    """The pids in session ``sid`` whose command line starts with ``title`` (Ray's proctitle)."""
    found = []
    for pid in nodes.session_pids(sid):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if cmdline.startswith(title):
            found.append(pid)
    return found


@dataclass
class RayNode:
    """``ray start --block``: the head (``head_address`` None) or a worker joining it.

    ``resources`` are the node's custom Ray resources; the actors that ask
    for them (``YEAFT_VP_RESOURCES``) are placed only on nodes that offer them.
    """

    env: dict[str, str]
    resources: dict[str, float] = field(default_factory=dict)
    head_address: str | None = None
    port: int = field(default_factory=_free_port)
    temp_dir: str = field(default_factory=lambda: tempfile.mkdtemp(prefix="yeaft-ray-"))
    proc: subprocess.Popen[str] | None = None
    output: list[str] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _command(self) -> list[str]:
        common = [
            RAY,
            "start",
            "--block",
            "--node-ip-address=127.0.0.1",
            "--num-cpus=1",
            f"--resources={json.dumps(self.resources)}",
            f"--node-manager-port={_free_port()}",
            f"--object-manager-port={_free_port()}",
            f"--dashboard-agent-listen-port={_free_port()}",
            f"--dashboard-agent-grpc-port={_free_port()}",
            f"--runtime-env-agent-port={_free_port()}",
            f"--metrics-export-port={_free_port()}",
        ]
        if self.head_address is not None:
            return [*common, f"--address={self.head_address}"]
        return [
            *common,
            "--head",
            f"--port={self.port}",
            "--include-dashboard=false",
            f"--temp-dir={self.temp_dir}",
            f"--ray-client-server-port={_free_port()}",
        ]

    async def start(self) -> None:
        self.proc = await asyncio.to_thread(
            subprocess.Popen,
            self._command(),
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        out = self.proc.stdout
        assert out is not None
        async with asyncio.timeout(90):
            while True:
                line = await asyncio.to_thread(out.readline)
                assert line, "ray start exited:\n" + "".join(self.output)
                self.output.append(line)
                if "Ray runtime started" in line:
                    break
        # It says little more until it stops; a thread drains the pipe meanwhile.
        asyncio.get_running_loop().run_in_executor(None, self._drain)

    def _drain(self) -> None:
        out = self.proc.stdout if self.proc else None
        if out is not None:
            with out:  # closed once the node has exited
                for line in out:
                    self.output.append(line)

    @property
    def sid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def kill(self) -> list[int]:
        """SIGKILL the node: its raylet, its workers and every actor on it, at once."""
        pids = kill_session(self.sid)
        assert self.proc is not None
        self.proc.wait(timeout=30)
        return pids

    def stop(self) -> list[int]:
        """SIGTERM the node, SIGKILL whatever of it lingers; returns pids left behind."""
        if self.proc is None:
            return []
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                kill_session(self.sid)
                self.proc.wait(timeout=30)
        left = wait_gone(self.sid)
        if left:
            kill_session(self.sid)
            left = wait_gone(self.sid)
        # A worker node never uses its directory (Ray takes the head's), but
        # it was made all the same.
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        return left


class Gateway(nodes.Gateway):
    """``bench.nodes.Gateway`` (port chosen by the OS, read from its ready line), awaited."""

    async def start(self, ray_address: str) -> None:
        await asyncio.to_thread(self.launch, ray_address)
        await asyncio.to_thread(self.wait_healthy, 90)
