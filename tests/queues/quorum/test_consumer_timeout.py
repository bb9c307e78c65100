"""The consumer timeout in the quorum machine (timeouts.py): Ticks stamp the
checked-out messages; a TickTimeouts returns those held past the timeout and
the consumer gets nothing more until it detaches."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from qq_helpers import Q

from queues.quorum import (
    ConsumerTimedOut,
    Deliver,
    Detach,
    Modify,
    Return,
    Settle,
    Tick,
    TickTimeouts,
    checked_out,
    next_timeout,
    overview,
    restore,
    snapshot_bytes,
)


def held(q: Q, cid: str = "a") -> list[int]:
    return checked_out(q.state, cid)


def test_a_message_held_past_the_timeout_goes_back_on_the_next_tick():
    q = Q()
    ids = q.publish(2)
    q.attach("a", credit=2)
    assert held(q) == ids
    q.do(TickTimeouts(1000, 5000))  # stamps: held from 1000
    assert q.effects(ConsumerTimedOut) == [] and next_timeout(q.state, 5000) == 6000
    q.do(Settle("a", (ids[1],)))
    q.do(TickTimeouts(5999, 5000))
    assert held(q) == [ids[0]]
    q.do(TickTimeouts(6000, 5000))
    assert q.effects(ConsumerTimedOut) == [ConsumerTimedOut("a", 5000, 1)]
    assert held(q) == [] and overview(q.state)["ready"] == 1
    assert overview(q.state)["counters"]["returned"] == 1


def test_the_timed_out_consumer_gets_nothing_more_and_another_consumer_gets_the_message():
    q = Q()
    [mid] = q.publish(1)
    q.attach("a", credit=5)
    q.do(TickTimeouts(1000, 100))
    q.attach("b")
    q.do(TickTimeouts(1100, 100))
    q.credit("a", 5)  # a fresh grant does not bring it back
    assert q.delivered("a") == []
    q.publish(1)
    assert q.delivered("a") == []
    q.credit("b", 1)
    [again] = q.delivered("b")
    assert again.msg_id == mid and again.redelivered and again.delivery_count == 0  # a return, not a failure
    q.do(Detach("a"))  # its Detach returns nothing twice
    assert overview(q.state)["ready"] == 1 and overview(q.state)["checked_out"] == 1


def test_the_timeout_measures_from_the_first_tick_that_saw_the_message_held():
    # the Credit that delivered carries no time: the machine's clock may be old
    q = Q(now=1000)
    q.publish(1)
    q.attach("a")
    q.credit("a", 1)  # delivered much later than 1000, in fact
    q.do(Tick(20_000))  # a version 1 tick stamps nothing: its state stays what 0.2's would be
    assert q.state.consumers["a"].since == {}
    q.do(TickTimeouts(50_000, 5000))  # the first to see it held
    q.do(TickTimeouts(54_999, 5000))
    assert q.effects(ConsumerTimedOut) == []
    q.do(TickTimeouts(55_000, 5000))
    assert q.effects(ConsumerTimedOut) == [ConsumerTimedOut("a", 5000, 1)]


def test_only_the_messages_past_the_timeout_go_back():
    q = Q()
    first = q.publish(1)
    q.attach("a", credit=5)
    q.do(TickTimeouts(1000, 500))
    second = q.publish(1)
    q.do(TickTimeouts(1400, 500))
    q.do(TickTimeouts(1500, 500))
    assert q.effects(ConsumerTimedOut) == [ConsumerTimedOut("a", 500, 1)]
    assert held(q) == second and first != second


def test_version_1_ticks_and_a_zero_timeout_never_time_out():
    q = Q()
    q.publish(1)
    q.attach("a", credit=1)
    for cmd in (Tick(1000), Tick(10**9), TickTimeouts(10**10, 0), TickTimeouts(10**11, 0)):
        q.do(cmd)
        assert q.effects(ConsumerTimedOut) == [] and len(held(q)) == 1


def test_until_a_consumer_is_stamped_snapshots_keep_the_layout_earlier_versions_read():
    # with the feature flag off only version 1 ticks are proposed: a member of an older
    # version must still be able to install the leader's snapshot
    q = Q()
    q.publish(2)
    q.attach("a", credit=1)
    q.do(Tick(5000))
    data = snapshot_bytes(q.state)
    assert data[4:6] == (4).to_bytes(2, "little") and restore(data) == q.state
    q.do(TickTimeouts(6000, 0))
    data = snapshot_bytes(q.state)
    assert data[4:6] == (5).to_bytes(2, "little") and restore(data) == q.state


def test_pre_settled_consumers_hold_nothing_to_time_out():
    q = Q()
    q.publish(1)
    q.attach("a", credit=1, settled=True)
    q.do(TickTimeouts(1000, 1))
    q.do(TickTimeouts(5000, 1))
    assert q.effects(ConsumerTimedOut) == [] and overview(q.state)["depth"] == 0


def test_stamps_and_the_timed_out_mark_survive_a_snapshot():
    q = Q()
    q.publish(3)
    q.attach("a", credit=1)
    q.attach("b", credit=1)
    q.do(TickTimeouts(1000, 100))
    q.attach("c", credit=1)  # unstamped yet
    q.do(TickTimeouts(1100, 100))  # a and b time out, c is stamped 1100
    restored = restore(snapshot_bytes(q.state))
    assert restored == q.state
    assert restored.consumers["a"].timed_out and restored.consumers["c"].since == q.state.consumers["c"].since
    q.state = restored
    q.do(TickTimeouts(1200, 100))
    assert q.effects(ConsumerTimedOut) == [ConsumerTimedOut("c", 100, 1)]


# ---------------------------------------------------------------- random runs

CIDS = ("a", "b", "c")
STEPS = st.lists(st.one_of(
    st.tuples(st.just("publish"), st.integers(1, 4)),
    st.tuples(st.just("credit"), st.sampled_from(CIDS), st.integers(0, 4)),
    st.tuples(st.just("settle"), st.sampled_from(CIDS), st.sampled_from(["accept", "release", "modify"])),
    st.tuples(st.just("attach"), st.sampled_from(CIDS)),
    st.tuples(st.just("detach"), st.sampled_from(CIDS)),
    st.tuples(st.just("tick"), st.integers(0, 400), st.sampled_from([0, 100, 250])),
), max_size=40)  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(STEPS)
def test_random_runs_time_out_only_late_messages_and_never_feed_a_timed_out_consumer(steps):
    q = Q({"x-single-active-consumer": False})
    now = 1000
    timed_out: set[str] = set()
    for step in steps:
        kind = step[0]
        if kind == "publish":
            q.publish(step[1])
        elif kind == "attach":
            q.attach(step[1])  # an id already attached changes nothing
        elif kind == "detach":
            q.do(Detach(step[1]))
            timed_out.discard(step[1])
        elif kind == "credit" and step[1] in q.state.consumers:
            q.credit(step[1], step[2])
        elif kind == "settle" and held(q, step[1]):
            cid, mid = step[1], held(q, step[1])[0]
            cmd = {"accept": Settle, "release": Return}.get(step[2])
            q.do(cmd(cid, (mid,)) if cmd else Modify(cid, (mid,), True))
        elif kind == "tick":
            now += step[1]
            q.do(TickTimeouts(now, step[2]))
            for e in q.effects(ConsumerTimedOut):
                timed_out.add(e.consumer_id)
            if step[2]:  # nothing stamped at least the timeout ago is still held
                for cs in q.state.consumers.values():
                    assert all(since > now - step[2] for since in cs.since.values())
        for e in q.effects(Deliver):
            assert e.consumer_id not in timed_out
        for cs in q.state.consumers.values():
            assert list(cs.since) == list(cs.checked)[: len(cs.since)]  # the stamped ones: the oldest held
        assert restore(snapshot_bytes(q.state)) == q.state
