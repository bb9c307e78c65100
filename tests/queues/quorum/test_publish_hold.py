"""Publisher flow of a quorum queue, its pure parts: the leader's view of the
replicas with consumers (ConsumerLag), the hold every replica keeps
(PublishHold) and the node-to-node records that carry both."""

from __future__ import annotations

import pytest

from queues.quorum import flow_records
from queues.quorum.publish_hold import ConsumerLag, PublishHold


def test_a_replica_with_consumers_over_the_bound_holds_until_under_half_of_it():
    lag = ConsumerLag(bound=100, silent_after=4.0)
    assert not lag.holds(1_000, 0.0, held=False)  # nobody reported: nothing to wait for
    lag.report("n2", 950, consumers=True, now=0.0)
    assert not lag.holds(1_050, 0.1, held=False)  # 100 behind: at the bound, not over it
    assert lag.holds(1_051, 0.1, held=False)
    lag.report("n2", 1_000, consumers=True, now=0.2)
    assert lag.holds(1_051, 0.2, held=True)  # 51 behind: not under half yet
    lag.report("n2", 1_002, consumers=True, now=0.3)
    assert not lag.holds(1_051, 0.3, held=True)  # 49: released
    assert lag.lag(1_051, 0.3) == 49


def test_the_furthest_replica_counts_and_one_without_consumers_does_not():
    lag = ConsumerLag(bound=10, silent_after=4.0)
    lag.report("n2", 100, consumers=True, now=0.0)
    lag.report("n3", 80, consumers=True, now=0.0)
    assert lag.lag(100, 0.0) == 20 and lag.holds(100, 0.0, held=False)
    assert lag.nodes == ("n2", "n3")
    lag.report("n3", 80, consumers=False, now=0.1)  # its last consumer left
    assert lag.lag(100, 0.1) == 0 and not lag.holds(100, 0.1, held=True)
    lag.forget("n2")  # its stream ended
    assert not lag


def test_a_silent_replica_is_left_out():
    lag = ConsumerLag(bound=10, silent_after=4.0)
    lag.report("n2", 0, consumers=True, now=0.0)
    assert lag.holds(1_000, 3.9, held=False)
    assert not lag.holds(1_000, 4.1, held=True)  # not heard for longer than silent_after
    assert not lag  # and forgotten until it reports again


def test_bound_zero_never_holds():
    lag = ConsumerLag(bound=0, silent_after=4.0)
    lag.report("n2", 0, consumers=True, now=0.0)
    assert not lag.holds(10**9, 0.0, held=False)


def test_a_release_runs_each_waiter_once_and_held_confirms_wait_for_it():
    hold = PublishHold()
    calls: list = []

    def top_up() -> None:
        calls.append("top_up")

    confirm = hold.deferring(lambda outcome: calls.append(outcome))
    confirm("early")  # not held: at once
    assert hold.set(True) and not hold.set(True)
    hold.wait(top_up)
    hold.wait(top_up)  # the same link asking again waits once
    confirm("late")
    assert calls == ["early"]
    assert hold.set(False)
    assert calls == ["early", "top_up", "late"]
    hold.set(True)
    hold.set(False)
    assert calls == ["early", "top_up", "late"]  # waiters ran once


def test_flow_records_round_trip_and_refuse_what_they_do_not_know():
    applied = [("qq.abc", 7, 1234, True), ("qq.def", 2**40, 0, False)]
    assert flow_records.decode(flow_records.encode_applied(applied)) == (flow_records.APPLIED, applied)
    holds = [("qq.abc", True), ("qq.def", False)]
    assert flow_records.decode(flow_records.encode_hold(holds)) == (flow_records.HOLD, holds)
    data = flow_records.encode_hold(holds)
    with pytest.raises(ValueError, match="version 2"):
        flow_records.decode(b"\x02" + data[1:])
    with pytest.raises(ValueError, match="kind 9"):
        flow_records.decode(data[:1] + b"\x09" + data[2:])
    with pytest.raises(ValueError, match="malformed"):
        flow_records.decode(data[:-1])
    with pytest.raises(ValueError, match="trailing"):
        flow_records.decode(data + b"\x00")
