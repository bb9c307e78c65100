"""Unit tests of the quorum queue state machine, one feature at a time."""

from __future__ import annotations

import pytest
from qq_helpers import Q

from queues.quorum import (
    Attach,
    Confirm,
    Credit,
    CreditReply,
    DeadLetter,
    Detach,
    Discard,
    DownConsumersOnNode,
    Enqueue,
    Modify,
    MsgIn,
    Outcome,
    Return,
    Settle,
    apply,
    checked_out,
    consumer_link,
    msg_id,
    new_state,
    overview,
    release_cursor,
    split_msg_id,
)
from queues.quorum.state import DEFAULT_DELIVERY_LIMIT

DLX = {"x-dead-letter-exchange": "dlx"}
ALO = {"x-dead-letter-exchange": "dlx", "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"}


# ---------------------------------------------------------------- enqueue and confirms


def test_enqueue_confirms_accepted_correlations_in_order():
    q = Q()
    q.do(Enqueue((MsgIn(5, None, "a"), MsgIn(6, None, None), MsgIn(7, None, ("b", 2))), 1000))
    assert q.confirms() == [Confirm(("a", ("b", 2)), Outcome.ACCEPTED)]
    ov = overview(q.state)
    assert (ov["depth"], ov["ready"], ov["ready_bytes"]) == (3, 3, 18)
    assert q.counters.enqueued == 3 and q.counters.confirmed == 2


def test_plain_tuples_are_accepted_as_messages():
    q = Q()
    q.do(Enqueue(((5, None, "a"), (6, 100, "b")), 1000))
    assert q.confirms()[0].correlations == ("a", "b")
    assert q.state.ready[1][2] == 1100


def test_message_ids_are_raft_index_and_position():
    q = Q()
    ids = q.publish(3)
    index = q.state.last_index
    assert [split_msg_id(i) for i in ids] == [(index, 0), (index, 1), (index, 2)]
    assert [m[0] for m in q.state.ready] == ids
    assert msg_id(7, 3) > msg_id(6, 999)


def test_raft_index_must_increase_and_unknown_commands_are_refused():
    st = new_state()
    st, _ = apply(Enqueue((MsgIn(1),), 0), st, 10)
    with pytest.raises(ValueError):
        apply(Enqueue((MsgIn(1),), 0), st, 10)
    with pytest.raises(TypeError):
        apply(object(), st, 11)
    assert st.last_index == 10


def test_empty_enqueue_is_harmless():
    q = Q()
    assert q.do(Enqueue((), 1000)) == []
    assert overview(q.state)["depth"] == 0


# ---------------------------------------------------------------- delivery and credit


def test_no_credit_no_delivery_then_fifo_up_to_credit():
    q = Q()
    q.attach("c")
    ids = q.publish(5)
    assert q.delivered() == []
    q.credit("c", 3)
    assert q.delivered_ids("c") == ids[:3]
    assert all(d.first_acquirer and d.delivery_count == 0 for d in q.delivered())
    assert consumer_link(q.state, "c") == (3, 0)
    assert checked_out(q.state, "c") == ids[:3]
    q.credit("c", 10)
    assert q.delivered_ids("c") == ids[3:]
    assert consumer_link(q.state, "c") == (5, 8)
    more = q.publish(2)
    assert q.delivered_ids("c") == more
    assert q.counters.delivered == 7


def test_one_deliver_effect_per_consumer_after_the_confirm():
    q = Q()
    q.attach("a", credit=10)
    q.attach("b", credit=10)
    q.publish(4)
    kinds = [type(e).__name__ for e in q.fx]
    assert kinds == ["Confirm", "Deliver", "Deliver"]
    assert q.delivered_to() == [("a", q.delivered_ids("a")[0]), ("a", q.delivered_ids("a")[1]),
                                ("b", q.delivered_ids("b")[0]), ("b", q.delivered_ids("b")[1])]  # fmt: skip


