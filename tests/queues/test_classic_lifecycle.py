"""ClassicQueue lifecycle and management: self-deletion (auto-delete after the
last consumer, x-expires), purge, delete, the counters, restore after a
restart, argument validation and the store key."""

from __future__ import annotations

import pytest

from amqp.types import Symbol
from queues.base import ACCEPT, REJECT, RELEASE, Outcome, QueueMessage
from queues.classic import ClassicQueueConfig, QueueArgumentError, store_key

from .classic_fakes import FakeConsumer, FakeHost, RecordingPersistence, _delivered, fill, grant, make, msg

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


@pytest.mark.parametrize("step_ms", [120_000, -120_000])
def test_x_expires_counts_real_idle_time_across_a_wall_clock_step(step_ms):
    # found going through the wall clock's uses for the chaos suite's clock faults: idle time
    # is a duration (RabbitMQ's x-expires is a timer); a wall clock stepped back kept the queue, one stepped forward ended it early
    # when a policy changed x-expires
    for change in (False, True):
        host = FakeHost()
        q = make(host, x_expires=30_000)
        host.advance(10_000)
        host.jump(step_ms)
        if change:
            q.apply_policy({"x-expires": 40_000})  # idle 10 s of 40
        host.advance(19_999 if not change else 29_999)
        assert host.deleted == []
        host.advance(1)
        assert host.deleted == [q]
