"""ClassicQueue as a pure core: a fake host (manual clock and timers, recorded
dead letters and self-deletions), recording consumers, MemoryPersistence or a
recording persistence that confirms only when the test says so."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from node.amqp import serial
from node.amqp.types import Symbol
from queues.base import ACCEPT, REJECT, RELEASE, Outcome, QueueMessage, Settlement
from queues.classic import (
    MAX_CREDIT,
    ClassicQueue,
    ClassicQueueConfig,
    MemoryPersistence,
    QueueArgumentError,
    store_key,
)

T0 = 1_700_000_000_000


# ---------------------------------------------------------------- fakes


class Timer:
    def __init__(self, when: int, fn) -> None:
        self.when = when
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeHost:
    def __init__(self) -> None:
        self.now = T0
        self.timers: list[Timer] = []
        self.dead: list[tuple[int, str, QueueMessage]] = []
        self.deleted: list[ClassicQueue] = []
        self.republish_to: ClassicQueue | None = None  # dead letters go back here

    def now_ms(self) -> int:
        return self.now

    def call_later(self, delay_s: float, fn) -> Timer:
        assert delay_s >= 0
        timer = Timer(self.now + round(delay_s * 1000), fn)
        self.timers.append(timer)
        return timer

    def pending_timers(self) -> list[Timer]:
        return [t for t in self.timers if not t.cancelled]

    def advance(self, ms: int) -> None:
        target = self.now + ms
        while True:
            due = [t for t in self.timers if not t.cancelled and t.when <= target]
            if not due:
                break
            timer = min(due, key=lambda t: t.when)
            self.timers.remove(timer)
            self.now = max(self.now, timer.when)
            timer.fn()
        self.now = target

    def dead_letter(self, queue, message: QueueMessage, reason: str) -> None:
        self.dead.append((message.seq, reason, message))
        if self.republish_to is not None:
            payload = message.payload
            self.republish_to.publish(QueueMessage(0, payload, message.durable), None)

    def queue_deleted(self, queue) -> None:
        self.deleted.append(queue)


class FakeConsumer:
    def __init__(self, presettled: bool = False) -> None:
        self.presettled = presettled
        self.got: list[QueueMessage] = []
        self.first_acquirer: list[bool] = []
        self.replies: list[tuple[int, int, int, bool]] = []
        self.on_deliver = None
        self.on_reply = None
        self.deleted = 0

    @property
    def seqs(self) -> list[int]:
        return [m.seq for m in self.got]

    @property
    def bodies(self) -> list[bytes]:
        return [m.payload for m in self.got]

    def deliver(self, queue, message: QueueMessage) -> None:
        self.got.append(message)
        self.first_acquirer.append(not message.acquired)
        if self.on_deliver is not None:
            self.on_deliver(queue, message)

    def credit_reply(self, delivery_count: int, credit: int, available: int, drain: bool) -> None:
        self.replies.append((delivery_count, credit, available, drain))
        if self.on_reply is not None:
            self.on_reply()

    def queue_deleted(self) -> None:
        self.deleted += 1


class RecordingPersistence(MemoryPersistence):
    """Records writes; on_durable callbacks wait for commit()."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[tuple] = []
        self.stored: dict[int, QueueMessage] = {}
        self.waiting: list = []

    def put(self, queue, seq, message):
        self.writes.append(("put", seq))
        self.stored[seq] = QueueMessage(**{f: getattr(message, f) for f in message.__slots__})
        return super().put(queue, seq, message)

    def update(self, queue, seq, message):
        assert seq in self.stored, "update of a message that is not stored"
        self.writes.append(("update", seq))
        self.stored[seq] = QueueMessage(**{f: getattr(message, f) for f in message.__slots__})
        return super().update(queue, seq, message)

    def remove(self, queue, seq):
        self.writes.append(("remove", seq))
        self.stored.pop(seq, None)
        return super().remove(queue, seq)

    def drop_queue(self, queue):
        self.writes.append(("drop", queue))
        self.stored.clear()
        return super().drop_queue(queue)

    def on_durable(self, ticket, callback):
        self.waiting.append(callback)

    def commit(self) -> None:
        waiting, self.waiting = self.waiting, []
        for cb in waiting:
            cb()


