"""Issue 14, row 6: a client streaming large messages cannot take the node's
core from the others. The event loop reads each socket once a turn, up to
256 KB; such a client filled that read every turn (280 MB/s beside a
small-message pair that kept 0.63 of its rate). Now one connection takes in
at most `ingest_per_turn` bytes a turn, on average (node/client/ingest.py).

The node's turns are counted on its own loop (a callback that schedules
itself runs once a turn) and what the big client got in is counted by the
node's own unroutable counter (every message goes to amq.direct, no binding
matches), so the bound is asserted in turns and bytes, not time."""

from __future__ import annotations

import threading

from proton import Message as ProtonMessage
from proton import SSLDomain
from proton.utils import BlockingConnection
from raw_client import RawClient

from amqp import definitions as d
from amqp.message import Message

BIG = 1024 * 1024  # bytes of one big message's body
BUDGET = 64 * 1024  # ingest_per_turn, the default
READ_MAX = 256 * 1024  # the most one read of the transport takes (uvloop; asyncio's selector loop)


def big_message(i: int) -> bytes:
    return Message.build(bytes([i % 251]) * BIG).payload


class TurnCounter:
    """Counts the node loop's turns until the node has taken in `messages`
    unroutable messages; `seen[k]`: the turn at which it counted k+1."""

    def __init__(self, broker, messages: int):
        self.broker, self.loop, self.messages = broker.broker, broker.loop, messages
        self.turns = 0
        self.seen: list[int] = []
        self.done = threading.Event()

    def start(self) -> None:
        self.base = self.broker.metrics.unroutable
        self.loop.call_soon(self._turn)

    def _turn(self) -> None:
        self.turns += 1
        while len(self.seen) < self.broker.metrics.unroutable - self.base:
            self.seen.append(self.turns)
        if len(self.seen) >= self.messages:
            self.done.set()
        else:
            self.loop.call_soon(self._turn)


def stream(client: RawClient, link, count: int) -> threading.Thread:
    """Writes `count` big messages in one go from a thread (sendall blocks
    while the node does not read)."""
    for i in range(count):
        link.send(i.to_bytes(4, "big"), big_message(i))
    data = client.engine.data_to_send()
    client.sock.settimeout(120)
    writer = threading.Thread(target=client.sock.sendall, args=(data,), daemon=True)
    writer.start()
    return writer


def connect_sender(port: int, address: str) -> tuple[RawClient, object]:
    client = RawClient(port)
    client.connect()
    session = client.begin()
    return client, client.sender(session, address)


def test_a_connection_takes_in_at_most_its_budget_per_loop_turn(broker):
    count = 10
    client, link = connect_sender(broker.port, "/exchanges/amq.direct/nowhere")
    assert link.link_credit >= count
    try:
        turns = TurnCounter(broker, count)
        broker.call(turns.start)
        writer = stream(client, link, count)
        assert turns.done.wait(120), f"{len(turns.seen)} of {count} messages taken in"
        writer.join(10)
    finally:
        client.close()
    # between the turn the first message was all in and the turn the k-th
    # was, the node took in the k-1 messages after the first: at most the
    # budget of those turns, plus one turn's budget and one read (the read
    # that overdrew it); the unbounded node takes in all ten in one or two turns
    first = turns.seen[0]
    for k, turn in enumerate(turns.seen[1:], start=1):
        assert k * BIG <= BUDGET * (turn - first) + BUDGET + READ_MAX, (k, turns.seen)


def test_a_message_read_over_many_turns_arrives_whole(broker_factory):
    """A budget far below a frame: the connection is paused and resumed for
    every read, and its messages still arrive byte for byte."""
    b = broker_factory(ingest_per_turn=4096)
    b.declare_queue("whole", durable=False)
    client, link = connect_sender(b.port, "/queues/whole")
    try:
        payloads = [big_message(i) for i in range(3)]
        deliveries = [client.send(link, p) for p in payloads]
        client.wait_for(lambda e: all(sent.state is not None for sent in deliveries), timeout=60)
        assert [type(sent.state) for sent in deliveries] == [d.Accepted] * 3
        session = client.begin()
        client.receiver(session, "/queues/whole", credit=3, name="back")
        got = [Message.from_bytes(delivery.payload).body for delivery in client.receive(3, timeout=60)]
        (handler,) = [h for h in b.broker.connections if h.peer[1] == client.sock.getsockname()[1]]
        assert handler.ingest.paused_turns > 0  # it was held back, and came back
    finally:
        client.close()
    assert got == [Message.from_bytes(p).body for p in payloads]  # the node adds annotations, not the body


def test_a_tls_connection_is_held_back_and_resumed_too(broker_factory, certs):
    """The same over AMQPS (proton): the TLS transport pauses and resumes
    reading, and the messages arrive whole."""
    b = broker_factory(ingest_per_turn=4096, **certs.server_settings("none"))
    b.declare_queue("tls-whole", durable=False)
    bodies = [bytes([i]) * BIG for i in range(3)]
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_trusted_ca_db(certs.ca)
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
    conn = BlockingConnection(f"amqps://localhost:{b.broker.amqps_port}", ssl_domain=domain,
                              user="guest", password="guest", allowed_mechs="PLAIN")  # fmt: skip
    try:
        sender = conn.create_sender("/queues/tls-whole")
        for body in bodies:
            sender.send(ProtonMessage(body=body))  # waits for the node's outcome
        receiver = conn.create_receiver("/queues/tls-whole", credit=3)
        messages = [receiver.receive(timeout=30) for _ in bodies]
        got = [bytes(m.body) for m in messages]  # proton's body is a view into the message: keep it alive
        (handler,) = list(b.broker.connections)
        assert handler.tls and handler.ingest.paused_turns > 0
    finally:
        conn.close()
    assert got == bodies
