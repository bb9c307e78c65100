"""Link endpoints [2.6], [2.7] driven in memory: attach and detach, credit,
drain and echo, serial arithmetic, transfers, dispositions."""

from __future__ import annotations

import pytest
from engine_helpers import (
    ScriptedPeer,
    frame,
    message,
    of,
    only,
    performatives,
)
from hypothesis import given
from hypothesis import strategies as st

from amqp import definitions as d
from amqp import events as ev
from amqp import serial
from amqp.errors import Condition, LocalProtocolError

# ================================================================== links


def test_attach_carries_termini_settle_modes_and_properties(pair):
    cs, ss = pair.begin()
    cl = cs.create_link("l", d.SENDER)
    cl.attach(source=d.Source(address="src"), target=d.Target(address="dst", durable=1),
              snd_settle_mode=d.SND_SETTLED, rcv_settle_mode=d.RCV_SECOND, initial_delivery_count=5,
              max_message_size=1 << 20, properties={"p": 1}, desired_capabilities=["cap"])  # fmt: skip
    s, _ = pair.pump()
    a = s[0].attach
    sl = s[0].link
    assert a.target == d.Target(address="dst", durable=1) and a.source == d.Source(address="src")
    assert (sl.snd_settle_mode, sl.rcv_settle_mode) == (d.SND_SETTLED, d.RCV_SECOND)
    assert sl.remote_max_message_size == 1 << 20 and sl.remote_properties == {"p": 1}
    assert sl.delivery_count == 5 and a.desired_capabilities == ["cap"]
    assert sl.role == d.RECEIVER and not sl.active
    sl.attach(source=a.source, target=a.target)
    _, c = pair.pump()
    assert c[0].link is cl and cl.active and sl.active
    assert cl.remote_target == d.Target(address="dst", durable=1)


def test_initial_delivery_count_and_credit(pair):
    cs, ss = pair.begin()
    cl, sl = pair.attach(cs, ss, "l", d.SENDER, credit=3, client_kw=dict(initial_delivery_count=1000))
    assert cl.link_credit == 3 and sl.delivery_count == 1000
    for i in range(3):
        cl.send(b"%d" % i, message())
    assert cl.link_credit == 0 and cl.delivery_count == 1003
    with pytest.raises(LocalProtocolError):
        cl.send(b"x", message())
    s, _ = pair.pump()
    assert len(of(s, ev.MessageReceived)) == 3 and sl.delivery_count == 1003 and sl.link_credit == 0
    sl.flow(link_credit=2)
    pair.pump()
    assert cl.link_credit == 2


def test_credit_replaced_not_added(pair):
    cs, ss = pair.begin()
    cl, sl = pair.attach(cs, ss, "l", d.SENDER, credit=10)
    sl.flow(link_credit=4)
    pair.pump()
    assert cl.link_credit == 4


def test_transfer_without_credit_is_transfer_limit_exceeded():
    p = ScriptedPeer()
    p.open()
    p.begin()
    p.attach(credit=1)
    p.transfer(delivery_id=0)
    p.transfer(delivery_id=1, tag=b"u")
    detach = only(performatives(p.out()), d.Detach)
    assert detach.closed and detach.handle == 0
    assert detach.error.condition == Condition.TRANSFER_LIMIT_EXCEEDED
    detached = of(p.events, ev.LinkDetached)[0]
    assert not detached.remote and detached.error.condition == Condition.TRANSFER_LIMIT_EXCEEDED
    assert not p.server.closed and p.server.sessions