def make(host=None, durable=False, auto_delete=False, persistence=None, **arguments) -> ClassicQueue:
    args = {k.replace("_", "-"): v for k, v in arguments.items()}
    return ClassicQueue("/", "q", durable, None, auto_delete, args, host=host or FakeHost(),
                        persistence=persistence)  # fmt: skip


def msg(body: bytes | str = b"m", durable: bool = False, expires_at: int | None = None) -> QueueMessage:
    if isinstance(body, str):
        body = body.encode()
    return QueueMessage(0, body, durable, expires_at, exchange="ex", routing_keys=["k"])


def fill(q: ClassicQueue, n: int, prefix: str = "m", **kw) -> list[Outcome]:
    outcomes: list[Outcome] = []
    for i in range(n):
        q.publish(msg(f"{prefix}{i}", **kw), outcomes.append)
    return outcomes


def grant(q, c: FakeConsumer, credit: int, drain: bool = False, echo: bool = False) -> None:
    """A FLOW from a receiver that has seen every transfer so far."""
    dc = q.link_state(c)[0]
    q.credit(c, dc, credit, drain, echo)


# ---------------------------------------------------------------- publish and confirm


def test_transient_publish_confirms_at_once_and_counts():
    q = make()
    assert fill(q, 3) == [Outcome.ACCEPTED] * 3
    assert q.message_count == 3 and q.ready_bytes == 6 and q.unacked_count == 0
    assert q.stats.published == 3 and q.stats.confirmed == 3
    assert q.info()["message_count"] == 3 and q.info()["type"] == "classic"


def test_durable_message_confirms_only_after_persistence_says_durable():
    p = RecordingPersistence()
    q = make(durable=True, persistence=p)
    outcomes: list[Outcome] = []
    q.publish(msg("a", durable=True), outcomes.append)
    q.publish(msg("b", durable=False), outcomes.append)  # transient: not stored, confirmed now
    assert outcomes == [Outcome.ACCEPTED]
    assert p.writes == [("put", 0)]
    p.commit()
    assert outcomes == [Outcome.ACCEPTED, Outcome.ACCEPTED]
    assert q.stats.confirmed == 2


def test_non_durable_queue_never_writes_durable_messages():
    p = RecordingPersistence()
    q = make(durable=False, persistence=p)
    assert fill(q, 2, durable=True) == [Outcome.ACCEPTED] * 2
    assert p.writes == []


def test_presettled_publish_is_stored_and_enqueued():
    p = RecordingPersistence()
    q = make(durable=True, persistence=p)
    q.publish(msg("a", durable=True), None)
    assert q.message_count == 1 and p.writes == [("put", 0)] and p.waiting == []


def test_publish_assigns_increasing_seqs():
    q = make()
    messages = [msg(str(i)) for i in range(3)]
    for m in messages:
        m.seq = 99
        q.publish(m, None)
    assert [m.seq for m in messages] == [0, 1, 2]


# ---------------------------------------------------------------- delivery and credit


def test_fifo_and_never_beyond_credit():
    q = make()
    fill(q, 10)
    c = FakeConsumer()
    q.attach_consumer(c)
    assert c.got == []  # no credit yet
    grant(q, c, 3)
    assert c.bodies == [b"m0", b"m1", b"m2"]
    assert q.link_state(c) == (3, 0, False)
    assert q.message_count == 7 and q.unacked_count == 3
    grant(q, c, 2)
    assert c.bodies[3:] == [b"m3", b"m4"]
    assert c.first_acquirer == [True] * 5


def test_new_messages_go_to_consumers_with_credit():
    q = make()
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 2)
    fill(q, 3)
    assert c.bodies == [b"m0", b"m1"] and q.message_count == 1


def test_round_robin_among_consumers_with_credit():
    q = make()
    cs = [FakeConsumer() for _ in range(3)]
    for c in cs:
        q.attach_consumer(c)
        grant(q, c, 10)
    fill(q, 9)
    assert [c.seqs for c in cs] == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]


