"""Quorum queues on several real nodes in this process (each on its own loop thread,
real gRPC and pysyncobj): start them, declare a 3-replica queue and name its roles,
publish with a raw AMQP client (every FLOW seen), hold a node's loop."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from cluster_procs import free_ports
from proton import Message
from raw_client import RawClient

from amqp import events as ev
from node.vhosts.quorum_groups import group_name

PAYLOAD = Message(body="m", durable=True).encode()


def start_nodes(broker_factory, where, n: int, **settings) -> list:
    """n nodes of one cluster under directory `where`, started together (each waits for a majority)."""
    ports = free_ports(n)
    seeds = [f"127.0.0.1:{p}" for p in ports]

    def one(i: int):
        return broker_factory(where / f"n{i}", node_name=f"warren-{i}@localhost", grpc_port=ports[i], seeds=seeds,
                              cluster_secret="quorum-secret", advertise_host="127.0.0.1", http_port=-1,
                              metrics_port=-1, **settings)  # fmt: skip

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(one, range(n)))


def until(predicate, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what}: never"
        time.sleep(0.01)


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


def served_from_the_hold(client: RawClient, link, stalled, n: int) -> None:
    """A strict client with `n` more held for it: asking for no more gets it nothing more,
    and its next `n` of credit is served while `stalled` (the node that would otherwise
    have to commit the grant) is held."""
    link.flow(link_credit=0, echo=True)  # its answer comes after any transfer sent before it
    client.wait_for(lambda e: type(e) is ev.LinkFlow and e.link is link)
    assert client.deliveries == []  # nothing beyond the credit it granted
    go = stall(stalled)
    try:
        link.flow(link_credit=n)
        assert len(client.receive(n)) == n  # from the hold: no commit could happen meanwhile
    finally:
        go.set()


def drain_then_detach(client: RawClient, link, leader, name: str, n: int) -> None:
    """The tail of a lease test: the client, with `n` delivered and `n` held for it out of
    `3 * n` published, drains 2n (it gets what is held, then the drain ends at its own limit,
    not the machine's) and detaches with nothing settled: everything goes back to the queue."""
    link.flow(link_credit=2 * n, drain=True)
    assert len(client.receive(n)) == n
    client.wait_for(lambda e: type(e) is ev.LinkFlow and e.link is link and link.link_credit == 0)
    assert link.delivery_count == 4 * n and client.deliveries == []  # its 2n + the 2n it drained
    link.detach(closed=True)
    client.flush()
    queue = leader.call(lambda: leader.queue(name))
    until(lambda: leader.call(lambda: (queue.message_count, queue.unacked_count)) == (3 * n, 0), "all returned")


def stall(node) -> threading.Event:
    """Hold the node's loop until the Event is set: its replicas neither apply nor report.
    Returns once the loop is held, not once the hold is queued: a loop still busy with
    earlier work would otherwise apply and report what the caller sends next."""
    go, held = threading.Event(), threading.Event()

    def hold() -> None:
        held.set()
        go.wait(30)

    node.loop.call_soon_threadsafe(hold)
    assert held.wait(10), "the node's loop never ran the stall"
    return go


