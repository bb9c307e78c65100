"""ClassicQueue settlement and detach: accept, release (requeued at its
original position), modified (annotations, failed-delivery count,
undeliverable here), reject (dead-lettered or dropped), what each writes to
the store, settlements inside deliver, unknown and foreign seqs, and a detached
consumer's unacked messages going back to the others."""

from __future__ import annotations

import pytest

from amqp.types import Symbol
from queues.base import ACCEPT, REJECT, RELEASE, Settlement

from .classic_fakes import FakeConsumer, FakeHost, RecordingPersistence, _delivered, fill, grant, make, msg

# ---------------------------------------------------------------- settlement


def test_accept_removes():
    p = RecordingPersistence()
    q = make(durable=True, persistence=p)
    c = FakeConsumer()
    q.attach_consumer(c)
    fill(q, 3, durable=True)
    grant(q, c, 3)
    q.settle(c, [0, 2], ACCEPT)
    assert q.unacked_count == 1 and q.message_count == 0
    assert ("remove", 0) in p.writes and ("remove", 2) in p.writes and ("remove", 1) not in p.writes
    assert q.stats.acknowledged == 2


def test_delivery_writes_nothing_to_the_store():
    p = RecordingPersistence()
    q = make(durable=True, persistence=p)
    c = FakeConsumer()
    q.attach_consumer(c)
    fill(q, 1, durable=True)
    grant(q, c, 1)
    assert p.writes == [("put", 0)]
    assert c.first_acquirer == [True]
    q.settle(c, [0], RELEASE)
    grant(q, c, 1)
    assert c.first_acquirer == [True, False]
    assert p.writes == [("put", 0)]  # a release changes nothing on disk


def test_presettled_consumer_removes_on_delivery():
    p = RecordingPersistence()
    q = make(durable=True, persistence=p)
    c = FakeConsumer(presettled=True)
    q.attach_consumer(c)
    fill(q, 2, durable=True)
    grant(q, c, 5)
    assert c.seqs == [0, 1]
    assert q.message_count == 0 and q.unacked_count == 0
    assert p.writes == [("put", 0), ("put", 1), ("remove", 0), ("remove", 1)]
    q.detach_consumer(c)
    assert q.message_count == 0


def test_release_requeues_at_original_position_without_counting_a_failure():
    q = make()
    c = _delivered(q, 5)
    fill(q, 2, prefix="late")  # seqs 5, 6 wait
    q.settle(c, [3, 1], RELEASE)
    assert q.message_count == 4
    grant(q, c, 10)
    assert c.seqs[5:] == [1, 3, 5, 6]
    assert [m.delivery_count for m in c.got[5:7]] == [0, 0]
    assert c.first_acquirer[5:] == [False, False, True, True]
    assert q.stats.redelivered == 2


def test_modified_merges_annotations_and_counts_failed_delivery():
    p = RecordingPersistence()
    q = make(durable=True, persistence=p)
    c = FakeConsumer()
    q.attach_consumer(c)
    q.publish(msg("a", durable=True), None)
    grant(q, c, 1)
    m = c.got[0]
    m.annotations = {Symbol("x-keep"): 1}
    q.settle(c, [0], Settlement("modified", delivery_failed=True, annotations={Symbol("x-new"): "v"}))
    assert m.delivery_count == 1 and m.acquired
    assert m.annotations == {Symbol("x-keep"): 1, Symbol("x-new"): "v"}
    assert p.stored[0].delivery_count == 1 and p.stored[0].annotations == m.annotations
    q.settle(c, [0], Settlement("modified"))  # settled already: ignored
    grant(q, c, 1)
    assert c.seqs == [0, 0] and c.got[1].delivery_count == 1
    q.settle(c, [0], Settlement("modified"))  # no failure: count unchanged
    grant(q, c, 1)
    assert c.got[2].delivery_count == 1


def test_modified_undeliverable_here_dead_letters_or_drops():
    host = FakeHost()
    q = make(host, x_dead_letter_exchange="dlx")
    c = _delivered(q, 2)
    q.settle(c, [1], Settlement("modified", True, True, {Symbol("a"): 1}))
    assert [(s, r) for s, r, _ in host.dead] == [(1, "rejected")]
    assert host.dead[0][2].annotations == {Symbol("a"): 1} and host.dead[0][2].delivery_count == 1
    q2 = make(FakeHost())
    c2 = _delivered(q2, 1)
    q2.settle(c2, [0], Settlement("modified", undeliverable_here=True))
    assert q2.stats.dropped == 1 and q2.message_count == 0 and q2.unacked_count == 0


