"""A quorum queue's consumer on a node without a replica, served through the queue proxy
(node/vhosts/remote_queue.py), on two real nodes in this process (real gRPC and
pysyncobj): its node leases it credit and holds what the client's credit does not allow
yet (node/vhosts/proxy_lease.py), and the deliveries leave the leader without waiting
for its next Raft log write (they answer for nothing in it)."""

from __future__ import annotations

import time

import pytest
from quorum_nodes import Publisher, drain_then_detach, served_from_the_hold, start_nodes, until
from raw_client import RawClient

from node.vhosts.quorum_groups import group_name

pytestmark = pytest.mark.timeout(120)

N = 20


def one_replica_queue(nodes: list, name: str) -> tuple:
    """A 1-replica quorum queue on the metadata leader's node: (that node, the other)."""
    leader = metadata_leader(nodes)
    leader.declare_queue(name, **{"x-queue-type": "quorum", "x-quorum-initial-group-size": 1})
    assert leader.call(lambda: leader.queue(name).members) == (leader.broker.cluster.node_id,)
    group = group_name("/", name)
    until(lambda: leader.call(lambda: leader.broker.quorum.leader_of(group)) is not None, "the replica leads")
    other = next(n for n in nodes if n is not leader)
    until(lambda: other.call(lambda: name in other.vhost.queues), "the proxy on the other node")
    return leader, other


def metadata_leader(nodes: list):
    """The node leading the metadata group: it sends its peers nothing that waits at its durability
    gate (a leader's AppendEntries skip it), so a held gate holds only what it sends by choice."""
    deadline = time.monotonic() + 30
    while True:
        for n in nodes:
            if n.call(n.broker.cluster.is_leader):
                return n
        assert time.monotonic() < deadline, "no metadata leader"
        time.sleep(0.01)


def held(node) -> int:
    return node.call(lambda: sum(len(g.held) for g in node.broker.queue_service.leases.gates.values()))


def test_the_consumers_node_serves_new_credit_from_its_lease_and_a_strict_client_gets_no_more(broker_factory,
                                                                                               tmp_path):  # fmt: skip
    leader, proxy = one_replica_queue(start_nodes(broker_factory, tmp_path, 2), "qq-proxied")
    Publisher(leader, "/queues/qq-proxied").publish(3 * N)
    client = RawClient(proxy.port)
    client.connect()
    link = client.receiver(client.begin(), "/queues/qq-proxied", credit=N)
    assert len(client.receive(N)) == N
    until(lambda: held(proxy) == N, "the lease held on the consumer's node")
    served_from_the_hold(client, link, leader, N)
    until(lambda: held(proxy) == N, "the lease topped up once the leader applied the Credit")
    drain_then_detach(client, link, leader, "qq-proxied", N)
    until(lambda: held(proxy) == 0 and not proxy.call(lambda: proxy.broker.queue_service.leases.gates), "gate gone")
    client.close()


def test_deliveries_to_a_consumers_node_do_not_wait_for_the_leaders_log_writes(broker_factory, tmp_path):
    # No alarm gossip during the test (its first is sent at start): a gated message to the
    # consumer's node would queue there, and the deliveries behind it, keeping their order.
    nodes = start_nodes(broker_factory, tmp_path, 2, quorum_consumer_lease=0, alarm_check_interval=3600)
    leader, proxy = one_replica_queue(nodes, "qq-ungated")
    client = RawClient(proxy.port)
    client.connect()
    link = client.receiver(client.begin(), "/queues/qq-ungated", credit=N)
    until(lambda: leader.call(lambda: leader.queue("qq-ungated").consumer_count) == 1, "the consumer attached")
    # From now on whatever the leader's transport sends behind its durability gate waits
    # (as for a Raft log write that does not land): the publishes commit all the same (a
    # one-member group counts its own write), and their deliveries must still leave.
    gate = leader.call(lambda: [leader.loop.create_future()])[0]  # (call() would await it)
    transport = leader.broker.cluster.transport
    leader.call(lambda: transport.before_flush.append(lambda: gate))
    # The leader's liveness announcement (every 0.5 s, to every member) goes on meanwhile:
    # one held at the gate would hold the deliveries queued behind it for that node.
    group = group_name("/", "qq-ungated")
    heard = proxy.call(lambda: proxy.broker.cluster.liveness.heard)
    until(lambda: proxy.call(lambda: proxy.broker.cluster.liveness.heard) > heard,
          "an announcement of the leader's while its log writes are held")  # fmt: skip
    assert proxy.call(lambda: proxy.broker.cluster.liveness.leader_of(group)) == leader.broker.cluster.node_id
    try:
        Publisher(leader, "/queues/qq-ungated").publish(N)
        assert len(client.receive(N)) == N
        assert link.delivery_count == N
    finally:
        leader.call(lambda: gate.set_result(None))
    client.close()
