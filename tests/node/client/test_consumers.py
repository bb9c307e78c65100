"""Consumers as python-qpid-proton sees them: pre-settled and unsettled
deliveries, every outcome a receiver can give (accepted, rejected, released,
modified) and what it does to the message, dead-lettering with RabbitMQ's
death annotations, round-robin, and requeueing when a link or a connection
goes away with unsettled deliveries."""

from __future__ import annotations

import pytest
from proton import Delivery, Message, symbol
from proton.reactor import AtMostOnce
from proton.utils import BlockingConnection, BlockingReceiver
from raw_client import RawClient

from amqp import definitions as d
from amqp.message import Message as WireMessage
from node.client.delivery_bytes import delivery_payload
from queues.base import QueueMessage


def connect(broker) -> BlockingConnection:
    return BlockingConnection(broker.url, timeout=10)


def publish(conn: BlockingConnection, queue: str, bodies, **message_kw) -> None:
    s = conn.create_sender(f"/queues/{queue}")
    for body in bodies:
        s.send(Message(body=body, **message_kw))  # raises unless accepted
    s.close()


def settle(receiver: BlockingReceiver, state, failed: bool = False, undeliverable: bool = False,
           annotations: dict | None = None) -> None:  # fmt: skip
    """Settles the oldest received, unsettled delivery with `state`; for
    MODIFIED with the given delivery-failed, undeliverable-here and
    message-annotations."""
    delivery = receiver.fetcher.unsettled.popleft()
    if state == Delivery.MODIFIED:
        delivery.local.failed = failed
        delivery.local.undeliverable = undeliverable
        if annotations is not None:
            delivery.local.annotations = annotations
    delivery.update(state)
    delivery.settle()


def barrier(conn: BlockingConnection) -> None:
    """Returns once the broker has handled every frame the client wrote
    before: a link attach and detach are two round trips on the connection."""
    conn.create_sender("/exchanges/amq.direct").close()


def counts(broker, queue: str) -> tuple[int, int]:
    """(ready, unsettled) messages of a queue, read on the node's loop."""
    return broker.call(lambda: (broker.queue(queue).message_count, broker.queue(queue).unacked_count))


def declare_dead_letter_pair(broker, queue: str = "work", dlq: str = "dlq", **arguments) -> None:
    """`queue` dead-letters through fanout exchange `dlx` into `dlq`."""

    async def topology():
        await broker.vhost.declare_exchange("dlx", "fanout")
        await broker.vhost.declare_queue(dlq, True, None, False, {})
        await broker.vhost.bind("dlx", "queue", dlq)
        await broker.vhost.declare_queue(queue, True, None, False, {"x-dead-letter-exchange": "dlx", **arguments})

    broker.call(topology)


# ---------------------------------------------------------------- pre-settled


def test_presettled_consumer_removes_messages_on_delivery(broker):
    broker.declare_queue("q")
    conn = connect(broker)
    publish(conn, "q", [f"m{i}" for i in range(5)])
    r = conn.create_receiver("/queues/q", credit=10, options=AtMostOnce())
    assert [r.receive(timeout=10).body for _ in range(5)] == [f"m{i}" for i in range(5)]
    assert not r.fetcher.unsettled  # every transfer came settled
    barrier(conn)
    assert counts(broker, "q") == (0, 0)
    r.close()  # nothing to requeue: at most once
    barrier(conn)
    assert counts(broker, "q") == (0, 0)
    conn.close()


# ---------------------------------------------------------------- outcomes


def test_accepted_removes_the_message(broker):
    broker.declare_queue("q")
    conn = connect(broker)
    publish(conn, "q", ["a", "b", "c"])
    r = conn.create_receiver("/queues/q", credit=3)
    for body in ("a", "b", "c"):
        assert r.receive(timeout=10).body == body
    barrier(conn)
    assert counts(broker, "q") == (0, 3)  # delivered, held until settled
    for _ in range(3):
        r.accept()
    barrier(conn)
    assert counts(broker, "q") == (0, 0)
    r.close()  # nothing unsettled is left to requeue
    barrier(conn)
    assert counts(broker, "q") == (0, 0)
    conn.close()


