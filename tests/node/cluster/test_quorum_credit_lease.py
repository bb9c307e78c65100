"""A follower leases its consumer up to the client's credit again and holds what the
client's credit does not allow yet (queues/quorum/credit_lease.py), on three real
nodes in this process (real gRPC and pysyncobj). The leader's loop is held on an
Event: a FLOW the follower could only pass through the log would wait for it."""

from __future__ import annotations

import pytest
from quorum_nodes import Publisher, drain_then_detach, quorum_queue, served_from_the_hold, start_nodes, until
from raw_client import RawClient

pytestmark = pytest.mark.timeout(120)

N = 20


def held(node, name: str) -> int:
    return node.call(lambda: sum(len(g.held) for g in node.queue(name).links.gates.values()))


def test_a_follower_serves_new_credit_from_what_it_holds_and_a_strict_client_gets_no_more(broker_factory, tmp_path):
    nodes = start_nodes(broker_factory, tmp_path, 3)  # quorum_consumer_lease at its default, 1000
    leader, follower, _other, _ = quorum_queue(nodes, "qq-lease")
    Publisher(leader, "/queues/qq-lease").publish(3 * N)
    client = RawClient(follower.port)
    client.connect()
    link = client.receiver(client.begin(), "/queues/qq-lease", credit=N)
    assert len(client.receive(N)) == N
    until(lambda: held(follower, "qq-lease") == N, "the lease held beside the client's credit")
    served_from_the_hold(client, link, leader, N)
    until(lambda: held(follower, "qq-lease") == N, "the lease topped up once the Credit committed")
    drain_then_detach(client, link, leader, "qq-lease", N)
    client.close()
