"""Three Ray nodes on one machine, two gateways on one Redis: ``bench/cluster_demo.py`` checked.

The demo starts a head and two worker nodes (``ray start``, token auth),
two ``yeaft serve`` processes joining them, and drives groups on both
coordinator shards with ann on gateway A and bob on gateway B; gateway A is
SIGKILLed mid-reply and ann resumes on B with ``lastSeq``. Here every claim
it prints is asserted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import cluster_demo
from coordinator.shards import shard_of

# Three nodes and two gateways start in about a minute on an idle machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


async def test_actors_spread_over_nodes_and_a_killed_gateway_loses_nothing(
    redis_server_url: str | None, tmp_path: Path
) -> None:
    if redis_server_url is None:
        pytest.skip("two gateways share their state through Redis, and none is available")
    report = await cluster_demo.run(redis_server_url, tmp_path)
    print(report.text())

    # Placement: the coordinator and VP actors ask for the "yeaft" resource,
    # which only the two workers offer, and SPREAD puts them on both.
    hosting = {node: names for node, names in report.placement.items() if names}
    assert len(report.placement) == 3 and len(hosting) == 2, report.placement
    assert all(node.startswith("worker") for node in hosting), hosting
    every = sorted(name for names in hosting.values() for name in names)
    assert every == ["coordinator:0", "coordinator:1"] + [
        f"vp:{v}" for v in sorted(cluster_demo.ROSTER)
    ]
    # Both shards served groups, each group by the shard its id hashes to.
    assert sorted(report.shards) == [0, 1]
    for shard, groups in report.shards.items():
        assert all(shard_of(g, cluster_demo.SHARDS) == shard for g in groups)

    # Both people got every envelope and every reply of every group.
    groups = sum(len(g) for g in report.shards.values())
    assert report.replies == {"ann": 3 * groups + 2, "bob": 3 * groups + 2}
    assert report.envelopes["ann"] == report.envelopes["bob"]

    # A died mid-reply; ann's stream over A then B is bob's, exactly.
    assert report.killed_mid_reply
    seqs = report.ann_seqs
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert seqs == report.bob_seqs
    assert report.missed == [] and report.duplicated == []
    assert report.leftover_pids == []
    assert report.ok
