"""Queue arguments and properties through real clients: message TTL (queue
and per message), length limits with each overflow behaviour, dead-letter
routing, x-expires, auto-delete and exclusive queues."""

from __future__ import annotations

import threading
import time

import pytest
from proton import Delivery, Message
from proton.utils import BlockingConnection, LinkDetached, SendException

from node.vhosts.vhost import ResourceLocked


def connect(broker) -> BlockingConnection:
    return BlockingConnection(broker.url, timeout=10)


def send(conn: BlockingConnection, address: str, bodies, **message_kw) -> None:
    s = conn.create_sender(address)
    for body in bodies:
        s.send(Message(body=body, **message_kw))  # raises unless accepted
    s.close()


def receive(conn: BlockingConnection, queue: str, n: int) -> list:
    r = conn.create_receiver(f"/queues/{queue}", credit=n)
    got = []
    for _ in range(n):
        got.append(r.receive(timeout=10))
        r.accept()
    r.close()
    return got


def barrier(conn: BlockingConnection) -> None:
    """Returns once the broker has handled every frame the client wrote before."""
    conn.create_sender("/exchanges/amq.direct").close()


def declare(broker, name: str, durable: bool = False, owner=None, auto_delete: bool = False, **arguments):
    return broker.call(broker.vhost.declare_queue, name, durable, owner, auto_delete, arguments)[0]


def with_dlq(broker, dlq: str = "dlq", exchange: str = "dlx") -> None:
    """A fanout exchange `exchange` feeding queue `dlq`."""

    async def topology():
        await broker.vhost.declare_exchange(exchange, "fanout", durable=False)
        await broker.vhost.declare_queue(dlq, False, None, False, {})
        await broker.vhost.bind(exchange, "queue", dlq)

    broker.call(topology)


def exists(broker, name: str) -> bool:
    return broker.call(lambda: name in broker.vhost.queues)


def wait_until_deleted(broker, name: str, timeout: float = 5.0) -> float:
    """Polls (there is no event to await for a timer inside the node);
    returns the seconds it took."""
    start = time.monotonic()
    while exists(broker, name):
        assert time.monotonic() - start < timeout, f"queue {name} still exists"
        time.sleep(0.02)
    return time.monotonic() - start


def handler_of(broker, opening) -> tuple:
    """Opens a connection with `opening()` and returns it with the node's
    ConnectionHandler for it."""
    before = broker.call(lambda: set(broker.broker.connections))
    conn = opening()
    (handler,) = broker.call(lambda: set(broker.broker.connections)) - before
    return conn, handler


def when_gone(broker, handler) -> threading.Event:
    """An event set once the node has cleaned up after `handler`'s connection."""
    gone = threading.Event()
    original = handler.connection_lost

    def connection_lost(exc):
        original(exc)
        gone.set()

    broker.call(setattr, handler, "connection_lost", connection_lost)
    return gone


def deaths(message: Message) -> list[tuple]:
    return [(d["queue"], d["reason"], d["count"]) for d in message.annotations["x-opt-deaths"]]


# ---------------------------------------------------------------- TTL


def test_queue_message_ttl_expires_and_dead_letters(broker):
    with_dlq(broker)
    short = declare(broker, "short", **{"x-message-ttl": 50})  # no dead-letter exchange: dropped
    declare(broker, "timed", **{"x-message-ttl": 200, "x-dead-letter-exchange": "dlx"})
    conn = connect(broker)
    send(conn, "/queues/short", ["dropped"])
    send(conn, "/queues/timed", ["t0", "t1"], properties={"n": 1})
    dead = receive(conn, "dlq", 2)  # arrives once the TTL has passed
    assert [m.body for m in dead] == ["t0", "t1"]
    for m in dead:
        assert m.properties == {"n": 1}
        assert m.annotations["x-first-death-reason"] == "expired"
        assert m.annotations["x-first-death-queue"] == "timed"
        assert deaths(m) == [("timed", "expired", 1)]
    # "short" expired its message 150 ms before "timed" did
    assert broker.call(lambda: (short.message_count, short.stats.expired, short.stats.dropped)) == (0, 1, 1)
    r = conn.create_receiver("/queues/short", credit=1)
    send(conn, "/queues/short", ["fresh"])  # a consumer waiting with credit gets it before it expires
    assert r.receive(timeout=10).body == "fresh"
    r.accept()
    conn.close()