def test_transfers_under_a_grant_taken_back_are_taken_and_each_sets_the_senders_credit_again():
    """The receiver takes its credit back (a resource alarm) while two transfers are in flight:
    [2.6.7] has it take them, and its FLOW counted neither, so the sender computed its credit
    below zero (Qpid Proton then sends on). A FLOW after each counts it: credit 0 again."""
    p = ScriptedPeer()
    p.open()
    p.begin()
    link = p.attach(credit=5)
    link.flow(link_credit=0)
    assert only(performatives(p.out()), d.Flow).delivery_count == 0  # crosses the two below
    p.transfer(delivery_id=0, tag=b"a")
    p.transfer(delivery_id=1, tag=b"b")
    flows = performatives(p.out(), d.Flow)
    assert [(f.delivery_count, f.link_credit) for f in flows] == [(1, 0), (2, 0)]
    assert len(of(p.events, ev.MessageReceived)) == 2
    for i, tag in enumerate((b"c", b"d", b"e"), 2):  # the rest of the old grant: taken
        p.transfer(delivery_id=i, tag=tag)
    p.transfer(delivery_id=5, tag=b"f")  # past everything ever granted: refused
    detach = only(performatives(p.out()), d.Detach)
    assert detach.error.condition == Condition.TRANSFER_LIMIT_EXCEEDED


def test_transfer_before_we_answered_attach_gets_attach_then_detach():
    p = ScriptedPeer()
    p.open()
    p.begin()
    p.attach(answer=False)
    p.transfer()
    out = performatives(p.out())
    assert [type(x) for x in out] == [d.Attach, d.Detach]
    assert out[0].source is None and out[0].target is None and out[0].role == d.RECEIVER
    assert out[1].error.condition == Condition.TRANSFER_LIMIT_EXCEEDED


def test_drain(pair):
    cs, ss = pair.begin()
    rcv = cs.create_link("r", d.RECEIVER)
    rcv.attach(source=d.Source(address="q"), target=d.Target())
    s, _ = pair.pump()
    snd = s[0].link
    snd.attach(source=s[0].attach.source, target=s[0].attach.target)
    pair.pump()
    rcv.flow(link_credit=5, drain=True)
    s, _ = pair.pump()
    assert s == [ev.LinkFlow(snd, True, False)] and snd.link_credit == 5 and snd.drain
    snd.send(b"a", message())
    snd.send(b"b", message())
    snd.drained()
    assert snd.link_credit == 0 and snd.delivery_count == 5
    _, c = pair.pump()
    assert [type(e) for e in c] == [ev.MessageReceived, ev.MessageReceived, ev.LinkFlow]
    assert rcv.link_credit == 0 and rcv.delivery_count == 5
    flow = performatives(pair.s2c[-1], d.Flow)[-1]
    assert (flow.delivery_count, flow.link_credit, flow.drain) == (5, 0, True)


def test_echo_from_sender_is_answered_by_receiver(pair):
    cs, ss = pair.begin()
    cl, sl = pair.attach(cs, ss, "l", d.SENDER, credit=7)
    cl.flow(echo=True)
    s, c = pair.pump()
    assert s == [ev.LinkFlow(sl, False, True)]
    assert c == [ev.LinkFlow(cl, False, False)] and cl.link_credit == 7


def test_echo_to_sender_is_left_to_the_application(pair):
    cs, ss = pair.begin()
    rcv = cs.create_link("r", d.RECEIVER)
    rcv.attach(source=d.Source(address="q"), target=d.Target())
    s, _ = pair.pump()
    snd = s[0].link
    snd.attach(source=s[0].attach.source, target=s[0].attach.target)
    pair.pump()
    snd.available = 3
    rcv.flow(link_credit=2, echo=True)
    s, c = pair.pump()
    assert s == [ev.LinkFlow(snd, False, True)] and c == []
    snd.flow()
    _, c = pair.pump()
    assert c == [ev.LinkFlow(rcv, False, False)] and rcv.available == 3


def test_stale_sender_flow_does_not_undo_a_newer_grant():
    """The receiver grants 10, then 20; a FLOW the sender wrote before it saw
    the second grant must not shrink our credit back to 10."""
    p = ScriptedPeer()
    p.open()
    p.begin()
    link = p.attach(credit=10)
    link.flow(link_credit=20)
    p.out()
    p.send(d.Flow(next_incoming_id=0, incoming_window=100, next_outgoing_id=0, outgoing_window=100, handle=0,
                  delivery_count=0, link_credit=10))  # fmt: skip
    for i in range(20):
        p.transfer(delivery_id=i, tag=b"%d" % i)
    assert len(of(p.events, ev.MessageReceived)) == 20 and not performatives(p.out(), d.Detach)