def test_round_robin_is_fair_across_publishes_and_skips_consumers_without_credit():
    q = make()
    a, b = FakeConsumer(), FakeConsumer()
    q.attach_consumer(a)
    q.attach_consumer(b)
    grant(q, a, 1)
    grant(q, b, 5)
    fill(q, 4)
    assert a.seqs == [0] and b.seqs == [1, 2, 3]


def test_backlog_is_shared_round_robin_when_credit_arrives():
    q = make()
    fill(q, 6)
    a, b = FakeConsumer(), FakeConsumer()
    q.attach_consumer(a)
    q.attach_consumer(b)
    grant(q, a, 2)
    grant(q, b, 2)
    assert a.seqs == [0, 1] and b.seqs == [2, 3]
    grant(q, a, 1)
    grant(q, b, 1)
    assert a.seqs == [0, 1, 4] and b.seqs == [2, 3, 5]


def test_consumer_priority_wins_while_it_has_credit():
    q = make()
    low, high = FakeConsumer(), FakeConsumer()
    q.attach_consumer(low, priority=0)
    q.attach_consumer(high, priority=5)
    grant(q, low, 10)
    grant(q, high, 2)
    fill(q, 5)
    assert high.seqs == [0, 1] and low.seqs == [2, 3, 4]
    grant(q, high, 1)
    fill(q, 1)
    assert high.seqs == [0, 1, 5]


def test_effective_credit_accounts_for_a_lagging_receiver():
    # [2.6.7] credit = delivery_count_rcv + link_credit - delivery_count_snd
    q = make()
    fill(q, 20)
    c = FakeConsumer()
    q.attach_consumer(c)
    q.credit(c, 0, 5, False, False)
    assert len(c.got) == 5
    # The receiver had seen only 2 of those 5 when it granted 4 more: 2 + 4 - 5 = 1.
    q.credit(c, 2, 4, False, True)
    assert len(c.got) == 6
    assert c.replies == [(6, 0, 14, False)]
    # Lagging more than the new credit: nothing, never a negative credit.
    q.credit(c, 0, 3, False, True)
    assert len(c.got) == 6 and c.replies[-1] == (6, 0, 14, False)


def test_credit_can_be_revoked():
    q = make()
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 5)
    grant(q, c, 0)
    fill(q, 2)
    assert c.got == [] and q.message_count == 2


def test_echo_reply_carries_state_after_delivery():
    q = make()
    fill(q, 3)
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 10, echo=True)
    assert c.replies == [(3, 7, 0, False)]
    grant(q, c, 7)  # no echo, no drain: no reply
    assert len(c.replies) == 1


def test_drain_on_empty_queue_advances_delivery_count():
    q = make()
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 10, drain=True)
    assert c.replies == [(10, 0, 0, True)]
    assert q.link_state(c) == (10, 0, True)
    fill(q, 1)  # no credit left
    assert c.got == []


def test_drain_delivers_what_there_is_then_uses_up_the_rest():
    q = make()
    fill(q, 3)
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 5, drain=True)
    assert c.seqs == [0, 1, 2]
    assert c.replies == [(5, 0, 0, True)]


def test_drain_with_more_messages_than_credit_replies_with_remaining_available():
    q = make()
    fill(q, 5)
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 2, drain=True)
    assert c.seqs == [0, 1]
    assert c.replies == [(2, 0, 3, True)]


def test_drain_then_regrant_then_credit_one():
    q = make()
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 4, drain=True)
    assert c.replies[-1] == (4, 0, 0, True)
    fill(q, 3)
    grant(q, c, 1)
    assert c.seqs == [0]
    grant(q, c, 1)
    assert c.seqs == [0, 1]
    grant(q, c, 5, drain=True, echo=True)
    assert c.seqs == [0, 1, 2]
    assert c.replies[-1] == (4 + 2 + 5, 0, 0, True)  # one reply, not two
    assert len(c.replies) == 2