def test_a_requeued_message_keeps_its_expiry(broker):
    """Released after its TTL passed while a consumer held it: it expires as
    it reaches the head again instead of being redelivered."""
    with_dlq(broker)
    declare(broker, "ttl", **{"x-message-ttl": 100, "x-dead-letter-exchange": "dlx"})
    declare(broker, "marker", **{"x-message-ttl": 300, "x-dead-letter-exchange": "dlx"})
    conn = connect(broker)
    send(conn, "/queues/ttl", ["held"])
    r = conn.create_receiver("/queues/ttl", credit=1)
    assert r.receive(timeout=10).body == "held"  # unsettled, so it cannot expire now
    send(conn, "/queues/marker", ["marker"])
    dlq = conn.create_receiver("/queues/dlq", credit=2)
    assert dlq.receive(timeout=10).body == "marker"  # 300 ms later: "held" is long past its TTL
    r.release(delivered=False)  # released, not modified
    dead = dlq.receive(timeout=10)
    assert dead.body == "held"
    assert dead.annotations["x-first-death-reason"] == "expired"
    assert r.fetcher.has_message == 0  # never redelivered
    conn.close()


def test_zero_ttl_delivers_only_to_a_waiting_consumer(broker):
    with_dlq(broker)
    declare(broker, "now", **{"x-message-ttl": 0, "x-dead-letter-exchange": "dlx"})
    conn = connect(broker)
    send(conn, "/queues/now", ["nobody-waits"])
    (dead,) = receive(conn, "dlq", 1)
    assert dead.body == "nobody-waits"
    assert dead.annotations["x-first-death-reason"] == "expired"
    r = conn.create_receiver("/queues/now", credit=1)
    barrier(conn)
    send(conn, "/queues/now", ["caught"])
    assert r.receive(timeout=10).body == "caught"
    r.accept()
    conn.close()


def test_per_message_ttl_from_the_header(broker):
    with_dlq(broker)
    q = declare(broker, "q", **{"x-dead-letter-exchange": "dlx"})
    conn = connect(broker)
    send(conn, "/queues/q", ["brief"], ttl=0.1)  # proton's ttl is in seconds
    send(conn, "/queues/q", ["lasting"])
    (dead,) = receive(conn, "dlq", 1)
    assert dead.body == "brief"
    assert dead.annotations["x-first-death-reason"] == "expired"
    assert dead.annotations["x-first-death-queue"] == "q"
    assert [m.body for m in receive(conn, "q", 1)] == ["lasting"]
    assert broker.call(lambda: (q.message_count, q.stats.expired)) == (0, 1)
    conn.close()


def test_the_shorter_of_queue_and_message_ttl_applies(broker):
    with_dlq(broker)
    declare(broker, "q", **{"x-message-ttl": 60_000, "x-dead-letter-exchange": "dlx"})
    conn = connect(broker)
    send(conn, "/queues/q", ["message-ttl-wins"], ttl=0.05)
    (dead,) = receive(conn, "dlq", 1)
    assert dead.body == "message-ttl-wins"
    assert dead.annotations["x-first-death-reason"] == "expired"
    conn.close()


# ---------------------------------------------------------------- length limits