def test_sender_drain_reply_consumes_receiver_credit():
    p = ScriptedPeer()
    p.open()
    p.begin()
    link = p.attach(credit=10)
    p.transfer(delivery_id=0)
    # the sender had nothing more: it advanced delivery-count to use up the credit
    p.send(d.Flow(next_incoming_id=0, incoming_window=100, next_outgoing_id=1, outgoing_window=100, handle=0,
                  delivery_count=10, link_credit=0, drain=True))  # fmt: skip
    assert link.link_credit == 0 and link.delivery_count == 10


def test_grant_above_two_to_the_31_is_not_read_as_negative():
    p = ScriptedPeer()
    p.open()
    p.begin()
    link = p.attach(role=d.RECEIVER, source=d.Source(address="q"))
    p.send(d.Flow(next_incoming_id=0, incoming_window=100, next_outgoing_id=0, outgoing_window=100, handle=0,
                  delivery_count=0, link_credit=0xFFFFFFFF))  # fmt: skip
    assert link.link_credit == 0xFFFFFFFF


def test_flow_before_the_senders_attach_uses_initial_delivery_count():
    p = ScriptedPeer()
    p.open()
    p.begin()
    link = p.attach(role=d.RECEIVER, source=d.Source(address="q"), answer=False)
    link.attach(source=d.Source(address="q"), target=d.Target(), initial_delivery_count=50)
    # a receiver that had not seen our ATTACH leaves delivery-count null [2.7.4]
    p.send(d.Flow(next_incoming_id=0, incoming_window=100, next_outgoing_id=0, outgoing_window=100, handle=0,
                  link_credit=5))  # fmt: skip
    assert link.link_credit == 5


def test_delivery_count_wraps_at_2_32(pair):
    cs, ss = pair.begin()
    start = serial.MASK - 2  # 2^32 - 3
    cl, sl = pair.attach(cs, ss, "l", d.SENDER, credit=4, client_kw=dict(initial_delivery_count=start))
    assert cl.link_credit == 4
    for i in range(4):
        cl.send(b"%d" % i, message())
    s, _ = pair.pump()
    assert len(of(s, ev.MessageReceived)) == 4
    assert cl.delivery_count == sl.delivery_count == 1
    sl.flow(link_credit=6)
    pair.pump()
    assert cl.link_credit == 6
    # drain across the wrap, from the other side
    sl.flow(link_credit=3, drain=True)
    pair.pump()
    cl.drained()
    pair.pump()
    assert cl.delivery_count == sl.delivery_count == 4 and sl.link_credit == 0


def test_delivery_ids_wrap_and_dispositions_coalesce_across_the_wrap(pair):
    cs, ss = pair.begin()
    cs.next_delivery_id = serial.MASK - 1
    cl, sl = pair.attach(cs, ss, "l", d.SENDER, credit=10)
    for i in range(4):
        cl.send(b"%d" % i, message())
    s, _ = pair.pump()
    deliveries = [e.delivery for e in of(s, ev.MessageReceived)]
    assert [x.id for x in deliveries] == [serial.MASK - 1, serial.MASK, 0, 1]
    for x in reversed(deliveries):
        ss.settle(x, d.Accepted())
    _, c = pair.pump()
    disp = only(performatives(pair.s2c[-1]), d.Disposition)
    assert (disp.first, disp.last, disp.settled, disp.role) == (serial.MASK - 1, 1, True, d.RECEIVER)
    updated = c[0].deliveries
    assert [x.id for x in updated] == [serial.MASK - 1, serial.MASK, 0, 1]
    assert all(x.remote_settled and x.state == d.Accepted() for x in updated)
    assert cs.outgoing_unsettled == {}


# ------------------------------------------------------------------ serial arithmetic