def test_round_robin_among_equal_priority():
    q = Q()
    for cid in "abc":
        q.attach(cid, credit=10)
    ids = q.publish(7)
    assert q.delivered_ids("a") == [ids[0], ids[3], ids[6]]
    assert q.delivered_ids("b") == [ids[1], ids[4]]
    assert q.delivered_ids("c") == [ids[2], ids[5]]
    ids = q.publish(2)  # the rotation carries over to the next command
    assert q.delivered_ids("b") == [ids[0]] and q.delivered_ids("c") == [ids[1]]


def test_highest_priority_first_then_lower_when_its_credit_runs_out():
    q = Q()
    q.attach("low", credit=10, priority=0)
    q.attach("high", credit=2, priority=5)
    q.attach("mid", credit=1, priority=3)
    ids = q.publish(5)
    assert q.delivered_ids("high") == ids[:2]
    assert q.delivered_ids("mid") == ids[2:3]
    assert q.delivered_ids("low") == ids[3:]
    q.credit("high", 1)
    ids = q.publish(1)
    assert q.delivered_ids("high") == ids


def test_credit_reply_on_echo_with_available():
    q = Q()
    q.attach("c")
    q.publish(3)
    q.credit("c", 1, echo=True)
    assert q.fx[-1] == CreditReply("c", 1, 0, 2, False)
    assert [type(e).__name__ for e in q.fx] == ["Deliver", "CreditReply"]
    q.credit("c", 5)  # no echo: no reply
    assert q.effects(CreditReply) == []


def test_drain_with_messages_delivers_then_spends_the_rest():
    q = Q()
    q.attach("c")
    ids = q.publish(2)
    q.credit("c", 5, drain=True)
    assert q.delivered_ids("c") == ids
    assert q.fx[-1] == CreditReply("c", 5, 0, 0, True)
    assert consumer_link(q.state, "c") == (5, 0)
    q.publish(1)  # credit is gone
    assert q.delivered() == []


def test_drain_on_an_empty_queue_advances_delivery_count():
    q = Q()
    q.attach("c", delivery_count=4294967290)
    q.credit("c", 10, drain=True)
    assert q.fx == [CreditReply("c", (4294967290 + 10) & 0xFFFFFFFF, 0, 0, True)]


def test_credit_counts_transfers_the_receiver_has_not_seen():
    # [2.6.7] receiver's delivery-count lags by 3: its grant of 5 leaves 2.
    q = Q()
    q.attach("c", credit=3)
    q.publish(3)
    q.credit("c", 5, dc=0, echo=True)
    assert q.fx[-1] == CreditReply("c", 3, 2, 0, False)
    q.credit("c", 2, dc=0)  # lag 3 > 2: no credit at all
    assert consumer_link(q.state, "c") == (3, 0)
    q.do(Credit("c", None, 4, False, False))  # delivery-count unknown: taken as ours
    assert consumer_link(q.state, "c") == (3, 4)


def test_credit_zero_stops_deliveries():
    q = Q()
    q.attach("c", credit=5)
    q.credit("c", 0)
    q.publish(1)
    assert q.delivered() == []


def test_credit_for_unknown_consumer_is_ignored():
    q = Q()
    assert q.do(Credit("ghost", 0, 5, True, True)) == []


def test_presettled_consumer_acknowledges_on_delivery():
    q = Q()
    q.attach("c", credit=10, settled=True)
    q.publish(3)
    assert len(q.delivered("c")) == 3
    assert q.state.checked_count == 0 and q.counters.acknowledged == 3
    assert release_cursor(q.state) == q.state.last_index + 1


# ---------------------------------------------------------------- settlements


def test_settle_removes_and_ignores_unknown_or_foreign_ids():
    q = Q()
    q.attach("a", credit=1)
    q.attach("b", credit=1)
    ids = q.publish(2)
    q.do(Settle("a", (ids[1], ids[0], 12345)))  # ids[1] is b's
    assert q.counters.acknowledged == 1
    assert checked_out(q.state, "b") == [ids[1]]
    q.do(Settle("a", (ids[0],)))  # twice
    q.do(Settle("nobody", (ids[1],)))
    assert q.counters.acknowledged == 1