def test_delivery_count_wraps_at_2_32():
    q = make()
    c = FakeConsumer()
    start = serial.MASK - 2  # 2^32 - 3
    q.attach_consumer(c, delivery_count=start)
    fill(q, 10)
    q.credit(c, start, 5, False, True)
    assert c.seqs == [0, 1, 2, 3, 4]
    assert c.replies == [(2, 0, 5, False)]  # 2^32 - 3 + 5 wraps to 2
    # The receiver, lagging from before the wrap, grants 6 more: 2^32-3 + 6 - 2 = 1.
    q.credit(c, start, 6, False, False)
    assert c.seqs == [0, 1, 2, 3, 4, 5]
    q.credit(c, 3, 100, True, False)  # drain across no wrap: 3 + 100
    assert c.replies[-1] == (103, 0, 0, True)


def test_drain_wraps_delivery_count():
    q = make()
    c = FakeConsumer()
    q.attach_consumer(c, delivery_count=serial.MASK)
    q.credit(c, serial.MASK, 10, True, False)
    assert c.replies == [(9, 0, 0, True)]


def test_huge_link_credit_is_capped():
    q = make()
    c = FakeConsumer()
    q.attach_consumer(c)
    q.credit(c, 0, serial.MASK, False, True)
    assert c.replies == [(0, MAX_CREDIT, 0, False)]
    fill(q, 3)
    assert len(c.got) == 3


def test_credit_reply_reentering_credit_is_safe():
    q = make()
    fill(q, 5)
    c = FakeConsumer()
    q.attach_consumer(c)
    calls = []

    def again():
        if not calls:
            calls.append(1)
            grant(q, c, 2, echo=True)

    c.on_reply = again
    grant(q, c, 1, echo=True)
    assert c.seqs == [0, 1, 2]
    assert c.replies == [(1, 0, 4, False), (3, 0, 2, False)]


def test_drain_requested_inside_deliver_completes_after_the_outer_dispatch():
    q = make()
    fill(q, 3)
    c = FakeConsumer()
    q.attach_consumer(c)

    def first(queue, m):
        c.on_deliver = None
        grant(queue, c, 5, drain=True)  # re-enters while the queue is dispatching

    c.on_deliver = first
    grant(q, c, 1)
    assert c.seqs == [0, 1, 2]
    assert c.replies == [(6, 0, 0, True)]
    assert q.link_state(c) == (6, 0, True)


def test_drain_of_one_consumer_leaves_the_other_alone():
    q = make()
    a, b = FakeConsumer(), FakeConsumer()
    q.attach_consumer(a)
    q.attach_consumer(b)
    grant(q, b, 3)
    grant(q, a, 3, drain=True)
    assert a.replies == [(3, 0, 0, True)] and b.replies == []
    fill(q, 2)
    assert a.got == [] and b.seqs == [0, 1]


# ---------------------------------------------------------------- settlement


def _delivered(q, n, consumer=None, **kw):
    c = consumer or FakeConsumer(**kw)
    q.attach_consumer(c)
    fill(q, n)
    grant(q, c, n)
    return c


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
    assert [m.expires_at for m in q._ready] == [T0 + 10, T0 + 1000, T0 + 1000]


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


# ---------------------------------------------------------------- self-deletion


def test_auto_delete_when_last_consumer_detaches():
    host = FakeHost()
    q = make(host, auto_delete=True)
    fill(q, 1)
    a, b = FakeConsumer(), FakeConsumer()
    q.attach_consumer(a)
    q.attach_consumer(b)
    q.detach_consumer(a)
    assert host.deleted == [] and not q.deleted
    q.detach_consumer(b)
    assert host.deleted == [q] and q.deleted
    outcomes: list[Outcome] = []
    q.publish(msg(), outcomes.append)
    assert outcomes == [Outcome.RELEASED]


def test_auto_delete_waits_for_a_first_consumer():
    host = FakeHost()
    q = make(host, auto_delete=True)
    fill(q, 1)
    host.advance(10_000)
    assert host.deleted == []


def test_x_expires_deletes_an_unused_queue():
    host = FakeHost()
    q = make(host, x_expires=1000)
    fill(q, 3)  # publishing is not use
    host.advance(999)
    assert host.deleted == []
    host.advance(1)
    assert host.deleted == [q] and q.deleted


