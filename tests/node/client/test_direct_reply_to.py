"""Direct Reply-To on volatile queues (queues/volatile.py,
node/vhosts/volatile_queues.py) and the other dynamic termini, with
python-qpid-proton: a requester's dynamic receiver gets a generated reply
address, a responder's reply reaches it while it has credit and is dropped
(and counted) otherwise, a gone requester's address accepts and drops, and
nothing of it reaches the metadata store."""

from __future__ import annotations

import uuid

import pytest
from mgmt_client import sample, scrape
from proton import Delivery, Message
from proton.reactor import LinkOption
from proton.utils import BlockingConnection, LinkDetached, SendException
from volatile_clients import VolatileSource, requester

pytestmark = pytest.mark.timeout(60)

DROPPED = ("rabbitmq_global_messages_dead_lettered_maxlen_total",
           {"queue_type": "rabbit_volatile_queue", "dead_letter_strategy": "disabled"})  # fmt: skip


class DynamicTarget(LinkOption):
    def apply(self, link) -> None:
        link.target.address = None
        link.target.dynamic = True


def dropped(broker) -> float:
    return sample(scrape(broker), DROPPED[0], **DROPPED[1])


def test_request_and_reply_through_a_volatile_queue(broker):
    broker.declare_queue("requests")
    req_conn = BlockingConnection(broker.url, timeout=10)
    resp_conn = BlockingConnection(broker.url, timeout=10)
    try:
        replies = requester(req_conn)
        reply_to = replies.link.remote_source.address
        assert reply_to.startswith("/queues/amq.rabbitmq.reply-to.")
        assert replies.link.remote_source.dynamic
        # never in the metadata store, nor among the vhost's queues
        assert broker.call(lambda: list(broker.vhost.queues)) == ["requests"]
        assert broker.call(lambda: list(broker.broker.metadata.state.vhost("/").queues)) == ["requests"]

        req_conn.create_sender("/queues/requests").send(Message(body="ping", id="rpc-1", reply_to=reply_to))
        requests = resp_conn.create_receiver("/queues/requests")
        request = requests.receive(timeout=10)
        requests.accept()
        assert request.reply_to == reply_to
        relay = resp_conn.create_sender(None)
        delivery = relay.send(Message(body="pong", address=request.reply_to, correlation_id=request.id))
        assert delivery.remote_state == delivery.ACCEPTED  # confirmed at once

        reply = replies.receive(timeout=10)
        assert (reply.body, reply.correlation_id) == ("pong", "rpc-1")
        assert dropped(broker) == 0
    finally:
        req_conn.close()
        resp_conn.close()


def test_several_volatile_queues_on_one_session_get_their_own_replies(broker):
    conn = BlockingConnection(broker.url, timeout=10)
    try:
        a, b = requester(conn), requester(conn)
        addr_a, addr_b = a.link.remote_source.address, b.link.remote_source.address
        assert addr_a != addr_b
        relay = conn.create_sender(None)
        relay.send(Message(body="for b", address=addr_b))
        relay.send(Message(body="for a", address=addr_a))
        assert a.receive(timeout=10).body == "for a"
        assert b.receive(timeout=10).body == "for b"
    finally:
        conn.close()


def test_a_sender_attached_to_the_reply_address(broker):
    conn = BlockingConnection(broker.url, timeout=10)
    try:
        replies = requester(conn)
        sender = conn.create_sender(replies.link.remote_source.address)
        for i in range(3):
            sender.send(Message(body=f"reply-{i}"))
        assert [replies.receive(timeout=10).body for _ in range(3)] == ["reply-0", "reply-1", "reply-2"]
    finally:
        conn.close()