def test_rejected_is_dropped_without_a_dead_letter_exchange(broker):
    queue = broker.declare_queue("q")
    conn = connect(broker)
    publish(conn, "q", ["bad", "good"])
    r = conn.create_receiver("/queues/q", credit=1)
    assert r.receive(timeout=10).body == "bad"
    r.reject()
    assert r.receive(timeout=10).body == "good"  # "bad" never comes back
    r.accept()
    r.close()
    barrier(conn)
    assert counts(broker, "q") == (0, 0)
    assert broker.call(lambda: (queue.stats.dropped, queue.stats.dead_lettered)) == (1, 0)
    conn.close()


def test_rejected_is_dead_lettered_with_death_annotations(broker):
    declare_dead_letter_pair(broker)
    conn = connect(broker)
    publish(conn, "work", ["poison"], properties={"k": "v"}, annotations={symbol("x-opt-app"): "mine"})
    r = conn.create_receiver("/queues/work", credit=1)
    assert r.receive(timeout=10).body == "poison"
    r.reject()
    dead = conn.create_receiver("/queues/dlq", credit=1).receive(timeout=10)
    assert dead.body == "poison"
    assert dead.properties == {"k": "v"}
    ann = dead.annotations
    assert ann["x-opt-app"] == "mine"  # the publisher's annotations survive
    assert ann["x-first-death-reason"] == "rejected"
    assert ann["x-first-death-queue"] == "work"
    assert ann["x-first-death-exchange"] == ""  # published to /queues/work: the default exchange
    assert ann["x-last-death-reason"] == "rejected"
    assert ann["x-last-death-queue"] == "work"
    (death,) = ann["x-opt-deaths"]
    assert death["queue"] == "work"
    assert death["reason"] == "rejected"
    assert death["count"] == 1
    assert death["exchange"] == ""
    assert list(death["routing-keys"]) == ["work"]
    assert death["first-time"] == death["last-time"]
    assert dead.first_acquirer is True  # a new message in the dead-letter queue
    assert dead.delivery_count == 0
    barrier(conn)
    assert counts(broker, "work") == (0, 0)
    conn.close()


def test_a_second_death_in_the_same_queue_counts_up(broker):
    """Dead-lettered back into the queue it died in (a retry loop through the
    default exchange): one x-opt-deaths entry per (queue, reason), counting."""
    broker.declare_queue("retry", True, **{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "retry"})
    conn = connect(broker)
    publish(conn, "retry", ["again"])
    r = conn.create_receiver("/queues/retry", credit=1)
    assert "x-opt-deaths" not in (r.receive(timeout=10).annotations or {})
    for count in (1, 2):
        r.reject()
        m = r.receive(timeout=10)
        assert m.body == "again"
        (death,) = m.annotations["x-opt-deaths"]
        assert (death["queue"], death["reason"], death["count"]) == ("retry", "rejected", count)
        assert m.annotations["x-first-death-queue"] == "retry"
    r.accept()
    conn.close()


def test_copies_dead_lettered_together_keep_their_own_death_history(broker):
    """A fanout dead-letter exchange makes two copies; when one copy dies
    again, the other's x-opt-deaths must not change with it."""

    async def topology():
        v = broker.vhost
        await v.declare_exchange("dlx", "fanout")
        await v.declare_queue("work", True, None, False, {"x-dead-letter-exchange": "dlx"})
        # dlq1 sends its dead back to work; dlq2 keeps them
        await v.declare_queue("dlq1", True, None, False, {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "work"})
        await v.declare_queue("dlq2", True, None, False, {})
        await v.bind("dlx", "queue", "dlq1")
        await v.bind("dlx", "queue", "dlq2")

    broker.call(topology)
    conn = connect(broker)
    publish(conn, "work", ["twice"])
    work = conn.create_receiver("/queues/work", credit=1, name="work")
    work.receive(timeout=10)
    work.reject()  # one copy in dlq1, one in dlq2
    dlq1 = conn.create_receiver("/queues/dlq1", credit=1, name="dlq1")
    dlq1.receive(timeout=10)
    dlq1.reject()  # back to work
    m = work.receive(timeout=10)
    assert [(x["queue"], x["count"]) for x in m.annotations["x-opt-deaths"]] == [("dlq1", 1), ("work", 1)]
    work.reject()  # dies in work a second time: that copy counts 2
    third = dlq1.receive(timeout=10)
    assert {x["queue"]: x["count"] for x in third.annotations["x-opt-deaths"]} == {"dlq1": 1, "work": 2}
    first_copy, second_copy = (m.annotations["x-opt-deaths"] for m in receive_n(conn, "dlq2", 2))
    assert [(x["queue"], x["count"]) for x in first_copy] == [("work", 1)]  # as it was when it died
    assert {x["queue"]: x["count"] for x in second_copy} == {"dlq1": 1, "work": 2}
    conn.close()


