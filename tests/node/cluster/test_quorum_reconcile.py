"""Quorum queue membership reconciliation (node/vhosts/quorum_reconcile.py) on three real
nodes in this process: a queue below its target group size (x-quorum-target-group-size,
or the target-group-size policy key) grows onto the members without a replica, and grows
back after a replica is removed; a queue without a target keeps its size; a one-replica
queue grows too."""

from __future__ import annotations

import pytest
from quorum_nodes import start_nodes, until

from node.vhosts.quorum_reconcile import target_of

pytestmark = pytest.mark.timeout(120)


def replicas(node, name: str) -> tuple:
    return node.call(lambda: node.broker.metadata.state.queue("/", name).replicas)


def test_queues_grow_to_their_target_group_size_and_back_after_a_removal(broker_factory, tmp_path):
    nodes = start_nodes(broker_factory, tmp_path, 3, quorum_reconcile_interval=0.2)
    n0 = nodes[0]
    n0.declare_queue("grows", **{"x-queue-type": "quorum", "x-quorum-initial-group-size": 2,
                                 "x-quorum-target-group-size": 3})  # fmt: skip
    n0.declare_queue("stays", **{"x-queue-type": "quorum", "x-quorum-initial-group-size": 2})
    n0.declare_queue("single", **{"x-queue-type": "quorum", "x-quorum-initial-group-size": 1,
                                  "x-quorum-target-group-size": 3})  # fmt: skip
    until(lambda: len(replicas(n0, "grows")) == 3, "grown to its target of 3")
    assert len(replicas(n0, "stays")) == 2
    until(lambda: len(replicas(n0, "single")) == 3, "the one-replica queue grown to 3")
    # the policy key: the larger of argument and policy wins
    n0.call(lambda: n0.broker.metadata.run(_policy()))
    until(lambda: len(replicas(n0, "stays")) == 3, "grown to the policy's target of 3")
    # a replica removed by an operator comes back
    leader = replicas(n0, "grows")[0]
    removed = next(m for m in replicas(n0, "grows") if m != leader)
    holder = next(n for n in nodes if n.broker.cluster.node_id != removed)
    holder.call(lambda: holder.broker.quorum.change_member("/", "grows", removed, False))
    until(lambda: len(replicas(n0, "grows")) == 3 and removed in replicas(n0, "grows"), "grown back")


def _policy():
    from metadata import commands as mc
    from node.vhosts.metadata_store import new_key

    return mc.SetPolicy(new_key(), "/", "two", "^stays$", "queues", definition={"target-group-size": 3})


def test_the_larger_of_argument_and_policy_is_the_target():
    assert target_of({}) is None
    assert target_of({"x-quorum-target-group-size": 3}) == 3
    assert target_of({"x-quorum-target-group-size": 3, "x-target-group-size": 5}) == 5
    assert target_of({"x-quorum-target-group-size": True}) is None  # not a size
