"""A single node driven by python-qpid-proton: connections, addressing,
routing through every exchange type, and the outcomes a publisher sees."""

from __future__ import annotations

import pytest
from proton import Delivery, Message
from proton.utils import BlockingConnection, LinkDetached, SendException

from node import __version__
from routing.users import Authenticator


def connect(broker, **kw) -> BlockingConnection:
    return BlockingConnection(broker.url, timeout=10, **kw)


def drain(conn: BlockingConnection, queue: str, n: int) -> list:
    r = conn.create_receiver(f"/queues/{queue}", credit=max(n, 1))
    got = []
    for _ in range(n):
        got.append(r.receive(timeout=10))
        r.accept()
    r.close()
    return got


def test_publish_and_consume_durable_and_transient(broker):
    broker.declare_queue("durable-q", durable=True)
    broker.declare_queue("transient-q", durable=False)
    conn = connect(broker)
    for q in ("durable-q", "transient-q"):
        s = conn.create_sender(f"/queues/{q}")
        for i in range(50):
            s.send(Message(body=f"{q}-{i}", durable=True, properties={"n": i}))  # raises unless accepted
        s.close()
        assert broker.queue(q).message_count == 50
        bodies = [m.body for m in drain(conn, q, 50)]
        assert bodies == [f"{q}-{i}" for i in range(50)]
    conn.close()


def test_open_properties_identify_the_node(broker):
    conn = connect(broker)
    props = conn.conn.remote_properties
    assert props["product"] == "RabbitMQ"
    assert props["version"] == f"4.2.0+warren.{__version__}"
    assert props["warren-version"] == __version__ and "platform" in props
    conn.close()


def test_attach_to_missing_queue_or_exchange_is_not_found(broker):
    conn = connect(broker)
    for addr in ("/queues/missing", "/exchanges/missing", "/exchanges/missing/key"):
        with pytest.raises(LinkDetached, match="amqp:not-found"):
            conn.create_sender(addr)
    with pytest.raises(LinkDetached, match="amqp:not-found"):
        conn.create_receiver("/queues/missing")
    # the connection survives refused links
    broker.declare_queue("q")
    conn.create_sender("/queues/q").send(Message(body="still here"))
    conn.close()


def test_malformed_address_is_invalid_field(broker):
    conn = connect(broker)
    with pytest.raises(LinkDetached, match="amqp:invalid-field"):
        conn.create_sender("/queue/")  # no queue name (v1 /queue/:queue is accepted: test_address_v1.py)
    conn.close()


def test_unroutable_message_is_released(broker):
    conn = connect(broker)
    s = conn.create_sender("/exchanges/amq.direct/nobody")
    with pytest.raises(SendException) as e:
        s.send(Message(body="lost?"))
    assert e.value.state == Delivery.RELEASED
    conn.close()


def test_anonymous_relay_uses_per_message_to(broker):
    broker.declare_queue("relay-q")
    conn = connect(broker)
    s = conn.create_sender(None)
    s.send(Message(address="/queues/relay-q", body="one"))
    with pytest.raises(SendException) as unbound:
        s.send(Message(address="/exchanges/amq.direct/relay-q", body="two"))
    assert unbound.value.state == Delivery.RELEASED  # nothing bound: unroutable
    with pytest.raises(SendException) as missing:
        s.send(Message(address="/queues/nope", body="three"))
    assert missing.value.state == Delivery.REJECTED
    with pytest.raises(SendException) as bad:
        s.send(Message(address="not-an-address", body="four"))
    assert bad.value.state == Delivery.REJECTED
    # the link lives on after rejections
    s.send(Message(address="/queues/relay-q", body="five"))
    assert [m.body for m in drain(conn, "relay-q", 2)] == ["one", "five"]
    conn.close()


def test_rejected_outcome_carries_not_found(broker):
    from proton.handlers import MessagingHandler
    from proton.reactor import Container

    seen = {}

    class Relay(MessagingHandler):
        def on_start(self, event):
            c = event.container.connect(broker.url)
            event.container.create_sender(c, None)

        def on_sendable(self, event):
            if not seen:
                seen["sent"] = True
                event.sender.send(Message(address="/queues/absent", body="x"))

        def on_rejected(self, event):
            cond = event.delivery.remote.condition
            seen["condition"] = cond.name if cond else None
            event.connection.close()

    Container(Relay()).run()
    assert seen["condition"] == "amqp:not-found"