def receive_n(conn: BlockingConnection, queue: str, n: int) -> list:
    r = conn.create_receiver(f"/queues/{queue}", credit=n)
    got = [r.receive(timeout=10) for _ in range(n)]
    for _ in range(n):
        r.accept()
    return got


def test_released_is_requeued_as_not_first_acquirer(broker):
    broker.declare_queue("q")
    conn = connect(broker)
    publish(conn, "q", ["once-more"])
    r = conn.create_receiver("/queues/q", credit=1)
    first = r.receive(timeout=10)
    assert (first.body, first.first_acquirer, first.delivery_count) == ("once-more", True, 0)
    settle(r, Delivery.RELEASED)
    again = r.receive(timeout=10)
    # released is not a failed delivery [3.4.4]: delivery-count stays
    assert (again.body, again.first_acquirer, again.delivery_count) == ("once-more", False, 0)
    r.accept()
    barrier(conn)
    assert counts(broker, "q") == (0, 0)
    conn.close()


def test_released_messages_keep_their_place_in_the_queue(broker):
    broker.declare_queue("q")
    conn = connect(broker)
    publish(conn, "q", ["m0", "m1", "m2"])
    r = conn.create_receiver("/queues/q", credit=0)  # receive() grants one credit at a time
    assert [r.receive(timeout=10).body for _ in range(2)] == ["m0", "m1"]
    settle(r, Delivery.RELEASED)  # m0 goes back ahead of m2, still in the queue
    barrier(conn)  # proton would write receive()'s FLOW before the DISPOSITION
    got = [r.receive(timeout=10) for _ in range(2)]
    assert [(m.body, m.first_acquirer) for m in got] == [("m0", False), ("m2", True)]
    conn.close()


def test_modified_delivery_failed_counts_deliveries(broker):
    broker.declare_queue("q")
    conn = connect(broker)
    publish(conn, "q", ["flaky"])
    r = conn.create_receiver("/queues/q", credit=1)
    seen = []
    for _ in range(3):
        m = r.receive(timeout=10)
        seen.append((m.first_acquirer, m.delivery_count))
        settle(r, Delivery.MODIFIED, failed=True)
    assert seen == [(True, 0), (False, 1), (False, 2)]
    m = r.receive(timeout=10)
    assert m.delivery_count == 3
    settle(r, Delivery.MODIFIED)  # modified without delivery-failed: count unchanged
    assert r.receive(timeout=10).delivery_count == 3
    r.accept()
    conn.close()


def test_modified_undeliverable_here_is_dropped_or_dead_lettered(broker):
    declare_dead_letter_pair(broker)
    plain = broker.declare_queue("plain")
    conn = connect(broker)
    publish(conn, "plain", ["p"])
    publish(conn, "work", ["w"])
    r = conn.create_receiver("/queues/plain", credit=1)
    assert r.receive(timeout=10).body == "p"
    settle(r, Delivery.MODIFIED, failed=True, undeliverable=True)
    w = conn.create_receiver("/queues/work", credit=1)
    assert w.receive(timeout=10).body == "w"
    settle(w, Delivery.MODIFIED, failed=True, undeliverable=True)
    dead = conn.create_receiver("/queues/dlq", credit=1).receive(timeout=10)
    assert dead.body == "w"
    assert dead.annotations["x-first-death-reason"] == "rejected"  # as RabbitMQ 4 records it
    assert dead.annotations["x-first-death-queue"] == "work"
    barrier(conn)
    assert counts(broker, "plain") == (0, 0)
    assert counts(broker, "work") == (0, 0)
    assert broker.call(lambda: plain.stats.dropped) == 1
    conn.close()


