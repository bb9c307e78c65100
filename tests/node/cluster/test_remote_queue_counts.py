"""What a node that does not host a queue reports about it (issue 16): its
message counts come from a node that does, over /management (the official
client's queue_info) and the HTTP API; and a consumer settling with
`modified` on a quorum queue gets every message through any node."""

from __future__ import annotations

import pytest
from rabbitmq_amqp_python_client import AddressHelper, ClassicQueueSpecification, Message, QuorumQueueSpecification
from rmq_client import connection, consume, request

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def publish(port: int, queue: str, n: int) -> None:
    with connection(port) as conn:
        publisher = conn.publisher(AddressHelper.queue_address(queue))
        for i in range(n):
            publisher.publish(Message(body=f"m{i}".encode()))
        publisher.close()


def test_counts_of_a_queue_this_node_does_not_host(cluster):
    with connection(cluster[0].amqp_port) as conn:
        m = conn.management()
        m.declare_queue(QuorumQueueSpecification(name="qq", quorum_initial_group_size=2))
        m.declare_queue(ClassicQueueSpecification(name="cq"))
        info = m.queue_info("qq")
    # the declaring node is the first member, and hosts the classic queue: `outside` hosts neither
    members = [cluster[0].ids_by_name.get(m, m) for m in info.members]  # node names, as cluster ids
    outside = next(i for i, node in enumerate(cluster.nodes) if node.id not in members)
    assert outside != 0
    publish(cluster[0].amqp_port, "qq", 1000)
    publish(cluster[0].amqp_port, "cq", 300)
    with connection(cluster[outside].amqp_port) as conn:
        m = conn.management()
        assert m.queue_info("qq").message_count == 1000
        assert m.queue_info("cq").message_count == 300
    assert cluster[outside].http("GET", "/api/queues/%2F/qq")["messages_ready"] == 1000
    listed = {q["name"]: q for q in cluster[outside].http("GET", "/api/queues/%2F")}
    assert (listed["qq"]["messages_ready"], listed["cq"]["messages_ready"]) == (1000, 300)
    # purge and delete through that node: done by the hosting node, counted as it counts
    with connection(cluster[outside].amqp_port) as conn:
        m = conn.management()
        assert m.purge_queue("qq") == 1000 and m.purge_queue("cq") == 300
        assert request(m, "DELETE", "/queues/qq", None) == (200, {"message_count": 0})
    publish(cluster[0].amqp_port, "cq", 5)
    with connection(cluster[outside].amqp_port) as conn:
        assert request(conn.management(), "DELETE", "/queues/cq", None) == (200, {"message_count": 5})


@pytest.mark.parametrize("through", ["leader", "follower", "outside"])
def test_a_quorum_consumer_settling_with_modified_gets_every_message_through_any_node(cluster, through):
    with connection(cluster[0].amqp_port) as conn:
        m = conn.management()
        m.declare_queue(QuorumQueueSpecification(name="qq", quorum_initial_group_size=2))
        info = m.queue_info("qq")
    ids = cluster[0].ids_by_name  # the replies name nodes by node name
    members, leader_id = [ids.get(m, m) for m in info.members], ids.get(info.leader, info.leader)
    hosts = [i for i in range(3) if cluster[i].id in members]
    leader = next(i for i in hosts if cluster[i].id == leader_id)
    node = {"leader": leader, "follower": next(i for i in hosts if i != leader),
            "outside": next(i for i in range(3) if i not in hosts)}[through]  # fmt: skip
    publish(cluster[0].amqp_port, "qq", 1000)
    with connection(cluster[node].amqp_port) as conn:
        got = consume(conn, AddressHelper.queue_address("qq"), 1000,
                      lambda msg: ("discard", {"x-opt-reason": "bad"}))  # fmt: skip
        assert len({bytes(g.body) for g in got}) == 1000
        assert conn.management().queue_info("qq").message_count == 0
