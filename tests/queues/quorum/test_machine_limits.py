"""Unit tests of the quorum queue state machine: TTL, length limits, at-least-once
dead-lettering, purge, the release cursor and determinism."""
from __future__ import annotations

import pytest
from qq_helpers import Q, conservation_holds

from queues.quorum import (
    Confirm,
    DeadLetter,
    DeadLetterSettled,
    Detach,
    Discard,
    Enqueue,
    Modify,
    MsgIn,
    Outcome,
    Purge,
    Purged,
    Return,
    Settle,
    Tick,
    TickClock,
    TickTimeouts,
    checked_out,
    dead_letter_pending,
    new_state,
    next_expiry,
    overview,
    release_cursor,
    restore,
    snapshot_bytes,
    split_msg_id,
)

DLX = {"x-dead-letter-exchange": "dlx"}
ALO = {"x-dead-letter-exchange": "dlx", "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"}


# ---------------------------------------------------------------- TTL


def test_message_ttl_expires_at_the_head_on_tick():
    q = Q({"x-message-ttl": 100})
    ids = q.publish(2)
    assert next_expiry(q.state) == 1100
    q.do(Tick(1099))
    assert overview(q.state)["ready"] == 2
    q.do(Tick(1100))
    assert overview(q.state)["ready"] == 0
    assert q.counters.expired == 2 and q.counters.dropped == 2 and ids


def test_expired_messages_are_dead_lettered_with_reason_expired():
    q = Q({**DLX, "x-message-ttl": 10})
    ids = q.publish(3)
    q.do(Tick(2000))
    assert q.dead() == [DeadLetter(tuple(ids), "expired", False, ())]
    assert q.counters.expired == 3 and q.counters.dead_lettered == 3


def test_per_message_ttl_smaller_wins_and_head_without_ttl_shields():
    q = Q({"x-message-ttl": 500})
    q.publish(1, ttl=100)
    assert q.state.ready[0][2] == 1100
    q.publish(1, ttl=1000)
    assert q.state.ready[1][2] == 1500
    q2 = Q()
    q2.publish(1)  # no TTL at the head
    q2.publish(1, ttl=1)
    q2.do(Tick(5000))
    assert overview(q2.state)["ready"] == 2 and next_expiry(q2.state) is None


def test_expired_messages_are_not_delivered_later():
    q = Q({"x-message-ttl": 100})
    q.attach("c")
    q.publish(1)
    q.now = 2000
    q.publish(1)  # advances the clock; the first one is stale
    q.credit("c", 5)
    assert len(q.delivered("c")) == 1 and q.counters.expired == 1


def test_a_message_expires_at_its_expiry_ms_not_after():
    q = Q({"x-message-ttl": 100})
    q.attach("c")
    q.publish(1)
    q.now = 1100  # exactly the first message's expiry
    q.publish(1)
    q.credit("c", 5)
    assert len(q.delivered("c")) == 1 and q.counters.expired == 1


def test_ttl_zero_reaches_a_waiting_consumer():
    q = Q({"x-message-ttl": 0})
    q.attach("c", credit=1)
    ids = q.publish(2)
    assert q.delivered_ids("c") == ids[:1]
    q.do(Tick(q.now))
    assert q.counters.expired == 1


def test_returned_message_keeps_its_expiry():
    q = Q({"x-message-ttl": 100})
    q.attach("c", credit=1)
    [mid] = q.publish(1)
    q.do(Return("c", (mid,)))
    q.credit("c", 1)
    assert q.delivered_ids("c") == [mid]  # same ms: not expired yet
    q.do(Return("c", (mid,)))
    assert next_expiry(q.state) == 1100
    q.do(Tick(5000))
    assert q.counters.expired == 1


# ---------------------------------------------------------------- length limits


def test_drop_head_max_length_drops_the_oldest():
    q = Q({"x-max-length": 2})
    ids = q.publish(3)
    assert [m[0] for m in q.state.ready] == ids[1:]
    assert q.counters.dropped == 1
    assert q.confirms()[0].correlations == (1, 2, 3)  # drop-head accepts every publish