def test_modified_annotations_are_merged_into_the_message(broker):
    declare_dead_letter_pair(broker)
    conn = connect(broker)
    publish(conn, "work", ["annotated"], annotations={symbol("x-opt-origin"): "publisher", symbol("x-opt-keep"): 1})
    r = conn.create_receiver("/queues/work", credit=1)
    first = r.receive(timeout=10)
    routing = {"x-exchange": "", "x-routing-key": "work"}  # added by the broker, as RabbitMQ does
    assert first.annotations == {"x-opt-origin": "publisher", "x-opt-keep": 1, **routing}
    settle(r, Delivery.MODIFIED, annotations={symbol("x-opt-origin"): "consumer", symbol("x-opt-note"): "seen"})
    again = r.receive(timeout=10)
    # [3.4.5] merged: same keys replaced, new keys added, the rest kept
    assert again.annotations == {"x-opt-origin": "consumer", "x-opt-keep": 1, "x-opt-note": "seen", **routing}
    assert again.first_acquirer is False
    # a second modification adds to the first, and dead-lettering keeps them all
    settle(r, Delivery.MODIFIED, undeliverable=True, annotations={symbol("x-opt-final"): True})
    dead = conn.create_receiver("/queues/dlq", credit=1).receive(timeout=10)
    ann = dead.annotations
    assert {k: ann[k] for k in ("x-opt-origin", "x-opt-keep", "x-opt-note", "x-opt-final")} == {
        "x-opt-origin": "consumer",
        "x-opt-keep": 1,
        "x-opt-note": "seen",
        "x-opt-final": True,
    }
    assert ann["x-first-death-reason"] == "rejected"
    conn.close()


@pytest.mark.parametrize(
    "header, delivery_annotations",
    [
        (None, None),  # no header section: one is added
        ({}, None),  # an empty header (list0, as proton writes it)
        ({"durable": True, "priority": 7, "ttl": 5000}, None),  # list8
        ({"first_acquirer": True, "delivery_count": 2}, None),  # already right: unchanged
        ({"durable": True}, {"x-opt-hop": 1}),  # delivery annotations are not passed on
        (None, {"x-opt-hop": 1}),
    ],
)
def test_first_deliveries_say_first_acquirer(header, delivery_annotations):
    """RabbitMQ sets first-acquirer on every delivery and adds x-exchange and
    x-routing-key annotations; the broker's fast path for first deliveries must
    keep every other header field and the rest of the message byte for byte."""
    published = WireMessage.build(b"body", header=header, delivery_annotations=delivery_annotations,
                                  message_annotations={"x-opt-ma": "kept"}, properties={"message_id": "id-1"})  # fmt: skip
    plain = WireMessage.build(b"body", header=header, properties={"message_id": "id-1"})
    before = published.header or d.Header()
    for msg, extra in ((published, {"x-opt-ma": "kept"}), (plain, {})):
        for _ in range(2):  # the second time from the cache
            queued = QueueMessage(0, msg.payload, exchange="amq.direct", routing_keys=["rk"])
            out = WireMessage.from_bytes(delivery_payload(queued))
            assert out.header.first_acquirer is True
            for field in ("durable", "priority", "ttl", "delivery_count"):
                assert getattr(out.header, field) == getattr(before, field)
            assert out.delivery_annotations is None
            assert out.message_annotations == {"x-exchange": "amq.direct", "x-routing-key": "rk", **extra}
            assert bytes(out.bare_bytes) == bytes(msg.bare_bytes)