u32 = st.integers(min_value=0, max_value=serial.MASK)


@given(u32, st.integers(min_value=0, max_value=serial.HALF - 1))
def test_serial_add_and_diff(a, n):
    b = serial.add(a, n)
    assert 0 <= b <= serial.MASK
    assert serial.diff(b, a) == n
    assert serial.le(a, b)
    assert serial.lt(a, b) == (n > 0)
    assert serial.in_range(b, a, serial.add(a, n)) and serial.in_range(a, a, b)


def test_serial_edges():
    assert serial.add(serial.MASK, 1) == 0
    assert serial.diff(0, serial.MASK) == 1 and serial.diff(serial.MASK, 0) == -1
    assert serial.lt(serial.MASK, 0) and not serial.lt(0, serial.MASK)
    assert not serial.in_range(5, 6, 10) and serial.in_range(1, serial.MASK, 2)


# ------------------------------------------------------------------ transfers


def test_multi_frame_transfer_reassembled():
    p = ScriptedPeer()
    p.open()
    p.begin()
    p.attach()
    msg = message(b"z" * 5000)
    p.transfer(more=True, payload=msg[:100])
    p.send(d.Transfer(handle=0, more=True), 0, msg[100:4000])
    assert not of(p.events, ev.MessageReceived)
    p.send(d.Transfer(handle=0, delivery_id=0), 0, msg[4000:])  # repeating the id is allowed
    (received,) = of(p.events, ev.MessageReceived)
    assert received.delivery.payload == msg and received.delivery.tag == b"t"


def test_aborted_transfer():
    p = ScriptedPeer()
    p.open()
    session = p.begin()
    link = p.attach(credit=5)
    p.transfer(more=True, payload=b"part")
    p.send(d.Transfer(handle=0, more=True), 0, b"more")
    events = p.send(d.Transfer(handle=0, aborted=True))
    assert [type(e) for e in events] == [ev.DeliveryAborted]
    assert events[0].delivery.payload == b"" and events[0].delivery.settled
    assert link.link_credit == 4 and session.incoming_unsettled == {}
    events = p.transfer(delivery_id=1, tag=b"n", payload=b"next")
    assert events[0].delivery.payload == b"next"


def test_continuation_for_another_delivery_is_invalid_field():
    p = ScriptedPeer()
    p.open()
    p.begin()
    p.attach()
    p.transfer(more=True)
    p.transfer(delivery_id=7, tag=None)
    assert only(performatives(p.out()), d.Detach).error.condition == Condition.INVALID_FIELD


@pytest.mark.parametrize("missing", ["delivery_id", "tag"])
def test_first_transfer_without_id_or_tag_is_invalid_field(missing):
    p = ScriptedPeer()
    p.open()
    p.begin()
    p.attach()
    kw = {"delivery_id": 0, "tag": b"t", missing: None}
    p.transfer(**kw)
    detach = only(performatives(p.out()), d.Detach)
    assert detach.closed and detach.error.condition == Condition.INVALID_FIELD


def test_transfer_on_a_sending_link_is_not_allowed():
    p = ScriptedPeer()
    p.open()
    p.begin()
    p.attach(role=d.RECEIVER, source=d.Source(address="q"))
    p.transfer()
    assert only(performatives(p.out()), d.Detach).error.condition == Condition.NOT_ALLOWED


def test_message_size_exceeded():
    p = ScriptedPeer()
    p.open()
    p.begin()
    link = p.attach(answer=False)
    link.max_message_size = 100
    link.attach(source=d.Source(), target=d.Target(address="q"))
    link.flow(link_credit=10)
    attach = only(performatives(p.out()), d.Attach)
    assert attach.max_message_size == 100
    p.transfer(payload=b"x" * 100)
    assert len(of(p.events, ev.MessageReceived)) == 1
    p.transfer(delivery_id=1, tag=b"2", payload=b"x" * 60, more=True)
    p.send(d.Transfer(handle=0, more=True), 0, b"x" * 60)
    detach = only(performatives(p.out()), d.Detach)
    assert detach.error.condition == Condition.MESSAGE_SIZE_EXCEEDED
    assert p.send(d.Transfer(handle=0), 0, b"rest") == []  # the rest of the delivery is dropped
    assert not p.server.closed