def test_drop_head_dead_letters_with_reason_maxlen_and_ignores_checked_out():
    q = Q({**DLX, "x-max-length": 1})
    q.attach("c", credit=2)
    q.publish(2)  # both delivered: nothing ready
    assert q.dead() == []
    ids = q.publish(3)
    assert q.dead() == [DeadLetter(tuple(ids[:2]), "maxlen", False, ())]
    assert overview(q.state)["ready"] == 1 and overview(q.state)["checked_out"] == 2


def test_drop_head_max_length_bytes():
    q = Q({"x-max-length-bytes": 25})
    ids = q.publish(3, size=10)
    assert [m[0] for m in q.state.ready] == ids[1:] and q.state.ready_bytes == 20
    q.publish(1, size=100)  # bigger than the limit alone: everything goes
    assert overview(q.state)["ready"] == 0 and q.counters.dropped == 4


def test_drop_head_applies_when_returns_overflow():
    q = Q({"x-max-length": 1})
    q.attach("c", credit=1)
    [a] = q.publish(1)
    [b] = q.publish(1)
    q.credit("c", 0)
    q.do(Return("c", (a,)))  # a goes back in front of b: two ready, limit 1
    assert [m[0] for m in q.state.ready] == [b] and q.counters.dropped == 1


def test_reject_publish_max_length():
    q = Q({"x-max-length": 2, "x-overflow": "reject-publish"})
    q.publish(3)
    assert q.confirms() == [Confirm((1, 2), Outcome.ACCEPTED), Confirm((3,), Outcome.REJECTED)]
    assert q.counters.enqueued == 2 and q.counters.rejected == 1 and q.counters.confirmed == 2
    q.attach("c", credit=1)  # room again
    q.publish(1)
    assert q.confirms() == [Confirm((4,), Outcome.ACCEPTED)]


def test_reject_publish_max_length_bytes_per_message():
    q = Q({"x-max-length-bytes": 30, "x-overflow": "reject-publish"})
    q.do(Enqueue((MsgIn(20, None, "a"), MsgIn(20, None, "b"), MsgIn(10, None, "c"), MsgIn(1, None, None)), 1000))
    assert q.confirms() == [Confirm(("a", "c"), Outcome.ACCEPTED), Confirm(("b",), Outcome.REJECTED)]
    assert q.state.ready_bytes == 30 and q.counters.rejected == 2
    assert [split_msg_id(m[0])[1] for m in q.state.ready] == [0, 2]


def test_reject_publish_dlx_is_refused_by_the_config():
    from queues.quorum import QueueArgumentError

    with pytest.raises(QueueArgumentError):
        new_state({"x-overflow": "reject-publish-dlx"})


# ---------------------------------------------------------------- at-least-once dead lettering


def test_at_least_once_holds_messages_until_settled():
    q = Q(ALO)
    q.attach("c", credit=3)
    ids = q.publish(3)
    q.do(Discard("c", (ids[0],)))
    q.do(Modify("c", (ids[1],), False, True, {"x-opt-r": 1}))
    assert q.dead() == [DeadLetter((ids[1],), "rejected", True, ({"x-opt-r": 1},))]
    ov = overview(q.state)
    assert (ov["dlx_holding"], ov["depth"], q.counters.dead_lettered) == (2, 3, 0)
    assert dead_letter_pending(q.state) == [(ids[0], "rejected"), (ids[1], "rejected")]
    q.do(Settle("c", (ids[2],)))
    assert release_cursor(q.state) == split_msg_id(ids[0])[0]  # dlx holding keeps the log
    q.do(DeadLetterSettled((ids[1], 999)))
    assert q.counters.dead_lettered == 1 and dead_letter_pending(q.state) == [(ids[0], "rejected")]
    q.do(DeadLetterSettled((ids[0], ids[0])))
    assert q.counters.dead_lettered == 2 and overview(q.state)["depth"] == 0
    assert release_cursor(q.state) == q.state.last_index + 1


def test_at_least_once_holding_counts_toward_reject_publish_limits():
    q = Q({**ALO, "x-max-length": 2})
    q.attach("c", credit=2)
    ids = q.publish(2)
    q.do(Discard("c", tuple(ids)))
    q.publish(1)
    assert q.confirms() == [Confirm((3,), Outcome.REJECTED)]
    q.do(DeadLetterSettled(tuple(ids)))
    q.publish(1)
    assert q.confirms()[0].outcome is Outcome.ACCEPTED