def test_a_reply_without_credit_is_dropped_and_counted(broker):
    req_conn = BlockingConnection(broker.url, timeout=10)
    resp_conn = BlockingConnection(broker.url, timeout=10)
    try:
        replies = requester(req_conn, credit=0)  # no FLOW yet: no credit
        relay = resp_conn.create_sender(None)
        before = dropped(broker)
        delivery = relay.send(Message(body="lost", address=replies.link.remote_source.address))
        assert delivery.remote_state == delivery.ACCEPTED  # the responder's link never stalls
        assert dropped(broker) == before + 1
        delivered_before = sample(scrape(broker), "rabbitmq_global_messages_delivered_total",
                                  queue_type="rabbit_volatile_queue")  # fmt: skip
        # with credit, the next reply arrives: the dropped one never does
        replies.link.flow(1)
        req_conn.create_sender(None)  # a round trip: the FLOW reached the broker before its answer
        relay.send(Message(body="kept", address=replies.link.remote_source.address))
        assert replies.receive(timeout=10).body == "kept"
        assert dropped(broker) == before + 1
        assert sample(scrape(broker), "rabbitmq_global_messages_delivered_total",
                      queue_type="rabbit_volatile_queue") == delivered_before + 1  # fmt: skip
    finally:
        req_conn.close()
        resp_conn.close()


def test_a_drained_requester_gets_no_reply(broker):
    conn = BlockingConnection(broker.url, timeout=10)
    try:
        replies = requester(conn, credit=0)
        link = replies.link
        link.drain(5)
        conn.wait(lambda: not link.drain_mode or link.credit == 0, msg="drain answered")
        conn.wait(lambda: link.credit == 0, msg="credit used up by the drain")
        before = dropped(broker)
        conn.create_sender(None).send(Message(body="late", address=link.remote_source.address))
        assert dropped(broker) == before + 1
    finally:
        conn.close()


def test_a_gone_requesters_address_accepts_and_drops(broker):
    req_conn = BlockingConnection(broker.url, timeout=10)
    resp_conn = BlockingConnection(broker.url, timeout=10)
    try:
        replies = requester(req_conn)
        address = replies.link.remote_source.address
        replies.close()
        assert broker.call(lambda: dict(broker.broker.volatile.queues)) == {}
        relay = resp_conn.create_sender(None)
        delivery = relay.send(Message(body="nobody", address=address))
        assert delivery.remote_state == delivery.ACCEPTED  # as RabbitMQ: confirmed, dropped
        relay.send(Message(body="still there", address=address))  # the responder's link lives on
        # a sender attaching to the gone address is refused
        with pytest.raises(LinkDetached, match="not-found"):
            resp_conn.create_sender(address)
    finally:
        req_conn.close()
        resp_conn.close()


def test_an_address_naming_no_member_is_released(broker):
    conn = BlockingConnection(broker.url, timeout=10)
    try:
        relay = conn.create_sender(None)
        for bogus in ("amq.rabbitmq.reply-to.bm9ib2R5.abc", "amq.rabbitmq.reply-to.garbage"):
            with pytest.raises(SendException) as refused:
                relay.send(Message(body="x", address=f"/queues/{bogus}"))
            assert refused.value.state == Delivery.RELEASED  # unroutable
    finally:
        conn.close()


def test_a_requester_closing_its_connection_frees_its_queues(broker):
    conn = BlockingConnection(broker.url, timeout=10)
    for _ in range(5):
        requester(conn)
    assert broker.call(lambda: len(broker.broker.volatile.queues)) == 5
    conn.close()
    conn2 = BlockingConnection(broker.url, timeout=10)  # a round trip: the close was handled
    conn2.close()
    assert broker.call(lambda: len(broker.broker.volatile.queues)) == 0


def test_an_address_from_another_vhost_is_not_delivered(broker):
    broker.add_vhost("other")
    broker.set_permissions("guest", "other")
    conn = BlockingConnection(broker.url, timeout=10)
    other = BlockingConnection(broker.url, timeout=10, virtual_host="vhost:other")
    try:
        replies = requester(conn, credit=0)
        address = replies.link.remote_source.address
        delivery = other.create_sender(None).send(Message(body="cross", address=address))
        assert delivery.remote_state == delivery.ACCEPTED  # no such queue in 'other': accepted and dropped
        with pytest.raises(LinkDetached, match="not-found"):
            other.create_sender(address)
        replies.link.flow(1)
        conn.create_sender(None).send(Message(body="same vhost", address=address))
        assert replies.receive(timeout=10).body == "same vhost"
    finally:
        conn.close()
        other.close()