def test_return_requeues_at_the_front_in_id_order_without_counting_a_failure():
    q = Q()
    q.attach("c", credit=3)
    ids = q.publish(5)
    q.do(Return("c", (ids[2], ids[0])))
    assert q.delivered() == []
    assert sorted(m[0] for m in q.state.returned) == [ids[0], ids[2]]
    q.credit("c", 4)
    got = q.delivered("c")
    assert [d.msg_id for d in got] == [ids[0], ids[2], ids[3], ids[4]]
    assert [d.first_acquirer for d in got] == [False, False, True, True]
    assert [d.redelivered for d in got] == [True, True, False, False]
    assert all(d.delivery_count == 0 for d in got)
    assert q.counters.returned == 2 and q.counters.redelivered == 2


def test_discard_drops_without_dlx_and_dead_letters_with_it():
    q = Q()
    q.attach("c", credit=1)
    ids = q.publish(1)
    q.do(Discard("c", tuple(ids)))
    assert q.dead() == [] and q.counters.dropped == 1 and q.counters.dead_lettered == 0

    q = Q(DLX)
    q.attach("c", credit=1)
    ids = q.publish(1)
    q.do(Discard("c", tuple(ids)))
    assert q.dead() == [DeadLetter(tuple(ids), "rejected", False, ())]
    assert q.counters.dead_lettered == 1 and overview(q.state)["depth"] == 0


def test_modify_counts_failures_merges_annotations_and_dead_letters_undeliverable():
    q = Q(DLX)
    q.attach("c", credit=1)
    [mid] = q.publish(1)
    q.do(Modify("c", (mid,), True, False, {"x-opt-a": 1}))
    q.credit("c", 1)
    [d] = q.delivered("c")
    assert (d.delivery_count, d.first_acquirer, d.annotations) == (1, False, {"x-opt-a": 1})
    q.do(Modify("c", (mid,), False, False, {"x-opt-b": "y"}))  # not failed: count unchanged
    q.credit("c", 1)
    [d] = q.delivered("c")
    assert (d.delivery_count, d.annotations) == (1, {"x-opt-a": 1, "x-opt-b": "y"})
    q.do(Modify("c", (mid,), False, True, None))
    assert q.dead() == [DeadLetter((mid,), "rejected", False, ({"x-opt-a": 1, "x-opt-b": "y"},))]
    assert overview(q.state)["depth"] == 0


def test_default_delivery_limit_is_20_then_dropped_without_dlx():
    assert DEFAULT_DELIVERY_LIMIT == 20
    q = Q()
    q.attach("c", credit=1)
    [mid] = q.publish(1)
    for n in range(20):
        q.do(Modify("c", (mid,), True, False, None))
        assert q.counters.dropped == 0, n
        q.credit("c", 1)
        assert q.delivered("c")[0].delivery_count == n + 1
    q.do(Modify("c", (mid,), True, False, None))  # the 21st failure exceeds the limit
    assert q.counters.dropped == 1 and q.dead() == []
    assert overview(q.state)["depth"] == 0


def test_delivery_limit_dead_letters_with_dlx():
    q = Q({**DLX, "x-delivery-limit": 1})
    q.attach("c", credit=1)
    [mid] = q.publish(1)
    q.do(Modify("c", (mid,), True, False, None))
    q.credit("c", 1)
    assert q.delivered_ids("c") == [mid]
    q.do(Modify("c", (mid,), True, False, None))
    assert q.dead() == [DeadLetter((mid,), "delivery_limit", False, ())]
    assert q.counters.dead_lettered == 1


