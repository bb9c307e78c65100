"""The volatile queue on its own (queues/volatile.py): delivers only under
the link's credit, drops and counts otherwise, confirms every publish at
once, follows [2.6.7] credit arithmetic and drain, and names itself so
that the node can be read back and the key cannot be guessed."""

from __future__ import annotations

from amqp import serial
from queues.base import Outcome, QueueMessage
from queues.volatile import QueueExclusive, VolatileQueue, is_volatile, new_name, node_of

from .classic_fakes import FakeConsumer, FakeHost


def make() -> tuple[VolatileQueue, FakeHost, FakeConsumer]:
    host = FakeHost()
    q = VolatileQueue(host, "/", new_name("127.0.0.1:7001"))
    consumer = FakeConsumer(presettled=True)
    q.attach_consumer(consumer)
    return q, host, consumer


def publish(q: VolatileQueue, body: bytes) -> list[Outcome]:
    outcomes: list[Outcome] = []
    q.publish(QueueMessage(0, body), outcomes.append)
    return outcomes


def test_delivers_under_credit_and_drops_without_it():
    q, host, consumer = make()
    assert publish(q, b"early") == [Outcome.ACCEPTED]  # no credit yet: dropped, still accepted
    assert consumer.bodies == [] and host.dropped == {"maxlen": 1}
    q.credit(consumer, 0, 2, False, False)
    assert publish(q, b"a") == [Outcome.ACCEPTED]
    assert publish(q, b"b") == [Outcome.ACCEPTED]
    assert publish(q, b"c") == [Outcome.ACCEPTED]
    assert consumer.bodies == [b"a", b"b"]
    assert consumer.seqs == [1, 2]
    assert host.dropped == {"maxlen": 2}
    assert q.message_count == 0  # nothing is ever held


def test_credit_counts_the_transfers_the_receiver_had_not_seen():
    q, _, consumer = make()
    q.credit(consumer, 0, 3, False, False)
    publish(q, b"a")
    publish(q, b"b")
    # a FLOW sent before the receiver saw both: delivery-count 0, credit 3 -> one left
    q.credit(consumer, 0, 3, False, False)
    assert q.link_credit == 1
    q.credit(consumer, 2, 5, False, True)  # echo: answered with the state the queue holds
    assert consumer.replies == [(2, 5, 0, False)]


def test_drain_uses_up_the_credit_at_once():
    q, host, consumer = make()
    q.credit(consumer, 0, 4, True, False)
    assert consumer.replies == [(4, 0, 0, True)]
    publish(q, b"late")
    assert consumer.bodies == [] and host.dropped == {"maxlen": 1}


def test_delivery_count_wraps():
    q, _, consumer = make()
    q.delivery_count = serial.MASK
    q.credit(consumer, serial.MASK, 2, False, False)
    publish(q, b"a")
    publish(q, b"b")
    assert len(consumer.bodies) == 2 and q.delivery_count == 1


def test_one_consumer_only_and_detaching_deletes_the_queue():
    q, host, consumer = make()
    try:
        q.attach_consumer(FakeConsumer())
        raise AssertionError("a second consumer was taken")
    except QueueExclusive:
        pass
    q.detach_consumer(consumer)
    assert q.deleted and host.deleted == [q]
    assert publish(q, b"after") == [Outcome.ACCEPTED]
    assert consumer.bodies == []


def test_names_say_the_node_and_hide_a_random_key():
    a, b = new_name("127.0.0.1:7001"), new_name("127.0.0.1:7001")
    assert a != b and is_volatile(a)
    assert node_of(a) == node_of(b) == "127.0.0.1:7001"
    assert len(a.rsplit(".", 1)[1]) == 22  # 16 bytes in base64url
    assert node_of("amq.rabbitmq.reply-to.garbage") is None
    assert node_of("amq.rabbitmq.reply-to.%%%.key") is None
    assert node_of("orders") is None and not is_volatile("orders")
