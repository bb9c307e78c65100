"""IdleExpiry (queues/quorum/expiry.py) on a clock the test moves: a quorum queue's
x-expires counts from its last consumer's leaving, only the leader expires it, and a
replica that was not the leader starts counting again."""

from __future__ import annotations

import pytest

from queues.base import QueueArgumentError
from queues.quorum.expiry import IdleExpiry
from queues.quorum.state import QuorumConfig


class Clock:
    """The wall clock (`now`) and the monotonic one (`mono`, what timers count): `advance`
    moves both, `jump` steps the wall clock alone."""

    def __init__(self):
        self.now = 1_000
        self.mono = 1_000
        self.timers: list[list] = []  # [due_ms (monotonic), fn, cancelled]

    def now_ms(self) -> int:
        return self.now

    def monotonic_ms(self) -> int:
        return self.mono

    def call_later(self, delay_s: float, fn):
        timer = [self.mono + round(delay_s * 1000), fn, False]
        self.timers.append(timer)

        class Handle:
            def cancel(self):
                timer[2] = True

        return Handle()

    def advance(self, ms: int) -> None:
        """Moves the clocks, firing the timers that fall due on the way, in order."""
        end = self.mono + ms
        while True:
            due = sorted((t for t in self.timers if not t[2] and t[0] <= end), key=lambda t: t[0])
            if not due:
                break
            timer = due[0]
            timer[2] = True
            self._tick(max(0, timer[0] - self.mono))
            timer[1]()
        self._tick(end - self.mono)

    def _tick(self, ms: int) -> None:
        self.now += ms
        self.mono += ms

    def jump(self, ms: int) -> None:
        self.now += ms


@pytest.fixture
def clock():
    return Clock()


def expiry(clock, leader=lambda: True):
    expired = []
    e = IdleExpiry(clock, leader, lambda: expired.append(clock.now))
    return e, expired


def test_an_unused_queue_expires_after_its_x_expires(clock):
    e, expired = expiry(clock)
    e.configure(1500)
    clock.advance(1499)
    assert expired == []
    clock.advance(1)
    assert expired == [2500]
    clock.advance(10_000)
    assert expired == [2500]  # once


def test_a_consumer_keeps_it_and_the_count_starts_when_the_last_one_leaves(clock):
    e, expired = expiry(clock)
    e.configure(1000)
    e.applied(consumers=1)
    clock.advance(5000)
    assert expired == []
    e.applied(consumers=2)
    clock.advance(100)
    e.applied(consumers=0)  # at 6100
    clock.advance(999)
    assert expired == []
    clock.advance(1001)
    assert expired and 7100 <= expired[0] <= 8100  # at most one period late, never early


def test_commands_applied_without_consumers_do_not_count_as_use(clock):
    e, expired = expiry(clock)
    e.configure(1000)
    for _ in range(5):
        clock.advance(150)
        e.applied(consumers=0)  # publishes
    clock.advance(300)
    assert expired == [2000]


def test_only_the_leader_expires_it_and_a_new_leader_waits_a_whole_period(clock):
    leading = [False]
    e, expired = expiry(clock, leader=lambda: leading[0])
    e.configure(1000)
    clock.advance(1500)
    assert expired == []  # a follower's timer fired at 2000: it counts again from there
    leading[0] = True
    clock.advance(499)
    assert expired == []
    clock.advance(1)
    assert expired == [3000]


def test_a_policy_change_counts_the_idle_time_so_far_and_none_turns_it_off(clock):
    e, expired = expiry(clock)
    e.configure(10_000)
    clock.advance(3000)
    e.configure(2000)  # idle 3000 already: due at once
    clock.advance(0)
    assert expired == [4000]
    e2, expired2 = expiry(clock)
    e2.configure(1000)
    e2.configure(None)
    clock.advance(5000)
    assert expired2 == []
    e3, expired3 = expiry(clock)
    e3.configure(1000)
    e3.stop()  # deleted
    clock.advance(5000)
    assert expired3 == []


@pytest.mark.parametrize("value", [0, -1, True, "1000", 1.5])
def test_a_bad_x_expires_is_refused_at_declare(value):
    with pytest.raises(QueueArgumentError, match="x-expires"):
        QuorumConfig.from_arguments({"x-expires": value})


@pytest.mark.parametrize("step_ms", [120_000, -120_000])
def test_idle_time_is_real_time_whatever_the_wall_clock_does(clock, step_ms):
    # found going through the wall clock's uses for the chaos suite's clock faults
    # (cluster-tests/chaos_nemesis.py): a wall clock stepped back kept the queue that much
    # longer, one stepped forward ended it early when x-expires changed
    e, expired = expiry(clock)
    e.configure(30_000)
    clock.advance(10_000)
    clock.jump(step_ms)
    e.configure(40_000)  # a policy: idle 10 s of 40
    clock.advance(29_999)
    assert expired == []
    clock.advance(1)
    assert len(expired) == 1
