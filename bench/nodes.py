"""Several Ray nodes and ``yeaft serve`` gateways on one machine, as processes this code owns.

A :class:`LocalCluster` is a ``ray start --head`` plus worker nodes
(``ray start --address ...``) on 127.0.0.1, every one with token
authentication (one random token, passed explicitly in each process's
environment), free ports and one temp dir of its own. Each node runs as
``ray start --block`` in a new session, so stopping it means signalling that
process and then killing, by pid, whatever of its session (or anything else
naming its temp dir) is left: nothing else on the machine is touched, and
``ray stop`` (which stops every Ray node of the machine) is never used.

A :class:`Gateway` is one ``yeaft serve --ray-address`` process joining it.
Both are used by ``bench/cluster_demo.py`` (``make cluster-demo``),
``bench/scale.py`` and the multi-node tests.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from gateway.server import READY_LINE

ROOT = Path(__file__).resolve().parents[1]
RAY = str(Path(sys.executable).with_name("ray"))
# Variables that would point a child at someone else's cluster or provider.
_FOREIGN = ("RAY_ADDRESS", "RAY_AUTH_TOKEN_PATH", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")


# The line `yeaft serve` prints once it accepts connections: its URL, then the port.
READY = re.compile(re.escape(READY_LINE) + r" (http://\S+:(\d+))")


_GIVEN: set[int] = set()


def free_port() -> int:
    """A port nothing listens on now, and one this process has not handed out before.

    The second rule matters: a port bound and closed is free again at once,
    so two calls in a row can name the same one, and ``ray start`` refuses
    to give one port to two of its components.
    """
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port


def session_pids(sid: int) -> list[int]:
    """Every live process in session ``sid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) == sid:
                    found.append(int(entry.name))
            except (ProcessLookupError, PermissionError):
                continue
    return found


def pids_naming(marker: str) -> list[int]:
    """Every live process whose command line contains ``marker`` (a temp dir of ours)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            found.append(int(entry.name))
    return found


def kill_pids(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def base_env(token: str | None = None) -> dict[str, str]:
    """This process's environment without foreign Ray or provider settings, with token auth on."""
    env = {k: v for k, v in os.environ.items() if k not in _FOREIGN}
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token or secrets.token_hex(32))
    return env


@dataclass
class NodeSpec:
    """A worker node: its CPUs and custom resources (``ray start --resources``)."""

    num_cpus: int = 1
    resources: dict[str, float] = field(default_factory=dict)