def test_x_expires_waits_while_consumers_and_restarts_after_detach():
    host = FakeHost()
    q = make(host, x_expires=1000)
    c = FakeConsumer()
    host.advance(500)
    q.attach_consumer(c)
    host.advance(5000)
    assert host.deleted == []
    q.detach_consumer(c)
    host.advance(999)
    assert host.deleted == []
    q.touch()
    host.advance(999)
    assert host.deleted == []
    host.advance(1)
    assert host.deleted == [q]


def test_self_delete_drops_persisted_messages():
    host = FakeHost()
    p = RecordingPersistence()
    q = make(host, durable=True, persistence=p, x_expires=10)
    fill(q, 1, durable=True)
    host.advance(10)
    assert p.writes[-1] == ("drop", store_key("/", "q")) and p.stored == {}


# ---------------------------------------------------------------- management


def test_purge_drops_ready_only():
    p = RecordingPersistence()
    q = make(durable=True, persistence=p)
    c = FakeConsumer()
    q.attach_consumer(c)
    fill(q, 5, durable=True)
    grant(q, c, 2)
    q.settle(c, [0], RELEASE)
    assert q.purge() == 4
    assert q.message_count == 0 and q.ready_bytes == 0 and q.unacked_count == 1
    assert set(p.stored) == {1}
    q.settle(c, [1], RELEASE)
    assert q.message_count == 1


def test_delete_drops_everything():
    p = RecordingPersistence()
    q = make(durable=True, persistence=p)
    c = FakeConsumer()
    q.attach_consumer(c)
    fill(q, 5, durable=True)
    grant(q, c, 2)
    assert q.delete() == 5
    assert q.deleted and p.writes[-1][0] == "drop"
    assert q.delete() == 0
    q.settle(c, [0], ACCEPT)  # after delete: ignored
    q.credit(c, 2, 10, True, True)
    assert c.replies == []


def test_counters():
    host = FakeHost()
    q = make(host, x_dead_letter_exchange="dlx", x_message_ttl=100)
    c = _delivered(q, 4)
    q.settle(c, [0], ACCEPT)
    q.settle(c, [1], REJECT)
    q.settle(c, [2], RELEASE)
    grant(q, c, 1)
    host.advance(100)
    s = q.stats
    assert (s.published, s.confirmed, s.delivered, s.redelivered, s.acknowledged) == (4, 4, 5, 1, 1)
    assert (s.dead_lettered, s.dropped, s.expired) == (1, 0, 0)


def test_restore_puts_messages_back_in_seq_order_and_only_before_use():
    q = make()
    q.restore([QueueMessage(5, b"b", True), QueueMessage(2, b"a", True, acquired=True)])
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 5)
    assert c.seqs == [2, 5] and c.first_acquirer == [False, True]
    fill(q, 1)
    assert c.seqs[-1] == 6
    with pytest.raises(RuntimeError):
        q.restore([])


def test_arguments_are_validated():
    assert ClassicQueueConfig.from_arguments({}).overflow == "drop-head"
    bad = [
        {"x-message-ttl": -1},
        {"x-message-ttl": "10"},
        {"x-expires": 0},
        {"x-max-length": True},
        {"x-overflow": "drop-tail"},
        {"x-dead-letter-routing-key": "k"},
    ]
    for arguments in bad:
        with pytest.raises(QueueArgumentError):
            ClassicQueueConfig.from_arguments(arguments)
    cfg = ClassicQueueConfig.from_arguments({"x-overflow": Symbol("reject-publish"), "x-max-length": 3})
    assert cfg.overflow == "reject-publish" and cfg.limited


def test_store_key_is_unambiguous():
    assert store_key("a", "b/c") != store_key("a/b", "c")


# ---------------------------------------------------------------- property: never beyond credit