def test_presettled_delivery(pair):
    cs, ss = pair.begin()
    cl, sl = pair.attach(cs, ss, "l", d.SENDER, credit=5)
    sent = cl.send(b"p", message(), settled=True)
    assert sent.settled and cs.outgoing_unsettled == {}
    s, _ = pair.pump()
    got = s[0].delivery
    assert got.settled and ss.incoming_unsettled == {}
    pair.pump()
    assert not performatives(b"".join(pair.s2c), d.Disposition)


def test_unsettled_state_update_then_settle(pair):
    cs, ss = pair.begin()
    cl, sl = pair.attach(cs, ss, "l", d.SENDER, credit=5)
    sent = cl.send(b"u", message())
    s, _ = pair.pump()
    got = s[0].delivery
    ss.settle(got, d.Received(section_number=0, section_offset=10), settled=False)
    _, c = pair.pump()
    assert c[0].deliveries == [sent] and sent.state == d.Received(section_number=0, section_offset=10)
    assert not sent.remote_settled and cs.outgoing_unsettled == {sent.id: sent}
    ss.settle(got, d.Rejected(error=d.Error(condition=Condition.DECODE_ERROR)))
    _, c = pair.pump()
    assert sent.remote_settled and isinstance(sent.state, d.Rejected) and cs.outgoing_unsettled == {}


# ------------------------------------------------------------------ dispositions


def _received(pair, n):
    cs, ss = pair.begin()
    cl, sl = pair.attach(cs, ss, "l", d.SENDER, credit=100)
    sent = [cl.send(b"%d" % i, message()) for i in range(n)]
    s, _ = pair.pump()
    return cs, ss, sent, [e.delivery for e in of(s, ev.MessageReceived)]


def test_contiguous_settles_coalesce_into_one_disposition(pair):
    cs, ss, sent, got = _received(pair, 6)
    for x in [got[3], got[0], got[5], got[1], got[2], got[4]]:
        ss.settle(x, d.Accepted())
    _, c = pair.pump()
    disp = performatives(pair.s2c[-1], d.Disposition)
    assert [(x.first, x.last) for x in disp] == [(0, 5)]
    assert [x.id for x in c[0].deliveries] == [0, 1, 2, 3, 4, 5]


def test_gaps_and_different_outcomes_split_dispositions(pair):
    cs, ss, sent, got = _received(pair, 7)
    ss.settle(got[0], d.Accepted())
    ss.settle(got[1], d.Accepted())
    ss.settle(got[3], d.Accepted())
    ss.settle(got[4], d.Released())
    ss.settle(got[5], d.Released())
    ss.settle(got[6], d.Released(), settled=False)
    pair.pump()
    disp = performatives(pair.s2c[-1], d.Disposition)
    assert [(x.first, x.last, type(x.state).__name__, x.settled) for x in disp] == [
        (0, 1, "Accepted", True), (3, None, "Accepted", True), (4, 5, "Released", True), (6, None, "Released", False),
    ]  # fmt: skip
    assert set(cs.outgoing_unsettled) == {2, 6}


def test_incoming_disposition_range_updates_every_delivery(pair):
    cs, ss = pair.begin()
    rcv = cs.create_link("r", d.RECEIVER)
    rcv.attach(source=d.Source(address="q"), target=d.Target())
    s, _ = pair.pump()
    snd = s[0].link
    snd.attach(source=s[0].attach.source, target=s[0].attach.target)
    rcv.flow(link_credit=10)
    pair.pump()
    sent = [snd.send(b"%d" % i, message()) for i in range(5)]
    pair.pump()
    pair.client.receive_data(b"")  # nothing pending
    # the client settles 1..3 with one DISPOSITION written by hand
    events = pair.server.receive_data(
        frame(d.Disposition(role=d.RECEIVER, first=1, last=3, settled=True, state=d.Accepted()), cs.channel)
    )
    assert events == [ev.DeliveriesUpdated(ss, sent[1:4])]
    assert set(ss.outgoing_unsettled) == {0, 4}
    # ids nobody knows are ignored
    assert pair.server.receive_data(frame(d.Disposition(role=d.RECEIVER, first=100, last=200), cs.channel)) == []