def test_max_length_drops_the_oldest(broker):
    with_dlq(broker)
    plain = declare(broker, "capped", **{"x-max-length": 2})
    declare(broker, "capped-dl", **{"x-max-length": 2, "x-dead-letter-exchange": "dlx"})
    conn = connect(broker)
    bodies = [f"m{i}" for i in range(5)]
    send(conn, "/queues/capped", bodies)  # every publish is accepted (drop-head)
    send(conn, "/queues/capped-dl", bodies)
    assert broker.call(lambda: (plain.message_count, plain.stats.dropped)) == (2, 3)
    assert [m.body for m in receive(conn, "capped", 2)] == ["m3", "m4"]
    assert [m.body for m in receive(conn, "capped-dl", 2)] == ["m3", "m4"]
    dead = receive(conn, "dlq", 3)
    assert [m.body for m in dead] == ["m0", "m1", "m2"]
    for m in dead:
        assert m.annotations["x-first-death-reason"] == "maxlen"
        assert m.annotations["x-first-death-queue"] == "capped-dl"
    conn.close()


def test_max_length_bytes_counts_message_sizes(broker):
    q = declare(broker, "bytes", **{"x-max-length-bytes": 2500})
    conn = connect(broker)
    send(conn, "/queues/bytes", [f"{i}" * 1000 for i in range(5)])  # ~1 KB each: two fit
    assert broker.call(lambda: (q.message_count, q.stats.dropped)) == (2, 3)
    assert broker.call(lambda: q.ready_bytes) <= 2500
    assert [m.body[0] for m in receive(conn, "bytes", 2)] == ["3", "4"]
    conn.close()


def test_overflow_reject_publish_rejects_the_publisher(broker):
    with_dlq(broker)
    q = declare(broker, "full", **{"x-max-length": 2, "x-overflow": "reject-publish"})
    declare(broker, "full-dl", **{"x-max-length": 1, "x-overflow": "reject-publish-dlx",
                                  "x-dead-letter-exchange": "dlx"})  # fmt: skip
    conn = connect(broker)
    s = conn.create_sender("/queues/full")
    s.send(Message(body="a"))
    s.send(Message(body="b"))
    with pytest.raises(SendException) as e:
        s.send(Message(body="c"))
    assert e.value.state == Delivery.REJECTED
    assert broker.call(lambda: (q.message_count, q.stats.rejected)) == (2, 1)
    assert [m.body for m in receive(conn, "full", 1)] == ["a"]  # room again
    s.send(Message(body="d"))
    assert [m.body for m in receive(conn, "full", 2)] == ["b", "d"]  # the oldest were kept
    # reject-publish-dlx: rejected and dead-lettered
    s2 = conn.create_sender("/queues/full-dl")
    s2.send(Message(body="kept"))
    with pytest.raises(SendException) as e:
        s2.send(Message(body="refused"))
    assert e.value.state == Delivery.REJECTED
    (dead,) = receive(conn, "dlq", 1)
    assert dead.body == "refused"
    assert dead.annotations["x-first-death-reason"] == "maxlen"
    assert [m.body for m in receive(conn, "full-dl", 1)] == ["kept"]
    conn.close()


# ---------------------------------------------------------------- dead-letter routing


def test_dead_letter_routing_key_replaces_the_original_key(broker):
    async def topology():
        v = broker.vhost
        await v.declare_queue("dead-by-key", False, None, False, {})
        await v.declare_queue("dead-by-original", False, None, False, {})
        await v.bind("amq.direct", "queue", "dead-by-key", "dead")
        await v.bind("amq.topic", "queue", "dead-by-original", "orders.*")
        await v.declare_queue("with-key", False, None, False,
                        {"x-dead-letter-exchange": "amq.direct", "x-dead-letter-routing-key": "dead"})  # fmt: skip
        await v.declare_queue("without-key", False, None, False, {"x-dead-letter-exchange": "amq.topic"})
        await v.bind("amq.direct", "queue", "with-key", "orders.eu")
        await v.bind("amq.direct", "queue", "without-key", "orders.eu")

    broker.call(topology)
    conn = connect(broker)
    send(conn, "/exchanges/amq.direct/orders.eu", ["order-1"])  # to both queues
    for queue in ("with-key", "without-key"):
        r = conn.create_receiver(f"/queues/{queue}", credit=1)
        assert r.receive(timeout=10).body == "order-1"
        r.reject()
    (by_key,) = receive(conn, "dead-by-key", 1)
    (by_original,) = receive(conn, "dead-by-original", 1)
    for m, queue in ((by_key, "with-key"), (by_original, "without-key")):
        assert m.body == "order-1"
        (death,) = m.annotations["x-opt-deaths"]
        assert death["queue"] == queue
        assert death["exchange"] == "amq.direct"
        assert list(death["routing-keys"]) == ["orders.eu"]  # the key it was published with
    conn.close()


