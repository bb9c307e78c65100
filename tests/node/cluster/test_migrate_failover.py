"""Issue 34's "done when", small: `warren migrate` moves N x 1 KB from a
RabbitMQ 3.10 durable classic queue into a quorum queue of a 3-node Warren,
on-confirm, while a producer keeps publishing to RabbitMQ, and the node
running the shovel is killed with -9 midway. Every message RabbitMQ
confirmed arrives; duplicates stay within the in-flight window. The scenario
is bench/migrate_failover.py's, which runs it with N = 100,000."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cluster_procs import free_ports

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[3]
N, PREFETCH = 5000, 200


@pytest.fixture
def bench_modules():
    setup = subprocess.run(["sh", str(REPO / "bench" / "setup.sh")], capture_output=True, text=True, timeout=900)
    if setup.returncode != 0:
        pytest.skip(f"bench/setup.sh could not install RabbitMQ: {setup.stderr.strip()[-300:]}")
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import migrate_failover
        from rabbitmq import RabbitNode
    finally:
        sys.path.remove(str(REPO / "bench"))
    return migrate_failover, RabbitNode


def test_confirmed_messages_survive_the_shovel_node_killed_mid_migration(cluster, bench_modules):
    migrate_failover, RabbitNode = bench_modules
    amqp, mgmt, dist = free_ports(3)
    with RabbitNode(amqp_port=amqp, mgmt_port=mgmt, dist_port=dist,
                    nodename=f"warren_migrate_kill_{os.getpid()}@localhost") as rabbit:  # fmt: skip
        report = migrate_failover.scenario(cluster, rabbit, N, PREFETCH, extra=1000)
    print(f"\n{report}")
    assert report["confirmed"] == N + 1000  # the producer's messages were all confirmed too
    assert report["arrived_distinct"] >= report["confirmed"] and report["duplicates"] <= PREFETCH
