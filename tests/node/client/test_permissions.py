"""Permissions as RabbitMQ enforces them on AMQP 1.0 (routing/permissions.py):
vhost access at OPEN, write to publish, read to consume, configure to
declare and delete, checked with the permission entry as it reads now.
Driven by RabbitMQ's AMQP 1.0 Python client and by python-qpid-proton."""

from __future__ import annotations

import pytest
from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container
from rabbitmq_amqp_python_client import (
    AddressHelper,
    AmqpMessageRejectedException,
    ClassicQueueSpecification,
    ExchangeSpecification,
    ExchangeToQueueBindingSpecification,
    ValidationCodeException,
)
from rabbitmq_amqp_python_client import Message as ClientMessage
from rabbitmq_amqp_python_client.qpid.proton.utils import LinkDetached
from rmq_client import connection, consume, request

pytestmark = pytest.mark.timeout(60)

USER, PASSWORD = "alice", "secret"


def add_alice(broker, vhost: str = "/", configure: str = ".*", write: str = ".*", read: str = ".*") -> None:
    broker.add_user(USER, PASSWORD)
    if vhost is not None:
        broker.set_permissions(USER, vhost, configure, write, read)


def set_alice(broker, configure: str = ".*", write: str = ".*", read: str = ".*") -> None:
    broker.set_permissions(USER, "/", configure, write, read)


def topology(broker) -> None:
    """As guest: queue "shared", exchanges "allowed" (bound to it by "k") and "denied"."""

    async def setup():
        v = broker.vhost
        await v.declare_queue("shared", True, None, False, {})
        for name in ("allowed", "denied"):
            await v.declare_exchange(name, "direct")
            await v.bind(name, "queue", "shared", "k")

    broker.call(setup)


def alice(broker, vhost: str = ""):
    return connection(broker.port, USER, PASSWORD, vhost)


def to(address: str, body: bytes = b"m") -> ClientMessage:
    return AddressHelper.message_to_address_helper(ClientMessage(body=body), address)


def test_a_connection_needs_a_permission_entry_for_its_vhost(broker, caplog):
    add_alice(broker, vhost=None)
    broker.add_vhost("v1")
    caplog.set_level("INFO", logger="warren.connection")
    with pytest.raises(BaseException, match="disconnected"):  # as RabbitMQ 4: no OPEN, the socket closes
        with alice(broker):
            pass
    assert "access to vhost '/' refused for user 'alice'" in caplog.text
    broker.set_permissions(USER, "v1")
    with alice(broker, vhost="v1") as conn:
        conn.management().declare_queue(ClassicQueueSpecification(name="alice-q"))
    assert "alice-q" in broker.broker.vhosts["v1"].queues
    with pytest.raises(BaseException, match="disconnected"):
        with alice(broker):  # still nothing on "/"
            pass


def test_publishing_needs_write_permission_on_the_exchange(broker):
    add_alice(broker, write="^allowed$")
    topology(broker)
    with alice(broker) as conn:
        with pytest.raises(LinkDetached, match="unauthorized-access.*write access to exchange 'denied'"):
            conn.publisher(AddressHelper.exchange_address("denied", "k"))
        # /queues/:queue publishes through the default exchange, "amq.default"
        with pytest.raises(LinkDetached, match="unauthorized-access.*'amq.default'"):
            conn.publisher(AddressHelper.queue_address("shared"))
        p = conn.publisher(AddressHelper.exchange_address("allowed", "k"))
        p.publish(ClientMessage(body=b"fixed target"))
        p.close()
        anonymous = conn.publisher()
        with pytest.raises(AmqpMessageRejectedException, match="write access to exchange 'amq.default'"):
            anonymous.publish(to(AddressHelper.queue_address("shared")))
        with pytest.raises(AmqpMessageRejectedException, match="write access to exchange 'denied'"):
            anonymous.publish(to(AddressHelper.exchange_address("denied", "k")))
        anonymous.publish(to(AddressHelper.exchange_address("allowed", "k"), b"per message"))
        anonymous.close()
    assert broker.queue("shared").message_count == 2


