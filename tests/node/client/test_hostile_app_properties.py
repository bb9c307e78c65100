"""Issue 14, row 6: application-properties are decoded only where a headers
exchange needs them. A 15 MB message with 1.4M application-properties sent to
amq.direct froze the node 2.4 s decoding a section nothing read.

The proof here is a section that cannot be decoded at all: a publish to
amq.direct routes it untouched, a headers exchange still reads good ones
(and rejects the undecodable one)."""

from __future__ import annotations

import pytest
from raw_client import RawClient

from amqp import definitions as d
from amqp import events as ev
from amqp.message import APPLICATION_PROPERTIES, Message

# application-properties: a map whose second value has an invalid constructor
# (0xff); its size prefix is right, so the message frames and scans fine
UNDECODABLE = bytes.fromhex("005374c10502a1016bff") + bytes.fromhex("005375a0026869")


@pytest.fixture
def client(broker):
    c = RawClient(broker.port)
    c.connect()
    yield c
    c.close()


def publish(client: RawClient, address: str, payload: bytes):
    session = client.begin()
    link = client.sender(session, address, name=f"snd-{address}")
    delivery = client.send(link, payload)
    client.wait_for(lambda e: type(e) is ev.DeliveriesUpdated and delivery in e.deliveries)
    return delivery.state


def test_a_direct_exchange_routes_without_decoding_application_properties(broker, client):
    broker.declare_queue("q")
    broker.call(broker.vhost.bind, "amq.direct", "queue", "q", "k")
    assert type(publish(client, "/exchanges/amq.direct/k", UNDECODABLE)) is d.Accepted
    session = client.begin()
    client.receiver(session, "/queues/q", credit=1)
    got = Message.from_bytes(client.receive(1)[0].payload)
    assert got.body == b"hi"
    assert bytes(got.section_bytes(APPLICATION_PROPERTIES)) == UNDECODABLE[:10]  # passed on byte for byte


def test_a_headers_exchange_still_reads_them(broker, client):
    broker.declare_queue("hq")
    broker.call(broker.vhost.bind, "amq.headers", "queue", "hq", "", {"x-match": "all", "k": "v"})
    good = Message.build(b"ok", application_properties={"k": "v"}).payload
    other = Message.build(b"no", application_properties={"k": "w"}).payload
    assert type(publish(client, "/exchanges/amq.headers", good)) is d.Accepted
    assert type(publish(client, "/exchanges/amq.headers", other)) is d.Released  # matched no binding
    state = publish(client, "/exchanges/amq.headers", UNDECODABLE)
    assert type(state) is d.Rejected and state.error.condition == "amqp:decode-error"
