"""A one-replica quorum queue takes a second member (its one-member Raft group commits the
change only with the new member's answer, so the metadata names the member first: see
QuorumQueues._grow_single), keeps its messages and serves them from the new member."""

from __future__ import annotations

import pytest
from quorum_nodes import Publisher, start_nodes, until

pytestmark = pytest.mark.timeout(120)


def test_a_one_replica_queue_grows_and_the_new_member_has_its_messages(broker_factory, tmp_path):
    nodes = start_nodes(broker_factory, tmp_path, 2)
    n0, n1 = nodes
    n0.declare_queue("single", **{"x-queue-type": "quorum", "x-quorum-initial-group-size": 1})
    first = n0.call(lambda: n0.broker.metadata.state.queue("/", "single").replicas)[0]
    holder = next(n for n in nodes if n.broker.cluster.node_id == first)
    other = next(n for n in nodes if n is not holder)
    Publisher(holder, "/queues/single").publish(20)
    members = holder.call(lambda: holder.broker.quorum.change_member("/", "single", other.broker.cluster.node_id,
                                                                     True))  # fmt: skip
    assert sorted(members) == sorted(n.broker.cluster.node_id for n in nodes)
    until(lambda: other.call(lambda: getattr(other.vhost.queues.get("single"), "message_count", None)) == 20,
          "the new member's copy holds the 20 messages")  # fmt: skip
