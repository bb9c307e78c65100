"""The consumer timeout of a consumer attached through a node that does not hold
the queue (node/vhosts/remote_queue.py), on two real nodes in this process: the
queue's node ends it with a `gone` (resource-limit-exceeded) and lets it go at
once, since the consumer's node sends no detach back; the message goes to
another consumer. A classic queue, and a quorum queue with one replica."""

from __future__ import annotations

import pytest
from proton import Message
from proton.utils import BlockingConnection, LinkDetached
from quorum_nodes import start_nodes, until

from node.vhosts.quorum_groups import group_name

pytestmark = pytest.mark.timeout(120)


def url(node) -> str:
    return f"amqp://guest:guest@127.0.0.1:{node.port}"


def times_out_through(proxy, owner, queue: str) -> None:
    slow_conn = BlockingConnection(url(proxy), timeout=10)
    fast_conn = BlockingConnection(url(owner), timeout=10)
    try:
        slow = slow_conn.create_receiver(f"/queues/{queue}", name="slow", credit=1)
        slow_conn.create_sender(f"/queues/{queue}").send(Message(body="held"))
        assert slow.receive(timeout=10).body == "held"
        fast = fast_conn.create_receiver(f"/queues/{queue}", name="fast", credit=1)
        with pytest.raises(LinkDetached) as detached:
            slow.receive(timeout=15)
        condition = detached.value.link.remote_condition
        assert condition.name == "amqp:resource-limit-exceeded" and "consumer timeout" in condition.description
        again = fast.receive(timeout=10)
        assert again.body == "held" and not again.first_acquirer
        fast.accept()
    finally:
        slow_conn.close()
        fast_conn.close()
    until(lambda: owner.call(lambda: owner.queue(queue).consumer_count) == 0, "the slow consumer let go")


def test_a_remote_consumer_times_out_on_classic_and_quorum_queues(broker_factory, tmp_path):
    nodes = start_nodes(broker_factory, tmp_path, 2)
    owner, proxy = nodes
    owner.declare_queue("cq", **{"x-consumer-timeout": 1000})
    owner.declare_queue("qq", **{"x-queue-type": "quorum", "x-quorum-initial-group-size": 1,
                                 "x-consumer-timeout": 1000})  # fmt: skip
    until(lambda: owner.call(lambda: owner.broker.quorum.leader_of(group_name("/", "qq"))) is not None, "a leader")
    until(lambda: proxy.call(lambda: {"cq", "qq"} <= set(proxy.vhost.queues)), "the proxies")
    times_out_through(proxy, owner, "cq")
    times_out_through(proxy, owner, "qq")


def test_a_consumer_on_a_follower_times_out_where_its_link_is(broker_factory, tmp_path):
    """Three replicas: the leader ticks, every replica applies the Tick, and the follower
    holding the consumer's link ends it; the message goes to a consumer on the leader."""
    nodes = start_nodes(broker_factory, tmp_path, 3)
    nodes[0].declare_queue("qq", **{"x-queue-type": "quorum", "x-quorum-initial-group-size": 3,
                                    "x-consumer-timeout": 1000})  # fmt: skip
    group = group_name("/", "qq")
    for n in nodes:
        until(lambda n=n: n.call(lambda: n.broker.quorum.leader_of(group)) is not None, "a leader everywhere")
    leader_id = nodes[0].call(lambda: nodes[0].broker.quorum.leader_of(group))
    leader = next(n for n in nodes if n.broker.cluster.node_id == leader_id)
    follower = next(n for n in nodes if n is not leader)
    times_out_through(follower, leader, "qq")