def test_at_least_once_expiry_and_delivery_limit_go_to_holding():
    q = Q({**ALO, "x-message-ttl": 10, "x-delivery-limit": 0})
    q.attach("c", credit=1)
    ids = q.publish(2)
    q.do(Modify("c", (ids[0],), True, False, None))
    assert q.dead() == [DeadLetter((ids[0],), "delivery_limit", True, ())]
    q.do(Tick(5000))
    assert q.dead() == [DeadLetter((ids[1],), "expired", True, ())]
    assert dead_letter_pending(q.state) == [(ids[0], "delivery_limit"), (ids[1], "expired")]
    assert q.counters.expired == 1 and q.counters.dead_lettered == 0


def test_at_least_once_falls_back_to_at_most_once_with_drop_head():
    q = Q({"x-dead-letter-exchange": "dlx", "x-dead-letter-strategy": "at-least-once"})
    assert not q.state.config.at_least_once
    q.attach("c", credit=1)
    ids = q.publish(1)
    q.do(Discard("c", tuple(ids)))
    assert q.dead() == [DeadLetter(tuple(ids), "rejected", False, ())]
    assert q.state.dlx == {} and q.counters.dead_lettered == 1


def test_at_least_once_without_dlx_just_drops():
    q = Q({"x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"})
    q.attach("c", credit=1)
    ids = q.publish(1)
    q.do(Discard("c", tuple(ids)))
    assert q.dead() == [] and q.counters.dropped == 1


# ---------------------------------------------------------------- purge, release cursor, overview


def test_purge_drops_ready_only():
    q = Q(ALO)
    q.attach("c", credit=2)
    ids = q.publish(5)
    q.do(Discard("c", (ids[0],)))
    q.do(Return("c", (ids[1],)))  # no credit left: stays ready
    q.credit("c", 1)
    q.do(Purge())
    assert q.fx == [Purged(3)]
    ov = overview(q.state)
    assert (ov["ready"], ov["checked_out"], ov["dlx_holding"]) == (0, 1, 1)
    assert q.counters.purged == 3 and q.counters.dropped == 3
    q.publish(1)
    assert q.delivered() == []


def test_release_cursor_follows_the_oldest_live_message():
    q = Q()
    assert release_cursor(q.state) == 1
    q.attach("c", credit=100)
    a = q.publish(2)
    b = q.publish(2)
    ia, ib = split_msg_id(a[0])[0], split_msg_id(b[0])[0]
    assert release_cursor(q.state) == ia
    q.do(Settle("c", (a[0], b[0])))
    assert release_cursor(q.state) == ia
    q.do(Settle("c", (a[1],)))
    assert release_cursor(q.state) == ib
    q.do(Settle("c", (b[1],)))
    assert release_cursor(q.state) == q.state.last_index + 1
    c = q.publish(1)
    q.do(Return("c", tuple(c)))
    assert release_cursor(q.state) == split_msg_id(c[0])[0]


def test_release_cursor_skips_indexes_emptied_out_of_order():
    q = Q()
    q.attach("c", credit=100)
    ids = [q.publish(1)[0] for _ in range(4)]
    q.do(Settle("c", (ids[2], ids[1])))
    assert release_cursor(q.state) == split_msg_id(ids[0])[0]
    q.do(Settle("c", (ids[0],)))
    assert release_cursor(q.state) == split_msg_id(ids[3])[0]


def test_a_message_stuck_at_the_head_does_not_grow_the_index_list():
    q = Q()
    q.attach("stuck", credit=1)
    [old] = q.publish(1)
    q.attach("c", credit=10**6)
    for _ in range(1000):
        ids = q.publish(3)
        q.do(Settle("c", tuple(ids)))
    assert release_cursor(q.state) == split_msg_id(old)[0]
    assert len(q.state.live) == 1 and q.state.live.slots() < 200
    q.do(Settle("stuck", (old,)))
    assert release_cursor(q.state) == q.state.last_index + 1