def test_a_refused_per_message_address_is_rejected_with_unauthorized_access(broker):
    add_alice(broker, write="^$")
    topology(broker)
    seen = {}

    class Relay(MessagingHandler):
        def on_start(self, event):
            c = event.container.connect(broker.url.replace("guest:guest", f"{USER}:{PASSWORD}"))
            event.container.create_sender(c, None)

        def on_sendable(self, event):
            if not seen:
                seen["sent"] = True
                event.sender.send(Message(address="/queues/shared", body="x"))

        def on_rejected(self, event):
            cond = event.delivery.remote.condition
            seen["condition"] = cond.name if cond else None
            event.connection.close()

    Container(Relay()).run()
    assert seen["condition"] == "amqp:unauthorized-access"
    assert broker.queue("shared").message_count == 0


def test_consuming_needs_read_permission_on_the_queue(broker):
    add_alice(broker, read="^mine$")
    topology(broker)
    broker.declare_queue("mine")
    with alice(broker) as conn:
        with pytest.raises(LinkDetached, match="unauthorized-access.*read access to queue 'shared'"):
            conn.consumer(AddressHelper.queue_address("shared"))
        conn.publisher(AddressHelper.queue_address("mine")).publish(ClientMessage(body=b"for me"))
        assert [m.body for m in consume(conn, AddressHelper.queue_address("mine"), 1)] == [b"for me"]


def test_management_needs_configure_read_and_write_as_rabbitmq(broker):
    add_alice(broker, configure="^alice-", write="^alice-", read="^alice-")
    topology(broker)
    with alice(broker) as conn:
        m = conn.management()
        m.declare_queue(ClassicQueueSpecification(name="alice-q"))
        with pytest.raises(ValidationCodeException, match="403"):
            m.declare_queue(ClassicQueueSpecification(name="bob-q"))
        assert request(m, "PUT", "/queues/bob-q", {}) == (
            403, "configure access to queue 'bob-q' in vhost '/' refused for user 'alice'")  # fmt: skip
        assert request(m, "DELETE", "/queues/shared")[0] == 403
        assert request(m, "PUT", "/exchanges/bob-x", {"type": "fanout"})[0] == 403
        assert request(m, "DELETE", "/exchanges/allowed")[0] == 403
        m.declare_exchange(ExchangeSpecification(name="alice-x"))
        # dead-lettering needs write on the dead-letter exchange
        status, body = request(m, "PUT", "/queues/alice-dl", {"arguments": {"x-dead-letter-exchange": "allowed"}})
        assert status == 403 and "write access to exchange 'allowed'" in body
        # purge needs read; reading a queue's info needs nothing, as in RabbitMQ
        assert request(m, "DELETE", "/queues/shared/messages")[0] == 403
        assert request(m, "GET", "/queues/shared")[0] == 200
        # bind: write on the destination, read on the source
        with pytest.raises(ValidationCodeException, match="403"):
            m.bind(ExchangeToQueueBindingSpecification(source_exchange="alice-x", destination_queue="shared"))
        with pytest.raises(ValidationCodeException, match="403"):
            m.bind(ExchangeToQueueBindingSpecification(source_exchange="allowed", destination_queue="alice-q"))
        m.bind(ExchangeToQueueBindingSpecification(source_exchange="alice-x", destination_queue="alice-q"))
        assert m.purge_queue("alice-q") == 0
        m.delete_queue("alice-q")
    assert "shared" in broker.vhost.queues and "bob-q" not in broker.vhost.queues


def test_permission_changes_apply_to_later_links_and_requests(broker):
    add_alice(broker)
    topology(broker)
    with alice(broker) as conn:
        m = conn.management()
        m.declare_queue(ClassicQueueSpecification(name="early"))
        p = conn.publisher(AddressHelper.queue_address("shared"))
        p.publish(ClientMessage(body=b"before"))
        p.close()  # the client names links by address: one at a time
        set_alice(broker, configure="^$", write="^$", read=".*")
        with pytest.raises(LinkDetached, match="unauthorized-access"):
            conn.publisher(AddressHelper.queue_address("shared"))
        assert request(m, "PUT", "/queues/late", {})[0] == 403
        assert [x.body for x in consume(conn, AddressHelper.queue_address("shared"), 1)] == [b"before"]
