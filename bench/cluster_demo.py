"""A scaled deployment on one machine, shown end to end (``make cluster-demo``).

Starts a Ray head (no CPUs, as in k8s/) and two worker nodes on 127.0.0.1,
token authentication on, then two ``yeaft serve`` gateways joining the
cluster on one Redis (its own key prefix, deleted at the end). Coordinator
and VP actors ask for the custom resource ``yeaft`` that only the workers
offer, and are spread over them by Ray's SPREAD strategy
(``YEAFT_ACTOR_PLACEMENT``, ``YEAFT_VP_RESOURCES``,
``YEAFT_COORDINATOR_RESOURCES``). Groups are created
until they fall on both coordinator shards.

ann watches every group on gateway A, bob on gateway B. ann asks in each
group and bob in the first; each must see every message and every reply.
Then, while a reply streams to ann, gateway A is killed (SIGKILL by pid);
ann reconnects to B with ``lastSeq`` and must miss nothing and get nothing
twice. It prints the actor placement per node, the shards that served
groups and the envelope counts, and stops every process it started.

    python bench/cluster_demo.py [--redis redis://127.0.0.1:6379/0]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import sys
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.nodes import Gateway, LocalCluster, NodeSpec, base_env

ROSTER = ["linus", "steve", "ken"]
# Each reply streams for about two seconds: long enough to kill a gateway mid-stream.
MODEL = "offline:default?ttft=0&tps=40&tokens=80"
PASSWORD = "correct horse battery staple"
SHARDS = 2
Frame = dict[str, Any]


@dataclass
class Report:
    """What the demo saw; ``ok`` says whether it showed what it should."""

    placement: dict[str, list[str]] = field(default_factory=dict)  # node -> actor names
    shards: dict[int, list[str]] = field(default_factory=dict)  # shard -> answered groups
    envelopes: dict[str, int] = field(default_factory=dict)  # client -> envelopes received
    replies: dict[str, int] = field(default_factory=dict)  # client -> VP results received
    ann_seqs: list[int] = field(default_factory=list)  # main group, A then B
    bob_seqs: list[int] = field(default_factory=list)  # main group, the same stretch
    missed: list[int] = field(default_factory=list)
    duplicated: list[int] = field(default_factory=list)
    killed_pid: int | None = None
    killed_mid_reply: bool = False
    leftover_pids: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            len([n for n, a in self.placement.items() if a]) >= 2
            and len(self.shards) >= 2
            and self.killed_mid_reply
            and not self.missed
            and not self.duplicated
            and self.ann_seqs == self.bob_seqs
            and not self.leftover_pids
        )

    def text(self) -> str:
        lines = ["actor placement (Ray state API):"]
        for node, names in sorted(self.placement.items()):
            lines.append(f"  {node}: {len(names)} actors: {', '.join(sorted(names))}")
        for shard, groups in sorted(self.shards.items()):
            lines.append(f"coordinator shard {shard} served {len(groups)} groups: {groups}")
        for who, n in self.envelopes.items():
            lines.append(f"{who}: {n} envelopes, {self.replies[who]} VP results")
        lines.append(f"gateway A (pid {self.killed_pid}) killed mid-reply: {self.killed_mid_reply}")
        lines.append(
            f"first group, ann's stream over A then B: {len(self.ann_seqs)} envelopes "
            f"(seq {self.ann_seqs[0] if self.ann_seqs else '-'}.."
            f"{self.ann_seqs[-1] if self.ann_seqs else '-'}), "
            f"same seqs as bob: {self.ann_seqs == self.bob_seqs}"
        )
        lines.append(f"missed: {len(self.missed)}  duplicated: {len(self.duplicated)}")
        lines.append(f"processes left behind: {self.leftover_pids}")
        lines.append("OK" if self.ok else "FAILED")
        return "\n".join(lines)


# A client pings this often, as the web and terminal clients do: the gateway
# closes a socket that sent nothing for YEAFT_IDLE_TIMEOUT (60 s) with 4408.
PING_EVERY_S = 20.0


class Client:
    """One person's WebSocket to one gateway; every frame read is kept."""

    def __init__(self, who: str, conn: Any) -> None:
        self.who = who
        self.conn = conn
        self.received: list[Frame] = []
        self._pings = asyncio.create_task(self._ping(), name=f"pings of {who}")

    @classmethod
    async def open(cls, who: str, gw: Gateway, token: str) -> Client:
        from websockets.asyncio.client import connect

        headers = {"Authorization": f"Bearer {token}"}
        return cls(who, await connect(gw.ws_url, additional_headers=headers, max_size=None))

    async def _ping(self) -> None:
        with contextlib.suppress(Exception):  # ends with the socket
            while True:
                await asyncio.sleep(PING_EVERY_S)  # a timer: there is nothing to await
                await self.send({"type": "ping"})

    async def close(self) -> None:
        self._pings.cancel()
        await asyncio.gather(self._pings, return_exceptions=True)
        with contextlib.suppress(Exception):
            await self.conn.close()

    async def send(self, frame: Frame) -> None:
        await self.conn.send(json.dumps(frame))

    async def until(self, pred: Callable[[Frame], bool], within: float = 60) -> Frame:
        """Read until a frame matches ``pred`` (or one already read did: then at once)."""
        for old in self.received:
            if pred(old):
                return old
        async with asyncio.timeout(within):
            while True:
                frame: Frame = json.loads(await self.conn.recv())
                self.received.append(frame)
                if pred(frame):
                    return frame

    async def count(self, pred: Callable[[Frame], bool], n: int, within: float = 90) -> None:
        async with asyncio.timeout(within):
            while sum(map(pred, self.received)) < n:
                self.received.append(json.loads(await self.conn.recv()))

    async def subscribe(self, gid: str, **extra: Any) -> None:
        await self.send({"type": "subscribe", "groupId": gid, **extra})
        reply = await self.until(
            lambda f: f.get("action") == "subscribed" and (f.get("group") or {}).get("id") == gid
        )
        self.received.remove(reply)

    def log(self, gid: str) -> list[Frame]:
        return [f for f in self.received if "seq" in f and f.get("groupId") == gid]