def test_overview_and_counters():
    q = Q()
    q.attach("a", credit=1)
    q.publish(3, size=7)
    ov = overview(q.state)
    assert ov["depth"] == 3 and ov["ready"] == 2 and ov["checked_out"] == 1 and ov["consumers"] == 1
    assert ov["ready_bytes"] == 14 and ov["checked_out_bytes"] == 7
    assert set(ov["counters"]) == {"enqueued", "rejected", "confirmed", "delivered", "redelivered", "acknowledged",
                                   "returned", "dead_lettered", "dropped", "expired", "purged"}  # fmt: skip
    assert conservation_holds(q.state)


# ---------------------------------------------------------------- determinism, adapter


def _script(q: Q) -> list:
    effects = []
    q.attach("a", credit=3, priority=1)
    effects += q.fx
    q.attach("b", credit=2)
    ids = q.publish(6, ttl=50)
    effects += q.fx
    q.do(Return("a", (ids[0],)))
    effects += q.fx
    q.do(Modify("b", (ids[3],), True, False, {"k": "v"}))
    effects += q.fx
    q.credit("a", 4, drain=True)
    effects += q.fx
    q.do(Tick(1200))
    effects += q.fx
    q.do(Detach("a"))
    effects += q.fx
    return effects


def test_same_commands_from_equal_states_give_equal_results():
    q1, q2 = Q(DLX), Q(DLX)
    q1.publish(3)
    q2.publish(3)
    q2.state = restore(snapshot_bytes(q2.state))  # equal, not the same objects
    assert q1.state == q2.state and q1.state is not q2.state
    assert _script(q1) == _script(q2)
    assert q1.state == q2.state
    assert snapshot_bytes(q1.state) == snapshot_bytes(q2.state)


def test_state_equality_sees_round_robin_position():
    q1, q2 = Q(), Q()
    for q in (q1, q2):
        q.attach("a", credit=5)
        q.attach("b", credit=5)
    q1.publish(1)
    q2.publish(1)
    assert q1.state == q2.state
    q2.publish(1)
    q2.do(Settle("b", tuple(checked_out(q2.state, "b"))))
    q2.do(Settle("a", tuple(checked_out(q2.state, "a"))))
    q1.do(Settle("a", tuple(checked_out(q1.state, "a"))))
    assert q1.state != q2.state


def _published_by_a_clock_once_ahead(tick) -> tuple[Q, list[int]]:
    """A 60 s TTL queue: the leader ticks at 1000, a node 5 minutes ahead publishes one
    message, one with the true time another (its ids returned), the leader ticks at 3000."""
    q = Q({"x-message-ttl": 60_000})
    q.do(tick(1000, 0))
    q.now = 1000 + 300_000
    q.publish(1)
    q.now = 2000
    ids = q.publish(1)
    q.do(tick(3000, 0))
    return q, ids


def test_a_clock_once_ahead_does_not_expire_later_messages_early():
    # Found going through the wall clock's uses for the chaos suite's clock faults: a node
    # whose clock ran 5 minutes ahead published (its batches carry its now_ms), then its
    # clock was stepped back, or a node with the true time publishes; a message with a 60 s
    # TTL published at the true time must live 60 s, as with RabbitMQ (whose machine judges
    # expiry by the leader's time of the command being applied). Once a TickClock was
    # applied (feature flag quorum_tick_clock), only the leader's ticks set the clock.
    q, ids = _published_by_a_clock_once_ahead(TickClock)
    q.attach("c", credit=2)
    assert ids[0] in q.delivered_ids("c") and q.state.clock == 3000
    q.do(TickClock(63_000, 0))  # and time still runs out for what waits
    later = q.publish(1)
    q.do(TickClock(123_001, 0))
    q.attach("d", credit=5)
    assert later[0] not in q.delivered_ids("d") and q.state.counters.expired == 1


def test_before_the_tick_clock_the_clock_stays_the_largest_time_any_command_carried():
    # what members without the flag compute, so a mixed-version group agrees
    q, ids = _published_by_a_clock_once_ahead(TickTimeouts)
    q.attach("c", credit=5)
    assert ids[0] not in q.delivered_ids("c") and q.state.clock == 301_000
