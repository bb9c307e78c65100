"""What RabbitMQ 4's own AMQP 1.0 client (rabbitmq-amqp-python-client)
and its users expect of a fresh node, used as documented, with no extra
setup command (issue 16; docs/compatibility.md lists each behaviour)."""

from __future__ import annotations

import pytest
from rabbitmq_amqp_python_client import AddressHelper, Environment, Message, QuorumQueueSpecification
from rabbitmq_amqp_python_client.qpid.proton import ConnectionException
from rmq_client import connection, consume

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
