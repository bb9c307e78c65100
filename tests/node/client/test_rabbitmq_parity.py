"""What RabbitMQ 4's own AMQP 1.0 client (rabbitmq-amqp-python-client)
and its users expect of a fresh node, used as documented, with no extra
setup command (issue 16; docs/compatibility.md lists each behaviour)."""

from __future__ import annotations

import pytest
from mgmt_client import Api
from proton.utils import BlockingConnection, LinkDetached
from rabbitmq_amqp_python_client import (
    AddressHelper,
    AMQPMessagingHandler,
    ClassicQueueSpecification,
    Environment,
    Event,
    Message,
    QuorumQueueSpecification,
)
from rabbitmq_amqp_python_client.qpid.proton import ConnectionException
from rmq_client import Enough, connection, consume, request

pytestmark = pytest.mark.timeout(60)


def test_a_fresh_node_declares_quorum_queues_without_enabling_a_flag(broker):
    with connection(broker.port) as conn:
        m = conn.management()
        info = m.declare_queue(QuorumQueueSpecification(name="orders"))
        assert info.name == "orders"
        publisher = conn.publisher(AddressHelper.queue_address("orders"))
        for i in range(3):
            publisher.publish(Message(body=f"m{i}".encode()))
        publisher.close()
        got = consume(conn, AddressHelper.queue_address("orders"), 3)
    assert [bytes(m.body) for m in got] == [b"m0", b"m1", b"m2"]


def test_a_missing_vhost_fails_the_dial_at_once(broker):
    # Default settings, recovery on, as the client's examples use it: a
    # remote CLOSE would send it into minutes of reconnect back-off.
    # (env.close() would trip on the connection that never opened: nothing to close)
    env = Environment(f"amqp://guest:guest@127.0.0.1:{broker.port}/nosuchvhost")
    with pytest.raises(ConnectionException, match="disconnected"):
        env.connection().dial()


class Unsettling(AMQPMessagingHandler):
    """Keeps `n` deliveries unsettled, then leaves consumer.run()."""

    def __init__(self, n: int):
        super().__init__()
        self.n, self.messages = n, []

    def on_amqp_message(self, event: Event) -> None:
        self.messages.append(event.message)
        if len(self.messages) >= self.n:
            raise Enough()


def _publish(conn, queue: str, n: int) -> None:
    publisher = conn.publisher(AddressHelper.queue_address(queue))
    for i in range(n):
        publisher.publish(Message(body=f"m{i}".encode()))
    publisher.close()


def test_quorum_queue_info_counts_its_ready_messages(broker):
    with connection(broker.port) as conn:
        m = conn.management()
        m.declare_queue(QuorumQueueSpecification(name="qq"))
        _publish(conn, "qq", 1000)
        assert m.queue_info("qq").message_count == 1000


def test_purging_a_quorum_queue_counts_what_a_closed_consumer_left(broker):
    with connection(broker.port) as conn:
        m = conn.management()
        m.declare_queue(QuorumQueueSpecification(name="qq"))
        _publish(conn, "qq", 10)
        # a consumer takes them all and closes without settling any
        handler = Unsettling(10)
        consumer = conn.consumer(AddressHelper.queue_address("qq"), message_handler=handler)
        with pytest.raises(Enough):
            consumer.run()
        consumer.close()
        assert len(handler.messages) == 10
        assert m.purge_queue("qq") == 10
        assert m.queue_info("qq").message_count == 0


def test_a_quorum_consumer_settling_with_modified_undeliverable_here_gets_every_message(broker):
    # modified{delivery-failed, undeliverable-here} on a quorum queue is a
    # discard in RabbitMQ 4 (dead-lettered with reason rejected, or dropped):
    # the consumer's credit keeps flowing and it sees all of them once
    with connection(broker.port) as conn:
        m = conn.management()
        m.declare_queue(QuorumQueueSpecification(name="qq"))
        _publish(conn, "qq", 1000)
        got = consume(conn, AddressHelper.queue_address("qq"), 1000,
                      lambda msg: ("discard", {"x-opt-reason": "bad"}))  # fmt: skip
        assert len({bytes(g.body) for g in got}) == 1000
        assert m.queue_info("qq").message_count == 0


def test_the_vhost_limit_max_queues_refuses_declares_as_rabbitmq(broker_factory):
    node = broker_factory(http_port=0)
    api = Api(node.broker.http_port)
    assert api.put("/api/vhost-limits/%2F/max-queues", {"value": 2}).status == 204
    assert api.get("/api/vhost-limits/%2F").body == [{"vhost": "/", "value": {"max-queues": 2}}]
    reason = "cannot declare queue '{}': queue limit in vhost '/' (2) is reached"
    with connection(node.port) as conn:
        m = conn.management()
        m.declare_queue(ClassicQueueSpecification(name="one"))
        m.declare_queue(QuorumQueueSpecification(name="two"))
        assert request(m, "PUT", "/queues/three", {}) == (403, reason.format("three"))  # as RabbitMQ's /management
        m.declare_queue(ClassicQueueSpecification(name="one"))  # redeclaring an existing queue is not a new one
    reply = api.put("/api/queues/%2F/three", {})
    assert reply.status == 400 and reply.body["reason"] == reason.format("three")
    # address v1 declares the queue it names: the link is refused
    conn = BlockingConnection(node.url, timeout=10)
    try:
        with pytest.raises(LinkDetached, match="amqp:resource-limit-exceeded"):
            conn.create_sender("/queue/four")
    finally:
        conn.close()
    assert api.delete("/api/vhost-limits/%2F/max-queues").status == 204
    assert api.put("/api/queues/%2F/three", {}).status == 201