def test_a_responder_needs_write_on_the_default_exchange(broker):
    broker.add_user("responder", "pw")
    broker.set_permissions("responder", "/", write="^amq\\.topic$")
    conn = BlockingConnection(broker.url, timeout=10)
    resp = BlockingConnection(f"amqp://responder:pw@127.0.0.1:{broker.port}", timeout=10)
    try:
        address = requester(conn).link.remote_source.address
        with pytest.raises(SendException) as refused:
            resp.create_sender(None).send(Message(body="no", address=address))
        assert refused.value.state == Delivery.REJECTED
        with pytest.raises(LinkDetached, match="unauthorized-access"):
            resp.create_sender(address)
    finally:
        conn.close()
        resp.close()


def test_a_dynamic_receiver_without_the_capability_gets_an_exclusive_auto_delete_queue(broker):
    conn = BlockingConnection(broker.url, timeout=10)
    try:
        receiver = conn.create_receiver(None, dynamic=True, options=VolatileSource(capability=None))
        address = receiver.link.remote_source.address
        assert address.startswith("/queues/amq.gen-")
        name = address[len("/queues/") :]
        queue = broker.call(lambda: broker.vhost.queues[name])
        assert (queue.type_name, queue.durable, queue.auto_delete) == ("classic", False, True)
        assert queue.exclusive_owner is not None
        conn.create_sender(address).send(Message(body="stored"))
        assert receiver.receive(timeout=10).body == "stored"
        receiver.accept()
        receiver.close()  # auto-delete: the last consumer went (the DETACH's answer came after)
        assert name not in broker.call(lambda: set(broker.vhost.queues))
    finally:
        conn.close()


def test_a_dynamic_sender_is_refused(broker):
    conn = BlockingConnection(broker.url, timeout=10)
    try:
        with pytest.raises(LinkDetached, match="not-implemented.*Dynamic targets not supported"):
            conn.create_sender(None, options=DynamicTarget())
    finally:
        conn.close()


def test_reply_addresses_are_unguessable(broker):
    conn = BlockingConnection(broker.url, timeout=10)
    try:
        addresses = {requester(conn).link.remote_source.address for _ in range(20)}
        assert len(addresses) == 20
        keys = {a.rsplit(".", 1)[1] for a in addresses}
        assert all(len(k) >= 22 for k in keys)  # 128 random bits each
        assert len({a.rsplit(".", 1)[0] for a in addresses}) == 1  # the node part names this node
    finally:
        conn.close()


def test_rpc_ids_round_trip(broker):
    """Many requests on one requester link, replies matched by correlation id."""
    broker.declare_queue("requests")
    conn = BlockingConnection(broker.url, timeout=10)
    try:
        replies = requester(conn, credit=100)
        reply_to = replies.link.remote_source.address
        sender = conn.create_sender("/queues/requests")
        ids = [str(uuid.uuid4()) for _ in range(20)]
        for i in ids:
            sender.send(Message(body=i, id=i, reply_to=reply_to))
        requests = conn.create_receiver("/queues/requests", credit=100)
        relay = conn.create_sender(None)
        for _ in ids:
            r = requests.receive(timeout=10)
            relay.send(Message(body=r.body.upper(), address=r.reply_to, correlation_id=r.id))
        requests.accept()
        got = {}
        for _ in ids:
            m = replies.receive(timeout=10)
            got[m.correlation_id] = m.body
        assert got == {i: i.upper() for i in ids}
    finally:
        conn.close()


def test_a_v1_responder_replies_through_the_default_exchange(broker):
    """RabbitMQ routes the default exchange to a reply address named by the
    routing key (how AMQP 0.9.1 and v1 responders reply): v1's `/queue`
    target with the reply queue's name as subject."""
    conn = BlockingConnection(broker.url, timeout=10)
    try:
        replies = requester(conn)
        name = replies.link.remote_source.address[len("/queues/") :]
        conn.create_sender("/queue").send(Message(body="by subject", subject=name))
        assert replies.receive(timeout=10).body == "by subject"
    finally:
        conn.close()