def test_exchange_types_route_like_rabbitmq(broker):
    for q in ("d", "f1", "f2", "t1", "t2", "h"):
        broker.declare_queue(q)
    v = broker.vhost

    async def topology():
        await v.bind("amq.direct", "queue", "d", "key-d")
        await v.bind("amq.fanout", "queue", "f1")
        await v.bind("amq.fanout", "queue", "f2")
        await v.bind("amq.topic", "queue", "t1", "stock.*.nyse")
        await v.bind("amq.topic", "queue", "t2", "stock.#")
        await v.bind("amq.headers", "queue", "h", "", {"x-match": "any", "region": "eu", "tier": "gold"})

    broker.call(topology)
    conn = connect(broker)
    conn.create_sender("/exchanges/amq.direct/key-d").send(Message(body="direct"))
    conn.create_sender("/exchanges/amq.fanout").send(Message(body="fanout"))
    topic = conn.create_sender("/exchanges/amq.topic")  # routing key from the subject
    topic.send(Message(body="ibm", subject="stock.ibm.nyse"))
    topic.send(Message(body="deep", subject="stock.a.b.c"))
    conn.create_sender("/exchanges/amq.headers").send(Message(body="hdr", properties={"tier": "gold"}))
    counts = {q: broker.queue(q).message_count for q in ("d", "f1", "f2", "t1", "t2", "h")}
    assert counts == {"d": 1, "f1": 1, "f2": 1, "t1": 1, "t2": 2, "h": 1}
    assert [m.body for m in drain(conn, "t2", 2)] == ["ibm", "deep"]
    conn.close()


def test_exchange_to_exchange_and_alternate_exchange(broker):
    broker.declare_queue("via-e2e")
    broker.declare_queue("unrouted")
    v = broker.vhost

    async def topology():
        await v.declare_exchange("upstream", "topic")
        await v.declare_exchange("downstream", "fanout")
        await v.bind("upstream", "exchange", "downstream", "a.#")
        await v.bind("downstream", "queue", "via-e2e")
        await v.declare_exchange("catch-all", "fanout")
        await v.bind("catch-all", "queue", "unrouted")
        await v.declare_exchange("with-ae", "direct", arguments={"alternate-exchange": "catch-all"})

    broker.call(topology)
    conn = connect(broker)
    conn.create_sender("/exchanges/upstream/a.b").send(Message(body="e2e"))
    conn.create_sender("/exchanges/with-ae/nothing-bound").send(Message(body="ae"))
    assert [m.body for m in drain(conn, "via-e2e", 1)] == ["e2e"]
    assert [m.body for m in drain(conn, "unrouted", 1)] == ["ae"]
    conn.close()


def test_sasl_plain_rejects_a_wrong_password(broker):
    from proton import ConnectionException

    bad = broker.url.replace("guest:guest", "guest:wrong")
    with pytest.raises(ConnectionException):
        BlockingConnection(bad, timeout=10)


def test_default_user_only_from_loopback():
    auth = Authenticator("guest", ["guest"])
    auth.add_user("guest", "guest")
    auth.add_user("alice", "secret")
    plain = b"\x00guest\x00guest"
    assert auth.authenticate("PLAIN", plain, "127.0.0.1") == "guest"
    assert auth.authenticate("PLAIN", plain, "::1") == "guest"
    assert auth.authenticate("PLAIN", plain, "192.0.2.10") is None
    assert auth.authenticate("ANONYMOUS", b"", "192.0.2.10") is None
    assert auth.authenticate("PLAIN", b"\x00alice\x00secret", "192.0.2.10") == "alice"
    assert auth.authenticate("PLAIN", b"\x00alice\x00nope", "127.0.0.1") is None
    assert auth.authenticate("GSSAPI", b"", "127.0.0.1") is None


def test_message_size_limit_detaches_the_link(broker_factory):
    b = broker_factory(max_message_size=1000)
    b.declare_queue("small")
    conn = connect(b)
    s = conn.create_sender("/queues/small")
    s.send(Message(body="fits"))
    with pytest.raises((LinkDetached, SendException)) as e:
        s.send(Message(body="x" * 5000))
    assert "message-size-exceeded" in str(e.value) or b.queue("small").message_count == 1
    assert b.queue("small").message_count == 1
    conn.close()


def test_missing_vhost_closes_the_connection(broker, caplog):
    from proton import ConnectionException

    # As RabbitMQ 4: no OPEN, the socket is closed; the node logs why
    caplog.set_level("INFO", logger="warren.connection")
    with pytest.raises(ConnectionException, match="disconnected"):
        BlockingConnection(broker.url, timeout=10, virtual_host="vhost:nowhere")
    assert "virtual host 'nowhere' does not exist" in caplog.text


def test_deleting_a_queue_detaches_its_consumers_with_resource_deleted(broker):
    from proton.handlers import MessagingHandler
    from proton.reactor import Container

    broker.declare_queue("doomed")
    seen = {}

    class Consumer(MessagingHandler):
        def on_start(self, event):
            conn = event.container.connect(broker.url)
            event.container.create_receiver(conn, "/queues/doomed")

        def on_link_opened(self, event):
            broker.call(broker.vhost.delete_queue, "doomed")

        def on_link_error(self, event):
            seen["condition"] = event.link.remote_condition.name
            event.connection.close()

    Container(Consumer()).run()
    assert seen["condition"] == "amqp:resource-deleted"
    assert "doomed" not in broker.vhost.queues