@dataclass
class LocalCluster:
    """A head (``head_cpus``, usually 0 as in the k8s manifests) and ``workers``."""

    workers: list[NodeSpec]
    env: dict[str, str] = field(default_factory=base_env)
    head_cpus: int = 0
    # The head's dashboard serves Ray's state API (which actor is on which node).
    dashboard: bool = True
    port: int = field(default_factory=free_port)
    dashboard_port: int = field(default_factory=free_port)
    temp_dir: str = field(default_factory=lambda: tempfile.mkdtemp(prefix="yeaft-ray-"))
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def dashboard_url(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    def _node_env(self) -> dict[str, str]:
        # Actors import the project from this checkout. Detached actors never
        # let a node drain on SIGTERM: do not wait 30 s for it.
        pythonpath = os.pathsep.join(filter(None, [str(ROOT), self.env.get("PYTHONPATH")]))
        return {
            **self.env,
            "PYTHONPATH": pythonpath,
            "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "1",
            # On a loaded machine a raylet takes longer than Ray's default
            # 30 s to register; give it what start() allows.
            "RAY_raylet_start_wait_time_s": "240",
        }

    def _start_node(self, args: list[str], name: str) -> None:
        log = (Path(self.temp_dir) / f"{name}.out").open("ab")
        command = [
            RAY,
            "start",
            "--block",
            "--node-ip-address=127.0.0.1",
            "--disable-usage-stats",
            f"--temp-dir={self.temp_dir}",
            f"--node-manager-port={free_port()}",
            f"--object-manager-port={free_port()}",
            f"--dashboard-agent-listen-port={free_port()}",
            f"--dashboard-agent-grpc-port={free_port()}",
            f"--runtime-env-agent-port={free_port()}",
            f"--metrics-export-port={free_port()}",
            *args,
        ]
        proc = subprocess.Popen(
            command,
            cwd=ROOT,
            env=self._node_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.procs.append(proc)

    def start(self, timeout_s: float = 300) -> None:
        self._start_node(
            [
                "--head",
                f"--port={self.port}",
                f"--num-cpus={self.head_cpus}",
                f"--include-dashboard={str(self.dashboard).lower()}",
                "--dashboard-host=127.0.0.1",
                f"--dashboard-port={self.dashboard_port}",
                f"--ray-client-server-port={free_port()}",
            ],
            "head",
        )
        self._wait_started("head", timeout_s)
        for i, spec in enumerate(self.workers):
            self._start_node(
                [
                    f"--address={self.address}",
                    f"--num-cpus={spec.num_cpus}",
                    f"--resources={json.dumps(spec.resources)}",
                ],
                f"worker{i + 1}",
            )
            # One at a time: two raylets registering at once on one IP can
            # each wait for the other's node record and time out.
            self._wait_started(f"worker{i + 1}", timeout_s)

    def _wait_started(self, name: str, timeout_s: float) -> None:
        """Until node ``name``'s ``ray start`` says it started (it has registered with the GCS)."""
        out = Path(self.temp_dir) / f"{name}.out"
        deadline = time.monotonic() + timeout_s
        while "Ray runtime started" not in out.read_text(errors="replace"):
            if self.procs[-1].poll() is not None:
                raise RuntimeError(f"Ray node {name} exited:\n{self.logs()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"Ray node {name} did not come up:\n{self.logs()}")
            time.sleep(0.2)  # the node starts on its own; there is nothing to await

    def logs(self) -> str:
        parts = []
        for path in sorted(Path(self.temp_dir).glob("*.out")):
            parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-2000:]}")
        return "\n".join(parts)

    def kill_node(self, index: int) -> None:
        """SIGKILL worker node ``index`` (1-based) and every process of its session."""
        proc = self.procs[index]
        kill_pids(session_pids(proc.pid))
        proc.wait(timeout=30)

    def _leftovers(self) -> list[int]:
        pids = set(pids_naming(self.temp_dir))
        for proc in self.procs:
            pids.update(session_pids(proc.pid))
        return sorted(p for p in pids if p != os.getpid())

    def stop(self) -> list[int]:
        """Stop every node (workers first), kill what lingers; returns pids that would not die."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                kill_pids(session_pids(proc.pid))
                proc.wait(timeout=30)
        left: list[int] = []
        for _ in range(200):
            left = self._leftovers()
            if not left:
                break
            if _ == 40:
                kill_pids(left)
            time.sleep(0.05)  # process exits cannot be awaited from here
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        return left


@dataclass
class Gateway:
    """One ``yeaft serve`` process joining a cluster, in a session of its own.

    It listens on ``port``; 0 (the default) lets the OS choose, and the port
    is read from the server's ready line. A port picked here in advance can
    be taken by any process before the server binds it (a Ray node's metrics
    server once was, and answered the health check).
    """

    env: dict[str, str]
    data_dir: Path
    name: str = "gateway"
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    _log_from: int = 0

    @property
    def url(self) -> str:
        assert self.port, f"gateway {self.name} has not said where it listens"
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return self.url.replace("http", "ws", 1) + "/ws"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def launch(self, ray_address: str) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        path = self.data_dir / "serve.log"
        self._log_from = path.stat().st_size if path.exists() else 0
        log = path.open("ab")
        command = [sys.executable, "-m", "gateway.cli", "serve", "--port", str(self.port)]
        self.proc = subprocess.Popen(
            [*command, "--ray-address", ray_address],
            cwd=ROOT,
            # The offline model at full speed unless the caller's env says otherwise.
            env={**dict(YEAFT_OFFLINE_TPS="0"), **self.env, "YEAFT_DATA_DIR": str(self.data_dir)},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()

    def wait_healthy(self, timeout_s: float = 120) -> None:
        """Until this launch's ready line is in the log and ``/healthz`` answers as ours."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"gateway {self.name} exited:\n{self.log()}")
            if ready := READY.search(self._new_output()):
                self.port = int(ready.group(2))
                with urllib.request.urlopen(f"{self.url}/healthz", timeout=30) as reply:
                    body = json.loads(reply.read())
                if body != {"status": "ok"}:
                    raise RuntimeError(f"{self.url}/healthz is not gateway {self.name}'s: {body}")
                return
            time.sleep(0.1)  # the server comes up on its own; nothing to await
        raise TimeoutError(f"gateway {self.name} did not start:\n{self.log()}")

    def _new_output(self) -> str:
        path = self.data_dir / "serve.log"
        with path.open("rb") as log:
            log.seek(self._log_from)
            return log.read().decode(errors="replace")

    def log(self) -> str:
        path = self.data_dir / "serve.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def kill(self) -> None:
        """SIGKILL the gateway (and anything in its session), by pid; the cluster stays."""
        if self.proc is None or self.proc.poll() is not None:
            return
        kill_pids(session_pids(self.proc.pid))
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()