def test_consumers_see_the_exchange_and_routing_key(broker):
    broker.declare_queue("annotated")
    broker.call(broker.vhost.bind, "amq.direct", "queue", "annotated", "key-1")
    conn = connect(broker)
    conn.create_sender("/exchanges/amq.direct/key-1").send(Message(body="via exchange"))
    conn.create_sender("/queues/annotated").send(Message(body="via queue"))
    r = conn.create_receiver("/queues/annotated", credit=2)
    first, second = r.receive(timeout=10), r.receive(timeout=10)
    assert (first.annotations["x-exchange"], first.annotations["x-routing-key"]) == ("amq.direct", "key-1")
    assert (second.annotations["x-exchange"], second.annotations["x-routing-key"]) == ("", "annotated")
    conn.close()


# ---------------------------------------------------------------- several consumers


def test_round_robin_between_two_consumers(broker):
    broker.declare_queue("q")
    conn = connect(broker)
    r1 = conn.create_receiver("/queues/q", credit=10, name="c1")
    r2 = conn.create_receiver("/queues/q", credit=10, name="c2")
    barrier(conn)  # both grants reached the broker
    publish(conn, "q", [f"m{i}" for i in range(10)])
    got1 = [r1.receive(timeout=10).body for _ in range(5)]
    got2 = [r2.receive(timeout=10).body for _ in range(5)]
    evens, odds = [f"m{i}" for i in range(0, 10, 2)], [f"m{i}" for i in range(1, 10, 2)]
    assert (got1, got2) in ((evens, odds), (odds, evens))
    for r in (r1, r2):
        for _ in range(5):
            r.accept()
    barrier(conn)
    assert counts(broker, "q") == (0, 0)
    conn.close()


def test_detach_with_unsettled_deliveries_requeues_them(broker):
    broker.declare_queue("q")
    conn = connect(broker)
    publish(conn, "q", ["m0", "m1", "m2", "m3"])
    r1 = conn.create_receiver("/queues/q", credit=3, name="first")
    got = [r1.receive(timeout=10) for _ in range(3)]
    assert [(m.body, m.first_acquirer) for m in got] == [("m0", True), ("m1", True), ("m2", True)]
    r1.accept()  # m0 settled; m1 and m2 are not
    r1.close()
    r2 = conn.create_receiver("/queues/q", credit=3, name="second")
    got = [r2.receive(timeout=10) for _ in range(3)]
    assert [(m.body, m.first_acquirer) for m in got] == [("m1", False), ("m2", False), ("m3", True)]
    for _ in range(3):
        r2.accept()
    barrier(conn)
    assert counts(broker, "q") == (0, 0)
    conn.close()


def test_closing_the_connection_requeues_unsettled_messages(broker):
    broker.declare_queue("q")
    first = connect(broker)
    publish(first, "q", ["m0", "m1"])
    r = first.create_receiver("/queues/q", credit=2)
    assert [r.receive(timeout=10).body for _ in range(2)] == ["m0", "m1"]
    first.close()  # never settled
    second = connect(broker)
    r = second.create_receiver("/queues/q", credit=2)
    got = [r.receive(timeout=10) for _ in range(2)]
    assert [(m.body, m.first_acquirer) for m in got] == [("m0", False), ("m1", False)]
    r.accept()
    r.accept()
    second.close()


# ---------------------------------------------------------------- settlement order


def test_settlements_of_one_disposition_apply_in_delivery_id_order(broker):
    """The client settles three deliveries newest first; they go out as one
    DISPOSITION range, and the broker applies it from the lowest delivery-id
    up, so the dead-letter queue receives them in their original order."""
    declare_dead_letter_pair(broker)
    conn = connect(broker)
    publish(conn, "work", ["m0", "m1", "m2"])
    conn.close()
    client = RawClient(broker.port)
    try:
        client.connect()
        session = client.begin()
        link = client.receiver(session, "/queues/work", credit=3)
        deliveries = client.receive(3)
        assert [d_.id for d_ in deliveries] == [0, 1, 2]
        for delivery in reversed(deliveries):
            session.settle(delivery, d.Rejected())
        client.flush()
        dlq = client.receiver(session, "/queues/dlq", credit=3, name="dlq")
        dead = client.receive(3)
        assert [WireMessage.from_bytes(x.payload).body for x in dead] == ["m0", "m1", "m2"]
        assert all(x.link is dlq for x in dead)
        assert link.active
    finally:
        client.close()