def test_reject_dead_letters_with_dlx_else_drops():
    host = FakeHost()
    q = make(host, x_dead_letter_exchange="")  # the default exchange counts as set
    c = _delivered(q, 3)
    q.settle(c, [2, 0], REJECT)
    assert [(s, r) for s, r, _ in host.dead] == [(2, "rejected"), (0, "rejected")]
    assert q.stats.dead_lettered == 2
    q2 = make()
    c2 = _delivered(q2, 1)
    q2.settle(c2, [0], REJECT)
    assert q2.stats.dropped == 1 and q2.stats.dead_lettered == 0


def test_dead_lettered_durable_message_leaves_the_store():
    host = FakeHost()
    p = RecordingPersistence()
    q = make(host, durable=True, persistence=p, x_dead_letter_exchange="dlx")
    c = FakeConsumer()
    q.attach_consumer(c)
    fill(q, 1, durable=True)
    grant(q, c, 1)
    q.settle(c, [0], REJECT)
    assert p.stored == {} and host.dead[0][1] == "rejected"


def test_unknown_settlement_kind_is_an_error():
    q = make()
    c = _delivered(q, 1)
    with pytest.raises(ValueError):
        q.settle(c, [0], Settlement("bogus"))
    assert q.unacked_count == 1


def test_settlements_apply_in_the_given_order():
    host = FakeHost()
    q = make(host, x_dead_letter_exchange="dlx")
    c = _delivered(q, 4)
    q.settle(c, [3, 1, 2], REJECT)
    assert [s for s, _, _ in host.dead] == [3, 1, 2]


def test_unknown_and_foreign_seqs_are_ignored():
    q = make()
    a = _delivered(q, 2)
    b = FakeConsumer()
    q.attach_consumer(b)
    q.settle(b, [0, 1, 99], ACCEPT)
    q.settle(FakeConsumer(), [0], ACCEPT)
    assert q.unacked_count == 2
    q.settle(a, [0, 0, 1, 42], ACCEPT)
    assert q.unacked_count == 0 and q.stats.acknowledged == 2


def test_consumer_settling_inside_deliver():
    q = make()
    c = FakeConsumer()
    c.on_deliver = lambda queue, m: queue.settle(c, [m.seq], ACCEPT)
    q.attach_consumer(c)
    fill(q, 5)
    grant(q, c, 3)
    assert c.seqs == [0, 1, 2] and q.unacked_count == 0 and q.message_count == 2


def test_consumer_releasing_inside_deliver_does_not_loop_beyond_credit():
    q = make()
    c = FakeConsumer()
    c.on_deliver = lambda queue, m: queue.settle(c, [m.seq], RELEASE)
    q.attach_consumer(c)
    fill(q, 2)
    grant(q, c, 3)
    assert c.seqs == [0, 0, 0] and q.message_count == 2


def test_dead_letter_back_into_the_same_queue():
    host = FakeHost()
    q = make(host, x_dead_letter_exchange="")
    host.republish_to = q
    c = _delivered(q, 1)
    q.settle(c, [0], REJECT)
    assert q.message_count == 1
    grant(q, c, 1)
    assert c.seqs == [0, 1]


# ---------------------------------------------------------------- detach


def test_detach_returns_unacked_in_seq_order_and_redistributes():
    q = make()
    a = _delivered(q, 4)
    q.settle(a, [1], ACCEPT)
    b = FakeConsumer()
    q.attach_consumer(b)
    grant(q, b, 10)
    q.detach_consumer(a)
    assert b.seqs == [0, 2, 3]
    assert b.first_acquirer == [False] * 3
    assert q.unacked_count == 3 and q.consumer_count == 1


def test_detached_consumer_gets_nothing_more():
    q = make()
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 5)
    q.detach_consumer(c)
    fill(q, 2)
    assert c.got == [] and q.message_count == 2
    q.detach_consumer(c)  # twice is harmless
    d = FakeConsumer()
    q.attach_consumer(d)
    with pytest.raises(ValueError):
        q.attach_consumer(d)
