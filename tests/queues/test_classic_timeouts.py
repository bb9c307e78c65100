"""ClassicQueue consumer timeout (queues/classic/timeouts.py): a message held
unsettled past x-consumer-timeout (a policy's, or the node setting) goes back
to the queue, the consumer gets nothing more and is told; its link's detach
then returns the rest."""

from __future__ import annotations

import pytest

from queues.base import ACCEPT, RELEASE, QueueArgumentError

from .classic_fakes import FakeConsumer, FakeHost, fill, grant, make


def test_a_message_held_past_the_timeout_goes_to_another_consumer_and_the_holder_is_told():
    host = FakeHost()
    q = make(host, x_consumer_timeout=5000)
    slow, other = FakeConsumer(), FakeConsumer()
    q.attach_consumer(slow)
    fill(q, 2)
    grant(q, slow, 2)
    q.settle(slow, [1], ACCEPT)
    q.attach_consumer(other)
    grant(q, other, 5)
    assert other.got == []
    host.advance(5999)  # first seen held at +1 s: late by at most that
    assert slow.timeouts == [] and q.unacked_count == 1
    host.advance(1)
    assert len(slow.timeouts) == 1 and "5000 ms" in slow.timeouts[0] and "queue 'q'" in slow.timeouts[0]
    assert other.seqs == [0] and other.first_acquirer == [False]
    assert other.got[0].delivery_count == 0  # returned, not a failed delivery
    fill(q, 1)
    grant(q, slow, 5)  # timed out: nothing more, whatever credit it grants
    assert slow.seqs == [0, 1] and other.seqs == [0, 2]


def test_the_node_setting_applies_unless_the_queue_or_a_policy_sets_one():
    host = FakeHost()
    q = make(host, consumer_timeout=2000)
    c = FakeConsumer()
    q.attach_consumer(c)
    fill(q, 1)
    grant(q, c, 1)
    host.advance(3000)
    assert len(c.timeouts) == 1 and q.message_count == 1
    q2 = make(host, consumer_timeout=2000)
    q2.apply_policy({"x-consumer-timeout": 60_000})  # a policy's (or the queue's own) wins over the node's
    c2 = FakeConsumer()
    q2.attach_consumer(c2)
    fill(q2, 1)
    grant(q2, c2, 1)
    host.advance(30_000)
    assert c2.timeouts == [] and q2.unacked_count == 1


def test_without_a_timeout_nothing_is_checked():
    host = FakeHost()
    q = make(host)
    c = FakeConsumer()
    q.attach_consumer(c)
    fill(q, 1)
    grant(q, c, 1)
    assert host.pending_timers() == []
    host.advance(10**9)
    assert c.timeouts == [] and q.unacked_count == 1


def test_the_consumer_ending_its_link_from_the_callback_returns_the_rest():
    host = FakeHost()
    q = make(host, x_consumer_timeout=1000)
    c = FakeConsumer()
    q.attach_consumer(c)
    fill(q, 1)
    grant(q, c, 5)
    host.advance(1500)  # stamps the first
    fill(q, 1)
    c.on_timed_out = lambda: q.detach_consumer(c)
    host.advance(1000)
    assert len(c.timeouts) == 1 and q.consumer_count == 0
    assert q.message_count == 2 and q.unacked_count == 0


@pytest.mark.parametrize("value", [0, -1, "60000", True, 1.5])
def test_a_bad_x_consumer_timeout_is_refused(value):
    with pytest.raises(QueueArgumentError, match="x-consumer-timeout"):
        make(x_consumer_timeout=value)


def test_the_check_runs_every_twentieth_of_the_timeout_at_least_every_second():
    host = FakeHost()
    q = make(host, x_consumer_timeout=60_000)
    c = FakeConsumer()
    q.attach_consumer(c)
    fill(q, 1)
    grant(q, c, 1)
    assert [t.when - host.now for t in host.pending_timers()] == [3000]


def test_a_released_message_delivered_again_is_held_anew():
    host = FakeHost()
    q = make(host, x_consumer_timeout=5000)
    c = FakeConsumer()
    q.attach_consumer(c)
    fill(q, 1)
    grant(q, c, 1)
    host.advance(4500)  # stamped at +1 s
    q.settle(c, [0], RELEASE)
    grant(q, c, 1)  # the same message, the same seq, delivered again
    assert c.seqs == [0, 0]
    host.advance(2000)  # 6.5 s after the first delivery, 2 s after this one
    assert c.timeouts == [] and q.unacked_count == 1
    host.advance(5000)
    assert len(c.timeouts) == 1


@pytest.mark.parametrize("step_ms", [120_000, -120_000])
def test_a_wall_clock_step_times_out_a_consumer_neither_early_nor_late(step_ms):
    # found going through the wall clock's uses for the chaos suite's clock faults
    # (cluster-tests/chaos_nemesis.py): the time a message is held is a duration, measured on
    # the monotonic clock as RabbitMQ's is
    host = FakeHost()
    q = make(host, x_consumer_timeout=60_000)
    c = FakeConsumer()
    q.attach_consumer(c)
    fill(q, 1)
    grant(q, c, 1)
    host.advance(10_000)
    host.jump(step_ms)  # NTP or an operator steps the wall clock
    host.advance(49_000)  # held 59 s
    assert c.timeouts == [] and q.unacked_count == 1
    host.advance(2 * 60_000 // 20 + 1)  # first seen held at the first check, found at a later one
    assert len(c.timeouts) == 1 and q.message_count == 1