class CreditMachine(RuleBasedStateMachine):
    """Two consumer links, each with a receiver that sees transfers late: its
    FLOWs carry the delivery-count it has seen so far. For every FLOW the
    queue processes, what it sends afterwards must stay within
    delivery_count_rcv + link_credit [2.6.7], and its replies must agree."""

    @initialize(start=st.sampled_from([0, serial.HALF - 3, serial.MASK - 4]), presettled=st.booleans())
    def setup(self, start, presettled):
        self.host = FakeHost()
        self.q = make(self.host)
        self.links = []
        for _ in range(2):
            link = {"c": FakeConsumer(presettled=presettled), "wire": [], "seen": start, "sent": start,
                    "limit": start, "flow_sent": start}  # fmt: skip
            self._hook(link)
            self.q.attach_consumer(link["c"], delivery_count=start)
            self.links.append(link)

    def _hook(self, link):
        c = link["c"]

        def deliver(queue, m):
            link["sent"] = serial.add(link["sent"], 1)
            assert serial.le(link["sent"], link["limit"]), "delivered beyond credit"
            link["wire"].append(("transfer", m.seq))

        def reply():
            dc, credit, available, drain = c.replies[-1]
            assert credit >= 0 and available == self.q.message_count
            before, limit = link["flow_sent"], link["limit"]
            granted = serial.le(before, limit)
            if drain:
                assert credit == 0
                assert dc == (limit if granted else link["sent"])
            else:
                assert dc == link["sent"]
                assert serial.add(dc, credit) == limit if granted else credit == 0
            link["sent"] = dc
            link["wire"].append(("flow", dc))

        c.on_deliver = deliver
        c.on_reply = reply

    @rule(n=st.integers(1, 5))
    def publish(self, n):
        fill(self.q, n)

    @rule(i=st.integers(0, 1), k=st.integers(0, 8))
    def receive(self, i, k):
        link = self.links[i]
        for _ in range(min(k, len(link["wire"]))):
            kind, value = link["wire"].pop(0)
            link["seen"] = serial.add(link["seen"], 1) if kind == "transfer" else value

    @rule(i=st.integers(0, 1), credit=st.sampled_from([0, 1, 1, 2, 3, 5, 10, 100]), drain=st.booleans(),
          echo=st.booleans())  # fmt: skip
    def flow(self, i, credit, drain, echo):
        link = self.links[i]
        link["limit"] = serial.add(link["seen"], credit)
        link["flow_sent"] = link["sent"]
        self.q.credit(link["c"], link["seen"], credit, drain, echo)
        if drain:
            assert link["c"].replies, "drain must be answered"

    @precondition(lambda self: not self.links[0]["c"].presettled)
    @rule(i=st.integers(0, 1), kind=st.sampled_from(["accept", "release", "fail"]), data=st.data())
    def settle(self, i, kind, data):
        c = self.links[i]["c"]
        held = sorted(self.q._consumers[id(c)].unacked)
        if not held:
            return
        seqs = data.draw(st.lists(st.sampled_from(held), max_size=4, unique=True))
        settlement = {"accept": ACCEPT, "release": RELEASE, "fail": Settlement("modified", True)}[kind]
        self.q.settle(c, seqs, settlement)

    @invariant()
    def queue_state_matches_the_links(self):
        if not hasattr(self, "q"):
            return
        for link in self.links:
            dc, credit, _ = self.q.link_state(link["c"])
            assert dc == link["sent"]
            assert 0 <= credit
            assert serial.le(serial.add(dc, credit), link["limit"]) or credit == 0
        # Nothing idles while somebody has credit.
        if any(self.q.link_state(link["c"])[1] for link in self.links):
            assert self.q.message_count == 0

    @invariant()
    def fifo_per_consumer_for_fresh_messages(self):
        if not hasattr(self, "q"):
            return
        for link in self.links:
            fresh = [m.seq for m, first in zip(link["c"].got, link["c"].first_acquirer, strict=True) if first]
            assert fresh == sorted(fresh)


TestCredit = CreditMachine.TestCase
TestCredit.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def test_delete_tells_every_consumer_once():
    q = make()
    a, b = FakeConsumer(), FakeConsumer()
    q.attach_consumer(a)
    q.attach_consumer(b)
    fill(q, 3)
    grant(q, a, 1)
    assert q.delete() == 3
    assert (a.deleted, b.deleted) == (1, 1)
    assert q.delete() == 0 and (a.deleted, b.deleted) == (1, 1)