def test_delivery_limit_zero_and_unlimited():
    q = Q({"x-delivery-limit": 0})
    q.attach("c", credit=1)
    [mid] = q.publish(1)
    q.do(Modify("c", (mid,), True, False, None))
    assert q.counters.dropped == 1

    q = Q({"x-delivery-limit": -1})
    q.attach("c", credit=1)
    [mid] = q.publish(1)
    for _ in range(100):
        q.do(Modify("c", (mid,), True, False, None))
        q.credit("c", 1)
    assert q.delivered("c")[0].delivery_count == 100 and q.counters.dropped == 0


def test_returns_never_reach_the_delivery_limit():
    q = Q({"x-delivery-limit": 0})
    q.attach("c", credit=1)
    [mid] = q.publish(1)
    for _ in range(5):
        q.do(Return("c", (mid,)))
        q.credit("c", 1)
        assert q.delivered_ids("c") == [mid]
    assert q.counters.dropped == 0


# ---------------------------------------------------------------- detach, down, SAC


def test_detach_returns_unsettled_marked_redelivered_not_failed():
    q = Q()
    q.attach("a", credit=2)
    ids = q.publish(2)
    q.do(Modify("a", (ids[1],), True, False, None))  # one failure before
    q.attach("b")
    q.credit("a", 1)  # ids[1] back to a
    q.do(Detach("a"))
    assert q.delivered() == []
    assert overview(q.state)["ready"] == 2 and q.counters.returned == 3
    q.credit("b", 5)
    got = q.delivered("b")
    assert [d.msg_id for d in got] == ids
    assert [d.first_acquirer for d in got] == [False, False]
    assert [d.delivery_count for d in got] == [0, 1]
    q.do(Detach("a"))  # unknown now: no-op
    assert q.fx == []


def test_detach_hands_returned_messages_to_the_others_at_once():
    q = Q()
    q.attach("a", credit=1)
    q.attach("b", credit=0)
    ids = q.publish(1)
    q.credit("b", 1)
    q.do(Detach("a"))
    assert q.delivered_ids("b") == ids


def test_down_consumers_on_node():
    q = Q()
    q.attach("a", credit=1, node="n1")
    q.attach("b", credit=1, node="n2")
    q.attach("c", credit=0, node="n1")
    ids = q.publish(2)
    q.do(DownConsumersOnNode("n1"))
    assert set(q.state.consumers) == {"b"}
    assert overview(q.state)["ready"] == 1 and q.counters.returned == 1
    q.do(DownConsumersOnNode("n3"))
    assert q.fx == [] and ids


def test_single_active_consumer_only_the_first_receives_then_hands_over():
    q = Q({"x-single-active-consumer": True})
    q.attach("a", credit=2)
    q.attach("b", credit=5)
    q.attach("c", credit=5)
    assert overview(q.state)["active_consumer"] == "a"
    ids = q.publish(4)
    assert q.delivered_ids("a") == ids[:2] and q.delivered_ids("b") == []
    q.do(Detach("a"))
    assert overview(q.state)["active_consumer"] == "b"
    got = q.delivered("b")
    assert [d.msg_id for d in got] == ids  # a's two come back first, redelivered
    assert [d.first_acquirer for d in got] == [False, False, True, True]
    q.credit("c", 5, drain=True)  # a waiting consumer drains at once
    assert q.fx == [CreditReply("c", 5, 0, 0, True)]


def test_single_active_consumer_next_is_highest_priority_then_attach_order():
    q = Q({"x-single-active-consumer": True})
    q.attach("a")
    q.attach("b", priority=1)
    q.attach("c", priority=2)
    q.attach("d", priority=2)
    q.do(Detach("a"))
    assert q.state.sac_active == "c"
    q.do(Detach("c"))
    assert q.state.sac_active == "d"
    q.do(Detach("b"))
    q.do(Detach("d"))
    assert q.state.sac_active is None
    q.attach("e")
    assert q.state.sac_active == "e"


def test_duplicate_attach_changes_nothing():
    q = Q()
    q.attach("a", credit=3, priority=1)
    q.do(Attach("a", 9, 0))
    assert q.state.consumers["a"].priority == 1 and consumer_link(q.state, "a") == (0, 3)
