"""A quorum queue holds its publishers while the replica that serves its
consumer lags the leader (node/vhosts/quorum_flow.py), on three real nodes
in this process (each on its own loop thread, real gRPC and pysyncobj).

The consumer's replica is made to lag by holding its node's event loop on
an Event: it neither applies nor reports, while the leader and the other
follower go on committing. The publishers (raw AMQP clients, so that every
FLOW is seen) are on the leader and on the other follower."""

from __future__ import annotations

import pytest
from quorum_nodes import Publisher, quorum_queue, stall, start_nodes, until
from raw_client import RawClient

from node.vhosts.quorum_groups import group_name

pytestmark = pytest.mark.timeout(120)

BOUND = 40  # quorum_consumer_lag_max
CREDIT = 10  # publisher_credit: a held publisher runs dry after a few messages


@pytest.fixture
def cluster_of(broker_factory, tmp_path):
    """`cluster_of(n, **settings)`: n nodes of one cluster, started together."""
    made = 0

    def start(n: int, **settings) -> list:
        nonlocal made
        made += 1
        return start_nodes(broker_factory, tmp_path / f"c{made}", n, publisher_credit=CREDIT,
                           max_unconfirmed=4 * CREDIT, **settings)  # fmt: skip

    return start


def consumer(node, address: str) -> RawClient:
    client = RawClient(node.port)
    client.connect()
    client.receiver(client.begin(), address, credit=100_000, settled=True)
    return client


def test_a_lagging_consumer_replica_holds_the_publishers_and_catching_up_releases_them(cluster_of):
    nodes = cluster_of(3, quorum_consumer_lag_max=BOUND)
    leader, lagging, other, _ = quorum_queue(nodes, "qq-flow")
    group = group_name("/", "qq-flow")
    flow = leader.broker.quorum.flow
    receiver = consumer(lagging, "/queues/qq-flow")
    on_leader = Publisher(leader, "/queues/qq-flow")
    on_follower = Publisher(other, "/queues/qq-flow")
    on_leader.send_while_credit()
    until(lambda: leader.call(flow.counted, group) == (lagging.broker.cluster.node_id,),
          "the consumer's replica reported to the leader")
    go = stall(lagging)
    try:
        on_leader.run_dry()
        sent = len(on_leader.deliveries)
        # Held near the bound, not at the publisher's own limits. At most: the replica's report
        # (the first CREDIT messages), the BOUND the leader accepts past it before holding (it
        # decides before it confirms a batch), and what the link's last grant let through: the
        # unconfirmed (< max_unconfirmed: a grant waits for the whole read to be routed) and
        # the grant itself (CREDIT).
        assert sent <= CREDIT + BOUND + 4 * CREDIT + CREDIT
        assert leader.call(lambda: leader.queue("qq-flow").publish_hold.held)
        # the other follower was told: its own publisher is held too
        until(lambda: other.call(lambda: other.queue("qq-flow").publish_hold.held), "the hold on the other follower")
        on_follower.run_dry()
        assert not on_leader.granted_within(0.3)  # no new credit while the replica lags
        assert on_leader.link.link_credit == 0
    finally:
        go.set()
    # it catches up: the leader releases, both publishers get credit again
    assert on_leader.granted_within(20) and on_follower.granted_within(20)
    total = len(on_leader.deliveries) + len(on_follower.deliveries)
    assert len(receiver.receive(total, timeout=30)) == total
    assert not leader.call(lambda: leader.queue("qq-flow").publish_hold.held)
    # a replica that goes away holds nothing: its stream ends and the leader stops counting it
    lagging.stop()
    on_leader.publish(3 * BOUND)
    assert not leader.call(lambda: leader.queue("qq-flow").publish_hold.held)
    for client in (receiver, on_leader.client, on_follower.client):
        client.close()


def test_with_the_setting_at_zero_a_lagging_replica_holds_nothing(cluster_of):
    nodes = cluster_of(3, quorum_consumer_lag_max=0)
    leader, lagging, _other, _ = quorum_queue(nodes, "qq-free")
    receiver = consumer(lagging, "/queues/qq-free")
    publisher = Publisher(leader, "/queues/qq-free")
    publisher.send_while_credit()
    publisher.publish(0)  # the first ones confirmed
    go = stall(lagging)
    try:
        publisher.publish(3 * BOUND)  # more than the bound, all confirmed while the replica lags
        assert not leader.call(lambda: leader.queue("qq-free").publish_hold.held)
    finally:
        go.set()
    total = len(publisher.deliveries)
    assert len(receiver.receive(total, timeout=30)) == total
    receiver.close()
    publisher.client.close()


def test_a_publisher_on_a_node_without_a_replica_is_held_by_its_confirms(cluster_of):
    """It reaches the queue through the leader's node, which holds its confirms back: its own
    node grants no credit past its unconfirmed bound, and everything is confirmed on release."""
    nodes = cluster_of(4, quorum_consumer_lag_max=BOUND)
    leader, lagging, _other, (outside,) = quorum_queue(nodes, "qq-proxy")
    receiver = consumer(lagging, "/queues/qq-proxy")
    remote = Publisher(outside, "/queues/qq-proxy")
    remote.publish(1)
    group = group_name("/", "qq-proxy")
    until(lambda: leader.call(leader.broker.quorum.flow.counted, group) == (lagging.broker.cluster.node_id,),
          "the replica reported")
    go = stall(lagging)
    try:
        for _ in range(50):  # confirms of what committed before the hold still come back, with credit
            remote.send_while_credit()
            if not remote.granted_within(0.3):
                break
        else:
            raise AssertionError(f"not held: {len(remote.deliveries)} sent")
        assert remote.link.link_credit == 0 and remote.unsettled() >= 4 * CREDIT  # max_unconfirmed
        assert leader.call(lambda: leader.queue("qq-proxy").publish_hold.held)
    finally:
        go.set()
    remote.publish(0)  # every one confirmed once the replica caught up
    assert remote.link.link_credit > 0 or remote.granted_within(20)
    total = len(remote.deliveries)
    assert len(receiver.receive(total, timeout=30)) == total
    receiver.close()
    remote.client.close()
