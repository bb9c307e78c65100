"""ClassicQueue message TTL and length limits: expiry by timer and at the
head (queue and per-message TTL, dead-lettered with reason "expired"),
x-max-length and x-max-length-bytes with drop-head (dead-lettered with reason
"maxlen"), reject-publish and reject-publish-dlx."""

from __future__ import annotations

from queues.base import RELEASE, Outcome

from .classic_fakes import T0, FakeConsumer, FakeHost, RecordingPersistence, _delivered, fill, grant, make, msg

# ---------------------------------------------------------------- TTL


def test_queue_ttl_expires_by_timer():
    host = FakeHost()
    q = make(host, x_message_ttl=1000)
    fill(q, 2)
    host.advance(999)
    assert q.message_count == 2
    host.advance(1)
    assert q.message_count == 0 and q.stats.expired == 2 and q.stats.dropped == 2


def test_expired_messages_dead_letter_with_reason_expired():
    host = FakeHost()
    q = make(host, x_message_ttl=100, x_dead_letter_exchange="dlx")
    fill(q, 1)
    host.advance(50)
    fill(q, 1, prefix="n")
    host.advance(50)
    assert [(s, r) for s, r, _ in host.dead] == [(0, "expired")]
    host.advance(50)
    assert [(s, r) for s, r, _ in host.dead] == [(0, "expired"), (1, "expired")]


def test_per_message_ttl_and_queue_ttl_take_the_minimum():
    host = FakeHost()
    q = make(host, x_message_ttl=1000)
    q.publish(msg("short", expires_at=T0 + 10), None)
    q.publish(msg("long", expires_at=T0 + 5000), None)
    q.publish(msg("none"), None)
    assert [m.expires_at for m in q._messages.ready] == [T0 + 10, T0 + 1000, T0 + 1000]


def test_per_message_ttl_only_at_the_head():
    host = FakeHost()
    q = make(host)
    q.publish(msg("a"), None)
    q.publish(msg("b", expires_at=T0 + 10), None)
    host.advance(20)
    assert q.message_count == 2  # b is not at the head yet
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 5)
    assert c.bodies == [b"a"] and q.stats.expired == 1 and q.message_count == 0


def test_expired_message_is_never_delivered_even_before_the_timer():
    host = FakeHost()
    q = make(host)
    q.publish(msg("a", expires_at=T0 + 10), None)
    q.publish(msg("b"), None)
    host.now += 10  # time passes, the timer has not run yet
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 5)
    assert c.bodies == [b"b"]


def test_timer_rearms_for_an_earlier_returned_head():
    host = FakeHost()
    q = make(host)
    c = FakeConsumer()
    q.attach_consumer(c)
    q.publish(msg("a", expires_at=T0 + 100), None)
    grant(q, c, 1)
    q.publish(msg("b", expires_at=T0 + 500), None)
    q.settle(c, [0], RELEASE)  # a returns ahead of b with the earlier expiry
    host.advance(100)
    assert q.message_count == 1 and q.stats.expired == 1
    host.advance(400)
    assert q.message_count == 0 and q.stats.expired == 2


def test_requeued_expired_message_is_dropped():
    host = FakeHost()
    q = make(host, x_message_ttl=100)
    c = _delivered(q, 1)
    host.advance(200)  # unacked messages do not expire
    assert q.unacked_count == 1 and q.stats.expired == 0
    q.settle(c, [0], RELEASE)
    assert q.message_count == 0 and q.stats.expired == 1


def test_ttl_zero_delivers_only_to_a_ready_consumer():
    host = FakeHost()
    q = make(host, x_message_ttl=0, x_dead_letter_exchange="dlx")
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 1)
    fill(q, 2)
    assert c.seqs == [0]
    assert [(s, r) for s, r, _ in host.dead] == [(1, "expired")]
    assert q.message_count == 0 and host.pending_timers() == []


# ---------------------------------------------------------------- max length


def test_max_length_drop_head_dead_letters_oldest_with_reason_maxlen():
    host = FakeHost()
    q = make(host, x_max_length=2, x_dead_letter_exchange="dlx")
    assert fill(q, 4) == [Outcome.ACCEPTED] * 4
    assert [(s, r) for s, r, _ in host.dead] == [(0, "maxlen"), (1, "maxlen")]
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 10)
    assert c.seqs == [2, 3]


def test_max_length_counts_ready_not_unacked():
    q = make(x_max_length=1)
    c = _delivered(q, 1)
    fill(q, 1, prefix="n")
    assert q.message_count == 1 and q.unacked_count == 1 and q.stats.dropped == 0
    q.settle(c, [0], RELEASE)  # the requeue pushes it over: the head (seq 0) goes
    assert q.message_count == 1 and q.stats.dropped == 1
    grant(q, c, 1)
    assert c.seqs == [0, 1]


def test_max_length_bytes_drop_head():
    q = make(x_max_length_bytes=10)
    for body in (b"aaaa", b"bbbb", b"cccc"):
        q.publish(msg(body), None)
    assert q.message_count == 2 and q.ready_bytes == 8 and q.stats.dropped == 1


def test_max_length_zero_delivers_to_ready_consumer_only():
    q = make(x_max_length=0)
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 1)
    fill(q, 2)
    assert c.seqs == [0] and q.message_count == 0 and q.stats.dropped == 1


def test_reject_publish_refuses_and_does_not_store():
    p = RecordingPersistence()
    q = make(durable=True, persistence=p, x_max_length=2, x_overflow="reject-publish", x_dead_letter_exchange="d")
    outcomes: list[Outcome] = []
    for i in range(3):
        q.publish(msg(str(i), durable=True), outcomes.append)
    p.commit()
    assert outcomes == [Outcome.REJECTED, Outcome.ACCEPTED, Outcome.ACCEPTED]  # the refusal is immediate
    assert q.message_count == 2 and [w for w in p.writes if w[0] == "put"] == [("put", 0), ("put", 1)]
    assert q.stats.dead_lettered == 0
    assert q.stats.rejected == 1


def test_reject_publish_bytes_limit():
    q = make(x_max_length_bytes=5, x_overflow="reject-publish")
    outcomes: list[Outcome] = []
    q.publish(msg(b"aaaa"), outcomes.append)
    q.publish(msg(b"bb"), outcomes.append)
    q.publish(msg(b"c"), outcomes.append)
    assert outcomes == [Outcome.ACCEPTED, Outcome.REJECTED, Outcome.ACCEPTED]


def test_reject_publish_dlx_rejects_and_dead_letters():
    host = FakeHost()
    q = make(host, x_max_length=1, x_overflow="reject-publish-dlx", x_dead_letter_exchange="dlx")
    outcomes: list[Outcome] = []
    q.publish(msg("a"), outcomes.append)
    q.publish(msg("b"), outcomes.append)
    q.publish(msg("c"), None)
    assert outcomes == [Outcome.ACCEPTED, Outcome.REJECTED]
    assert [(m.payload, r) for _, r, m in host.dead] == [(b"b", "maxlen"), (b"c", "maxlen")]
    assert q.message_count == 1
