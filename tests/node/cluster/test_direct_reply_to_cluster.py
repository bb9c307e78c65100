"""Direct Reply-To and x-local-random across two nodes (`warren server`
processes): 1,000 requesters on one node, each with its own volatile queue,
against one responder on the other; every request and every reply crosses
nodes (the reply as a node message, never through Raft). x-local-random
routes to the queue on the publisher's node."""

from __future__ import annotations

import pytest
from cluster_procs import HttpError
from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import AtMostOnce, Container
from proton.utils import BlockingConnection
from volatile_clients import VolatileSource

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

REQUESTERS = 1000
PER_CONNECTION = 100


def url(node) -> str:
    return f"amqp://guest:guest@127.0.0.1:{node.amqp_port}"


def queue_known(node, name: str) -> bool:
    """The node has applied the queue's declaration (404 until then)."""
    try:
        return node.http("GET", f"/api/queues/%2F/{name}") is not None
    except HttpError as e:
        if e.status == 404:
            return False
        raise


class ManyRequesters(MessagingHandler):
    """Each requester: a dynamic volatile receiver; once the broker names it,
    one request carrying its index. The responder answers every request
    through one anonymous sender. Done when every requester has its reply."""

    def __init__(self, requester_url: str, responder_url: str) -> None:
        super().__init__(prefetch=10)
        self.requester_url, self.responder_url = requester_url, responder_url
        # proton hands out new wrapper objects for the same link: keyed by link name
        self.index: dict[str, int] = {}  # receiver's name -> requester index
        self.senders: dict[int, object] = {}  # requester index // PER_CONNECTION -> request sender
        self.connections: list = []
        self.replies: dict[int, list] = {}
        self.addresses: set[str] = set()
        self.error: str | None = None

    def on_start(self, event) -> None:
        c = event.container
        responder = c.connect(self.responder_url)
        self.requests = c.create_receiver(responder, "/queues/requests", name="responder")
        self.connections.append(responder)
        self.relay = c.create_sender(responder, None)
        for first in range(0, REQUESTERS, PER_CONNECTION):
            conn = c.connect(self.requester_url)
            self.connections.append(conn)
            self.senders[first // PER_CONNECTION] = c.create_sender(conn, "/queues/requests")
            for i in range(first, first + PER_CONNECTION):
                receiver = c.create_receiver(conn, None, name=f"requester-{i}", dynamic=True,
                                             options=[AtMostOnce(), VolatileSource()])  # fmt: skip
                self.index[receiver.name] = i
        self.timer = c.schedule(240, self)

    def on_timer_task(self, event) -> None:
        self.error = f"timed out with {len(self.replies)} of {REQUESTERS} replies"
        self.stop(event.container)

    def on_link_opened(self, event) -> None:
        receiver = event.receiver
        if receiver is not None and receiver.name in self.index:
            i = self.index[receiver.name]
            address = receiver.remote_source.address
            self.addresses.add(address)
            self.senders[i // PER_CONNECTION].send(Message(id=i, reply_to=address, body="request"))

    def on_message(self, event) -> None:
        if event.receiver.name == "responder":
            request = event.message
            self.relay.send(Message(address=request.reply_to, correlation_id=request.id, body="reply"))
            return
        i = self.index[event.receiver.name]
        self.replies.setdefault(i, []).append(event.message.correlation_id)
        if len(self.replies) == REQUESTERS:
            self.timer.cancel()
            self.stop(event.container)

    def stop(self, container) -> None:
        for conn in self.connections:
            conn.close()
        container.stop()


def test_a_thousand_requesters_on_one_node_and_a_responder_on_the_other(cluster_factory):
    cluster = cluster_factory(2)
    cluster.start()
    responder_node, requester_node = cluster[0], cluster[1]
    responder_node.http("PUT", "/api/queues/%2F/requests", {"durable": False})
    cluster.wait_for(lambda: queue_known(requester_node, "requests"), 10, "the request queue on node 1")
    rpc = ManyRequesters(url(requester_node), url(responder_node))
    Container(rpc).run()
    assert rpc.error is None, rpc.error
    assert len(rpc.addresses) == REQUESTERS  # one reply address each
    # each requester got exactly its own reply, once
    assert rpc.replies == {i: [i] for i in range(REQUESTERS)}
    # nothing of it in the metadata: the request queue is the only queue
    assert [q["name"] for q in responder_node.http("GET", "/api/queues")] == ["requests"]


def test_x_local_random_routes_to_the_queue_on_the_publishers_node(cluster_factory):
    cluster = cluster_factory(2)
    cluster.start()
    a, b = cluster[0], cluster[1]
    a.http("PUT", "/api/exchanges/%2F/lr", {"type": "x-local-random", "durable": True})
    a.http("PUT", "/api/queues/%2F/on-a", {"durable": True})  # led by the node that declares it
    b.http("PUT", "/api/queues/%2F/on-b", {"durable": True})
    cluster.wait_for(lambda: queue_known(a, "on-b"), 10, "node 0 knows the queue node 1 declared")
    for q in ("on-a", "on-b"):
        a.http("POST", f"/api/bindings/%2F/e/lr/q/{q}", {"routing_key": ""})
    for node in (a, b):
        cluster.wait_for(lambda node=node: len(node.http("GET", "/api/exchanges/%2F/lr/bindings/source")) == 2, 10,
                         "both bindings everywhere")  # fmt: skip

    def publish(node, n: int) -> None:
        conn = BlockingConnection(url(node), timeout=10)
        sender = conn.create_sender("/exchanges/lr")
        for i in range(n):
            sender.send(Message(body=f"m{i}"))  # returns once settled: routed and stored
        conn.close()

    def ready(node, q: str) -> int:
        return node.http("GET", f"/api/queues/%2F/{q}")["messages_ready"]

    publish(b, 20)
    assert (ready(a, "on-a"), ready(b, "on-b")) == (0, 20)
    publish(a, 30)
    assert (ready(a, "on-a"), ready(b, "on-b")) == (30, 20)