def test_backwards_disposition_range_is_invalid_field():
    p = ScriptedPeer()
    p.open()
    p.begin()
    p.send(d.Disposition(role=d.RECEIVER, first=10, last=5, settled=True))
    assert only(performatives(p.out()), d.End).error.condition == Condition.INVALID_FIELD


# ------------------------------------------------------------------ detach


def test_detach_returns_unsettled_deliveries(pair):
    cs, ss = pair.begin()
    rcv = cs.create_link("r", d.RECEIVER)
    rcv.attach(source=d.Source(address="q"), target=d.Target())
    s, _ = pair.pump()
    snd = s[0].link
    snd.attach(source=s[0].attach.source, target=s[0].attach.target)
    rcv.flow(link_credit=10)
    pair.pump()
    sent = [snd.send(b"%d" % i, message()) for i in range(4)]
    _, c = pair.pump()
    cs.settle(c[1].delivery, d.Accepted())
    pair.pump()
    rcv.detach()
    s, c = pair.pump()
    detached = only(s, ev.LinkDetached)
    assert detached.remote and detached.closed
    assert [x.id for x in detached.unsettled] == [sent[0].id, sent[2].id, sent[3].id]
    assert only(c, ev.LinkDetached).remote
    assert ss.outgoing_unsettled == {} and ss.links == {} and cs.links == {}


def test_our_detach_returns_unsettled(pair):
    cs, ss = pair.begin()
    cl, sl = pair.attach(cs, ss, "l", d.SENDER, credit=10)
    sent = [cl.send(b"%d" % i, message()) for i in range(3)]
    pair.pump()
    assert cl.detach(closed=False) == sent
    s, c = pair.pump()
    assert not only(s, ev.LinkDetached).closed
    assert only(c, ev.LinkDetached).unsettled == []


def test_detach_with_error(pair):
    cs, ss = pair.begin()
    cl, sl = pair.attach(cs, ss, "l", d.SENDER, credit=10)
    sl.detach(condition=Condition.DETACH_FORCED, description="bye")
    _, c = pair.pump()
    assert only(c, ev.LinkDetached).error == d.Error(condition=Condition.DETACH_FORCED, description="bye")
    with pytest.raises(LocalProtocolError):
        cl.send(b"x", message())


def test_refused_link():
    p = ScriptedPeer()
    p.open()
    p.begin()
    link = p.attach(answer=False)
    link.refuse(Condition.NOT_FOUND, "no such queue")
    out = performatives(p.out())
    assert [type(x) for x in out] == [d.Attach, d.Detach]
    assert out[0].target is None and out[1].closed and out[1].error.condition == Condition.NOT_FOUND
    events = p.send(d.Detach(handle=0, closed=True))
    assert only(events, ev.LinkDetached).remote
    assert p.out() == []


def test_sender_attach_without_initial_delivery_count_is_refused():
    p = ScriptedPeer()
    p.open()
    p.begin()
    events = p.send(d.Attach(name="l", handle=0, role=d.SENDER, target=d.Target(address="q")))
    assert events == []
    out = performatives(p.out())
    assert [type(x) for x in out] == [d.Attach, d.Detach]
    assert out[1].error.condition == Condition.INVALID_FIELD


def test_peer_detach_before_we_answered_gets_attach_and_detach():
    p = ScriptedPeer()
    p.open()
    p.begin()
    p.attach(answer=False)
    events = p.send(d.Detach(handle=0, closed=True))
    assert only(events, ev.LinkDetached).remote
    out = performatives(p.out())
    assert [type(x) for x in out] == [d.Attach, d.Detach]