def test_a_missing_dead_letter_exchange_drops_the_message(broker):
    q = declare(broker, "q", **{"x-dead-letter-exchange": "no-such-exchange"})
    conn = connect(broker)
    send(conn, "/queues/q", ["lost"])
    r = conn.create_receiver("/queues/q", credit=1)
    assert r.receive(timeout=10).body == "lost"
    r.reject()
    r.close()
    barrier(conn)
    assert broker.call(lambda: (q.message_count, q.unacked_count)) == (0, 0)
    conn.close()


# ---------------------------------------------------------------- queue lifetimes


def test_x_expires_deletes_an_unused_queue(broker):
    conn = connect(broker)
    declare(broker, "held", **{"x-expires": 300})
    r = conn.create_receiver("/queues/held", credit=1)  # a consumer keeps it in use
    declare(broker, "unused", **{"x-expires": 300})
    wait_until_deleted(broker, "unused")
    assert exists(broker, "held")  # its own countdown ended first, with a consumer attached
    r.close()  # unused from now on
    assert wait_until_deleted(broker, "held") >= 0.2
    with pytest.raises(LinkDetached, match="not-found"):
        conn.create_receiver("/queues/held")
    conn.close()


def test_auto_delete_queue_goes_with_its_last_consumer(broker):
    declare(broker, "ad", auto_delete=True)
    conn = connect(broker)
    send(conn, "/queues/ad", ["m"])
    assert exists(broker, "ad")  # no consumer ever: it stays
    r1 = conn.create_receiver("/queues/ad", credit=1, name="c1")
    r2 = conn.create_receiver("/queues/ad", credit=1, name="c2")
    r1.close()
    assert exists(broker, "ad")
    r2.close()  # the node deletes the queue while it handles the DETACH
    assert not exists(broker, "ad")
    conn.close()


def test_auto_delete_queue_goes_when_the_consumers_connection_closes(broker):
    declare(broker, "ad")
    declare(broker, "ad2", auto_delete=True)
    conn, handler = handler_of(broker, lambda: connect(broker))
    conn.create_receiver("/queues/ad2", credit=1)
    gone = when_gone(broker, handler)
    conn.close()
    assert gone.wait(10)
    assert not exists(broker, "ad2")
    assert exists(broker, "ad")


def test_exclusive_queue_belongs_to_its_connection(broker):
    owner_conn, owner = handler_of(broker, lambda: connect(broker))
    declare(broker, "mine", owner=owner)
    send(owner_conn, "/queues/mine", ["private"])
    other_conn, other = handler_of(broker, lambda: connect(broker))
    # another connection may not consume from it, nor declare it again
    with pytest.raises(LinkDetached, match="resource-locked"):
        other_conn.create_receiver("/queues/mine")
    with pytest.raises(ResourceLocked):
        declare(broker, "mine", owner=other)
    assert [m.body for m in receive(owner_conn, "mine", 1)] == ["private"]
    gone = when_gone(broker, owner)
    owner_conn.close()
    assert gone.wait(10)
    assert not exists(broker, "mine")  # it died with its connection
    with pytest.raises(LinkDetached, match="not-found"):
        other_conn.create_receiver("/queues/mine")
    other_conn.close()