def is_result(gid: str, vp: str | None = None) -> Callable[[Frame], bool]:
    return lambda f: (
        "seq" in f
        and f.get("groupId") == gid
        and f.get("type") == "yeaft_output"
        and f["data"].get("type") == "result"
        and (vp is None or f.get("vpId") == vp)
    )


def is_said(gid: str, author: str, cmid: str) -> Callable[[Frame], bool]:
    return lambda f: (
        f.get("groupId") == gid
        and f.get("type") == "group_message"
        and f.get("author") == author
        and f.get("clientMessageId") == cmid
    )


def chat(gid: str, text: str, cmid: str) -> Frame:
    return {"type": "yeaft_session_chat", "groupId": gid, "text": text, "clientMessageId": cmid}


async def _login(http: Any, gw: Gateway, user: str) -> str:
    reply = await http.post(f"{gw.url}/api/login", json={"username": user, "password": PASSWORD})
    reply.raise_for_status()
    return str(reply.json()["token"])


async def _groups_on_every_shard(http: Any, gw: Gateway, token: str) -> list[str]:
    """Create groups (bob a member of each) until every shard owns at least one."""
    from coordinator.shards import shard_of

    auth = {"Authorization": f"Bearer {token}"}
    gids: list[str] = []
    while len({shard_of(g, SHARDS) for g in gids}) < SHARDS and len(gids) < 20:
        made = await http.post(
            f"{gw.url}/api/groups",
            json={"name": f"crew{len(gids)}", "roster": ROSTER},
            headers=auth,
        )
        made.raise_for_status()
        gid = str(made.json()["id"])
        added = await http.post(
            f"{gw.url}/api/groups/{gid}/members", json={"username": "bob"}, headers=auth
        )
        added.raise_for_status()
        gids.append(gid)
    return gids


def placement(cluster: LocalCluster, prefix: str) -> dict[str, list[str]]:
    """Node label -> names of this deployment's live actors on it, from Ray's state API."""
    from ray.util.state import list_actors, list_nodes

    nodes = list_nodes(address=cluster.dashboard_url)
    labels: dict[str, str] = {}
    for n in nodes:
        extra = sorted(k for k in n.resources_total if not k.startswith("node"))
        kind = "head" if n.is_head_node else "worker"
        labels[n.node_id] = f"{kind} {n.node_id[:8]} ({', '.join(extra)})"
    found: dict[str, list[str]] = {label: [] for label in labels.values()}
    for actor in list_actors(address=cluster.dashboard_url, limit=10_000):
        if actor.state == "ALIVE" and actor.name and actor.name.startswith(prefix):
            node = labels.get(actor.node_id or "", str(actor.node_id))
            found.setdefault(node, []).append(actor.name[len(prefix) :])
    return found


