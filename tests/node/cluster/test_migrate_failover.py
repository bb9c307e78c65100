"""Issue 34's "done when", small: `warren migrate` moves N x 1 KB from a
RabbitMQ 3.10 durable classic queue into a quorum queue of a 3-node Warren,
on-confirm, while a producer keeps publishing to RabbitMQ, and the node
running the shovel is killed with -9 midway. Every message RabbitMQ
confirmed arrives; duplicates stay within the in-flight window. The scenario
is bench/migrate_failover.py's, which runs it with N = 100,000."""

from __future__ import annotations

import os

import pytest
from cluster_procs import free_ports
from rabbit_setup import bench_module, rabbit_node_class

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

N, PREFETCH = 5000, 200


@pytest.fixture
def bench_modules():
    migrate_failover, RabbitNode = bench_module("migrate_failover"), rabbit_node_class()
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
