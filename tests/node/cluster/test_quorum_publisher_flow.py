"""A quorum queue holds its publishers while the replica that serves its
consumer lags the leader (node/vhosts/quorum_flow.py), on three real nodes
in this process (each on its own loop thread, real gRPC and pysyncobj).

The consumer's replica is made to lag by holding its node's event loop on
an Event: it neither applies nor reports, while the leader and the other
follower go on committing. The publishers (raw AMQP clients, so that every
FLOW is seen) are on the leader and on the other follower."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from cluster_procs import free_ports
from proton import Message
from raw_client import RawClient

from amqp import events as ev
from node.vhosts.quorum_groups import group_name

pytestmark = pytest.mark.timeout(120)

BOUND = 40  # quorum_consumer_lag_max
CREDIT = 10  # publisher_credit: a held publisher runs dry after a few messages
PAYLOAD = Message(body="m", durable=True).encode()


def until(predicate, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what}: never"
        time.sleep(0.01)


@pytest.fixture
def cluster_of(broker_factory, tmp_path):
    """`cluster_of(n, **settings)`: n nodes of one cluster, started together (each waits for a majority)."""
    made = 0

    def start(n: int, **settings) -> list:
        nonlocal made
        ports = free_ports(n)
        seeds = [f"127.0.0.1:{p}" for p in ports]

        def one(i: int):
            return broker_factory(tmp_path / f"c{made}n{i}", node_name=f"warren-{i}@localhost", grpc_port=ports[i],
                                  seeds=seeds, cluster_secret="flow-secret", advertise_host="127.0.0.1",
                                  http_port=-1, metrics_port=-1, publisher_credit=CREDIT,
                                  max_unconfirmed=4 * CREDIT, **settings)  # fmt: skip

        made += 1
        with ThreadPoolExecutor(n) as pool:
            return list(pool.map(one, range(n)))

    return start


def quorum_queue(nodes: list, name: str) -> tuple:
    """Declares it with three replicas; (leader, consumer's follower, publisher's follower, the
    nodes without a replica)."""
    nodes[0].declare_queue(name, **{"x-queue-type": "quorum", "x-quorum-initial-group-size": 3})
    group = group_name("/", name)
    members = nodes[0].call(lambda: nodes[0].queue(name).members)
    replicas = [n for n in nodes if n.broker.cluster.node_id in members]
    for n in replicas:
        until(lambda n=n: n.call(lambda: n.broker.quorum.leader_of(group)) is not None, "a leader everywhere")
    leader_id = replicas[0].call(lambda: replicas[0].broker.quorum.leader_of(group))
    leader = next(n for n in replicas if n.broker.cluster.node_id == leader_id)
    followers = [n for n in replicas if n is not leader]
    return leader, followers[0], followers[1], [n for n in nodes if n not in replicas]


class Publisher:
    def __init__(self, node, address: str):
        self.client = RawClient(node.port)
        self.client.connect()
        self.link = self.client.sender(self.client.begin(), address)
        self.deliveries: list = []

    def send_while_credit(self) -> int:
        sent = 0
        while self.link.link_credit > 0:
            self.deliveries.append(self.client.send(self.link, PAYLOAD))
            sent += 1
        return sent

    def unsettled(self) -> int:
        return sum(not d.remote_settled for d in self.deliveries)

    def all_settled(self) -> bool:
        return all(d.remote_settled for d in self.deliveries)

    def run_dry(self, timeout: float = 20.0) -> None:
        """Send as the broker grants credit until it stops: no credit left and
        everything sent settled (so no confirm is what holds it)."""
        deadline = time.monotonic() + timeout
        while True:
            self.send_while_credit()
            if self.all_settled() and self.link.link_credit <= 0:
                return
            assert time.monotonic() < deadline, f"never ran dry: credit {self.link.link_credit}"
            self.client._read(0.05)

    def publish(self, n: int, timeout: float = 20.0) -> None:
        """Send `n` more as credit comes, until all are settled: held, it would wait for credit."""
        target = len(self.deliveries) + n
        deadline = time.monotonic() + timeout
        while len(self.deliveries) < target or not self.all_settled():
            while self.link.link_credit > 0 and len(self.deliveries) < target:
                self.deliveries.append(self.client.send(self.link, PAYLOAD))
            assert time.monotonic() < deadline, f"held at {len(self.deliveries)} of {target}"
            self.client._read(0.05)

    def granted_within(self, seconds: float) -> bool:
        try:
            self.client.wait_for(lambda e: type(e) is ev.LinkFlow and e.link is self.link and self.link.link_credit > 0,
                                 seconds)  # fmt: skip
            return True
        except AssertionError:
            return False


def consumer(node, address: str) -> RawClient:
    client = RawClient(node.port)
    client.connect()
    client.receiver(client.begin(), address, credit=100_000, settled=True)
    return client


def stall(node) -> threading.Event:
    """Hold the node's loop until the Event is set: its replicas neither apply nor report."""
    go = threading.Event()
    node.loop.call_soon_threadsafe(go.wait, 30)
    return go


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
        assert sent <= 2 * BOUND + 2 * CREDIT  # held near the bound, not at the publisher's own limits
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