async def drive(a: Gateway, b: Gateway, report: Report, store_config: Any) -> None:
    import httpx

    from coordinator.shards import shard_of
    from gateway import users

    store = store_config.open_store()
    try:
        for name in ("ann", "bob"):
            await users.add_user(store, name, PASSWORD)
    finally:
        await store.close()
    async with httpx.AsyncClient(timeout=60) as http:
        ann_token = await _login(http, a, "ann")
        bob_token = await _login(http, b, "bob")
        gids = await _groups_on_every_shard(http, a, ann_token)
    ann = await Client.open("ann@A", a, ann_token)
    bob = await Client.open("bob@B", b, bob_token)
    for gid in gids:
        await ann.subscribe(gid)
        await bob.subscribe(gid)

    # ann on A asks every VP in every group; bob on B sees it all, and back.
    for i, gid in enumerate(gids):
        await ann.send(chat(gid, "@linus @steve @ken how should we shard the cache?", f"a{i}"))
    for gid in gids:
        for client in (ann, bob):
            await client.count(is_result(gid), len(ROSTER))
            assert sum(map(is_said(gid, "ann", f"a{gids.index(gid)}"), client.log(gid))) == 1
        report.shards.setdefault(shard_of(gid, SHARDS), []).append(gid)
    main = gids[0]
    await bob.send(chat(main, "@steve and the eviction policy?", "b0"))
    for client in (ann, bob):
        await client.count(is_result(main), len(ROSTER) + 1)
        assert sum(map(is_said(main, "bob", "b0"), client.log(main))) == 1

    # ann asks linus; gateway A dies while his reply streams to her.
    start = len(ann.log(main))
    await ann.send(chat(main, "@linus and what if a shard dies?", "a-last"))
    await ann.until(
        lambda f: (
            f.get("vpId") == "linus"
            and f.get("type") == "yeaft_output"
            and f["data"].get("type") == "assistant"
            and f.get("seq", -1) > (ann.log(main)[start - 1]["seq"])
        )
    )
    report.killed_pid = a.pid
    a.kill()
    seen_on_a = ann.log(main)
    report.killed_mid_reply = not any(map(is_result(main, "linus"), seen_on_a[start:]))
    ann_b = await Client.open("ann@B", b, ann_token)
    await ann_b.subscribe(main, lastSeq=seen_on_a[-1]["seq"])
    await ann_b.count(is_result(main, "linus"), 1)
    await bob.count(is_result(main), len(ROSTER) + 2)

    ann_seqs = [f["seq"] for f in seen_on_a + ann_b.log(main)]
    bob_log = bob.log(main)
    bob_seqs = [f["seq"] for f in bob_log if f["seq"] >= ann_seqs[0]]
    report.ann_seqs, report.bob_seqs = ann_seqs, bob_seqs
    report.missed = sorted(set(bob_seqs) - set(ann_seqs))
    report.duplicated = sorted({s for s in ann_seqs if ann_seqs.count(s) > 1})
    for client, frames in ((ann, ann.received + ann_b.received), (bob, bob.received)):
        envelopes = [f for f in frames if "seq" in f]
        report.envelopes[client.who.split("@")[0]] = len(envelopes)
        report.replies[client.who.split("@")[0]] = sum(
            any(is_result(g)(f) for g in gids) for f in envelopes
        )
    for client in (ann_b, bob, ann):
        await client.close()


async def run(redis_url: str, work: Path) -> Report:
    """The whole demo: start, drive, look, stop. Never leaves a process behind."""
    from store import StoreConfig

    report = Report()
    prefix = f"yeaft-demo-{uuid.uuid4().hex[:10]}"
    # One token for every node, gateway and this process (whose state API
    # client reads it from the environment): the caller's, or a fresh one.
    token = os.environ.get("RAY_AUTH_TOKEN") or secrets.token_hex(32)
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
    env = base_env(token)
    # Whatever this process's own settings, the demo's gateways get these.
    env = {k: v for k, v in env.items() if not k.startswith("YEAFT_")}
    workers = [NodeSpec(1, {"yeaft": 100}), NodeSpec(1, {"yeaft": 100})]
    cluster = LocalCluster(workers, env=env)
    gw_env = {
        **env,
        "YEAFT_REDIS_URL": redis_url,
        "YEAFT_REDIS_PREFIX": prefix,
        "YEAFT_JWT_SECRET": secrets.token_urlsafe(48),
        "YEAFT_MODEL": MODEL,
        "YEAFT_RAY_NAMESPACE": prefix,
        "YEAFT_COORDINATOR_SHARDS": str(SHARDS),
        "YEAFT_ACTOR_PLACEMENT": "spread",
        "YEAFT_VP_RESOURCES": json.dumps({"yeaft": 0.01}),
        "YEAFT_COORDINATOR_RESOURCES": json.dumps({"yeaft": 0.01}),
        "YEAFT_LOG_LEVEL": "warning",
    }
    a = Gateway(gw_env, work / "a", "A")
    b = Gateway(gw_env, work / "b", "B")
    try:
        await asyncio.to_thread(cluster.start)
        for gw in (a, b):
            gw.launch(cluster.address)
        await asyncio.gather(asyncio.to_thread(a.wait_healthy), asyncio.to_thread(b.wait_healthy))
        await drive(a, b, report, StoreConfig(redis_url, work / "store", redis_prefix=prefix))
        report.placement = await asyncio.to_thread(placement, cluster, "")
    finally:
        a.stop()
        b.stop()
        report.leftover_pids = await asyncio.to_thread(cluster.stop)
        await _delete_prefix(redis_url, prefix)
    return report


async def _delete_prefix(url: str, prefix: str) -> None:
    from redis import asyncio as aioredis

    client = aioredis.Redis.from_url(url)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=1000)]
        for i in range(0, len(keys), 500):
            await client.delete(*keys[i : i + 500])
    finally:
        await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="yeaft-demo-") as tmp:
        report = asyncio.run(run(args.redis, Path(tmp)))
    print(report.text())
    sys.exit(0 if report.ok else 1)


if __name__ == "__main__":
    main()
