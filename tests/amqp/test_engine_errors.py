"""Protocol errors answered with the right frame and condition, stale
events, random interleavings of both ends, and frame ordering behind a shut
session window."""

from __future__ import annotations

import pytest
from engine_helpers import (
    AMQP_HEADER,
    BEGIN,
    Pair,
    ScriptedPeer,
    close_error,
    frame,
    message,
    of,
    only,
    performatives,
    raw_frame,
)

from amqp import definitions as d
from amqp import events as ev
from amqp import serial
from amqp.errors import Condition, LocalProtocolError

# ================================================================== protocol errors


def test_frame_before_open_is_not_allowed():
    p = ScriptedPeer()
    p.feed(AMQP_HEADER + frame(BEGIN))
    out = performatives(p.out())
    assert [type(x) for x in out] == [d.Open, d.Close]
    assert out[1].error.condition == Condition.NOT_ALLOWED


def test_second_open_is_not_allowed():
    p = ScriptedPeer()
    p.open()
    p.send(d.Open(container_id="again"))
    assert close_error(p.out()).condition == Condition.NOT_ALLOWED


def test_frame_on_a_channel_without_session_is_not_allowed():
    p = ScriptedPeer()
    p.open()
    p.send(d.Attach(name="l", handle=0, role=d.SENDER, initial_delivery_count=0), channel=1)
    assert close_error(p.out()).condition == Condition.NOT_ALLOWED


def test_non_performative_composite_in_a_frame_is_not_allowed():
    p = ScriptedPeer()
    p.open()
    p.feed(raw_frame(d.Accepted().encode()))
    assert close_error(p.out()).condition == Condition.NOT_ALLOWED


@pytest.mark.parametrize(
    "body",
    [
        b"\xff\xff",  # an invalid constructor
        b"\x00\x53\x11\xc0\x04\x03\x40\x40\x40",  # BEGIN with its mandatory fields null
        b"\xa1\x03abc",  # a string, not a performative
        b"\x00\x53\x11",  # truncated
        b"\x00\x53\x11\xc0\x10\x05",  # list size beyond the frame
        b"\x00\x53\x13\xc0\x04\x03\x43\xa1\x01x",  # FLOW with a string for a uint
    ],
)
def test_decode_errors(body):
    p = ScriptedPeer()
    p.open()
    events = p.feed(raw_frame(body))
    assert close_error(p.out()).condition == Condition.DECODE_ERROR
    assert events[-1] == ev.ConnectionClosed(p.server.error, remote=False)


def test_decode_error_in_the_open_itself():
    p = ScriptedPeer()
    p.feed(AMQP_HEADER + raw_frame(b"\x00\x53\x10\x45"))  # OPEN without container-id
    out = performatives(p.out())
    assert [type(x) for x in out] == [d.Open, d.Close]
    assert out[1].error.condition == Condition.DECODE_ERROR


@pytest.mark.parametrize(
    "performative",
    [
        d.Transfer(handle=5, delivery_id=0, delivery_tag=b"t"),
        d.Flow(
            next_incoming_id=0,
            incoming_window=1,
            next_outgoing_id=0,
            outgoing_window=1,
            handle=5,
            delivery_count=0,
            link_credit=1,
        ),  # fmt: skip
        d.Detach(handle=5),
    ],
)
def test_unattached_handle(performative):
    p = ScriptedPeer()
    p.open()
    session = p.begin()
    p.send(performative)
    end = only(performatives(p.out()), d.End)
    assert end.error.condition == Condition.UNATTACHED_HANDLE
    assert of(p.events, ev.SessionEnded) == [ev.SessionEnded(session, end.error, False)]
    assert not p.server.closed


def test_transfer_after_detach_exchange_is_unattached_handle():
    p = ScriptedPeer()
    p.open()
    p.begin()
    p.attach()
    p.send(d.Detach(handle=0, closed=True))
    p.out()
    p.transfer()
    assert only(performatives(p.out()), d.End).error.condition == Condition.UNATTACHED_HANDLE


def test_protocol_error_events_do_not_escape_as_exceptions():
    p = ScriptedPeer()
    p.open()
    for junk in (b"\x00" * 20, b"\xff" * 20):
        p.feed(junk)
    assert p.server.closed


def test_application_misuse_raises_local_protocol_error(pair):
    with pytest.raises(LocalProtocolError):
        pair.server.start()
    with pytest.raises(LocalProtocolError):
        pair.client.open()
    cs, ss = pair.begin()
    with pytest.raises(LocalProtocolError):
        cs.begin()
    cl, sl = pair.attach(cs, ss, "l", d.SENDER, credit=1)
    with pytest.raises(LocalProtocolError):
        cl.attach()
    with pytest.raises(LocalProtocolError):
        sl.send(b"x", b"")
    with pytest.raises(LocalProtocolError):
        cl.flow(link_credit=3)
    with pytest.raises(LocalProtocolError):
        sl.drained()


# ------------------------------------------------------------------ stale events
# The engine reads a whole chunk before returning its events, so an event may
# describe an endpoint the engine has already ended further on in the same
# chunk. Answering such an event must not raise.


def test_answering_a_session_the_engine_already_ended():
    p = ScriptedPeer()
    p.open()
    events = p.feed(frame(BEGIN) + frame(d.Transfer(handle=3, delivery_id=0, delivery_tag=b"t")))
    assert [type(e) for e in events] == [ev.SessionBegun, ev.SessionEnded]
    events[0].session.begin()  # no-op
    assert [type(x) for x in performatives(p.out())] == [d.Begin, d.End]


def test_answering_a_link_the_engine_already_refused():
    p = ScriptedPeer()
    p.open()
    p.begin()
    events = p.feed(frame(d.Attach(name="l", handle=0, role=d.SENDER, target=d.Target(address="q"),
                                   initial_delivery_count=0)) + frame(d.Transfer(handle=0, delivery_id=0,
                                                                                 delivery_tag=b"t")))  # fmt: skip
    assert [type(e) for e in events] == [ev.LinkAttached, ev.LinkDetached]
    link = events[0].link
    link.attach(source=d.Source(), target=d.Target(address="q"))  # no-op
    link.flow(link_credit=10)  # no-op
    assert [type(x) for x in performatives(p.out())] == [d.Attach, d.Detach]


def test_answering_an_open_after_the_engine_closed():
    p = ScriptedPeer()
    events = p.feed(AMQP_HEADER + frame(d.Open(container_id="a")) + frame(d.Open(container_id="b")))
    assert [type(e) for e in events] == [ev.ConnectionOpened, ev.ConnectionClosed]
    p.server.open()  # no-op
    assert [type(x) for x in performatives(p.out())] == [d.Open, d.Close]


def test_no_transfer_after_the_session_ended(pair):
    cs, ss = pair.begin()
    rcv = cs.create_link("r", d.RECEIVER)
    rcv.attach(source=d.Source(address="q"), target=d.Target())
    s, _ = pair.pump()
    snd = s[0].link
    snd.attach(source=s[0].attach.source, target=s[0].attach.target)
    rcv.flow(link_credit=10)
    pair.pump()
    assert snd.active
    cs.end()
    pair.pump()
    assert not snd.active and snd.link_credit == 10
    with pytest.raises(LocalProtocolError):
        snd.send(b"x", message())
    assert pair.server.data_to_send() == b""


def test_links_are_inactive_once_the_connection_closes(pair):
    cs, ss = pair.begin()
    cl, sl = pair.attach(cs, ss, "l", d.SENDER, credit=5)
    assert cl.active
    pair.server.close()
    pair.pump()
    assert not cl.active and not sl.active


# ------------------------------------------------------------------ random interleavings


def _random_flow_run(seed: int) -> None:
    import random

    rng = random.Random(seed)
    p = Pair(client_kw=dict(max_frame_size=rng.choice([512, 4096])),
             server_kw=dict(max_frame_size=rng.choice([512, 4096])))  # fmt: skip
    p.connect()
    cs, ss = p.begin(client_kw=dict(incoming_window=rng.choice([1, 3, 100])),
                     server_kw=dict(incoming_window=rng.choice([1, 3, 100])))  # fmt: skip
    start = rng.choice([0, serial.MASK - 3])
    up, up_rcv = p.attach(cs, ss, "up", d.SENDER, credit=rng.randrange(0, 5),
                          client_kw=dict(initial_delivery_count=start))  # fmt: skip
    down_rcv = cs.create_link("down", d.RECEIVER)
    down_rcv.attach(source=d.Source(address="q"), target=d.Target())
    s, _ = p.pump()
    down = s[0].link
    down.attach(source=s[0].attach.source, target=s[0].attach.target, initial_delivery_count=start)
    p.pump()
    links = [(up, up_rcv, cs, ss), (down, down_rcv, ss, cs)]
    sent = {id(up): [], id(down): []}
    got = {id(up): [], id(down): []}
    events: list = []

    def collect(evts):
        for e in evts:
            assert not isinstance(e, ev.ConnectionClosed), (seed, e)
            assert not (isinstance(e, (ev.SessionEnded, ev.LinkDetached)) and e.error), (seed, e)
            if isinstance(e, ev.MessageReceived):
                sender = up if e.link is up_rcv else down
                got[id(sender)].append(e.delivery.payload)
            events.append(e)

    for _ in range(rng.randrange(20, 80)):
        op = rng.randrange(9)
        snd, rcv, snd_session, rcv_session = rng.choice(links)
        if op <= 2 and snd.link_credit > 0:
            body = message(b"%d-%d" % (seed, len(sent[id(snd)])) + b"." * rng.choice([0, 600, 3000]))
            snd.send(b"%d" % len(sent[id(snd)]), body, settled=rng.random() < 0.3)
            sent[id(snd)].append(body)
        elif op == 3:
            rcv.flow(link_credit=rng.randrange(0, 6))
        elif op == 4:
            rcv.flow(link_credit=rng.randrange(0, 6), drain=True)
        elif op == 5 and snd.drain:
            snd.drained()
        elif op == 6:
            for x in list(rcv_session.incoming_unsettled.values()):
                if rng.random() < 0.5:
                    rcv_session.settle(x, d.Accepted())
        elif op == 7:
            (rcv_session.block if rng.random() < 0.5 else rcv_session.unblock)()
        else:  # move bytes one way only, so that FLOWs and TRANSFERs cross
            if rng.random() < 0.5:
                data = p.client.data_to_send()
                collect(p.server.receive_data(data))
            else:
                data = p.server.data_to_send()
                collect(p.client.receive_data(data))
    cs.unblock()
    ss.unblock()
    for _ in range(5):
        s, c = p.pump()
        collect(s + c)
    for snd, rcv, _, _ in links:
        assert got[id(snd)] == sent[id(snd)], seed
        assert snd.delivery_count == rcv.delivery_count, seed
        assert snd.link_credit == rcv.link_credit, (seed, snd.link_credit, rcv.link_credit)
    assert cs.waiting_transfers == 0 and ss.waiting_transfers == 0


@pytest.mark.parametrize("block", range(4))
def test_random_flow_control_interleavings(block):
    for seed in range(block * 50, block * 50 + 50):
        _random_flow_run(seed)


# ------------------------------------------------------------------ ordering behind the session window


def _sender_behind_window(window: int = 1):
    p = ScriptedPeer()
    p.open()
    session = p.begin(incoming_window=window)
    link = p.attach(role=d.RECEIVER, source=d.Source(address="q"))
    p.send(d.Flow(next_incoming_id=0, incoming_window=window, next_outgoing_id=0, outgoing_window=100, handle=0,
                  delivery_count=0, link_credit=10, drain=True))  # fmt: skip
    return p, session, link


def test_drained_flow_waits_behind_its_transfers():
    p, session, link = _sender_behind_window()
    for i in range(3):
        link.send(bytes([i]), message())
    link.drained()  # delivery-count 10: it counts the two transfers still held
    assert link.link_credit == 0
    out = performatives(p.out())
    assert [type(x) for x in out] == [d.Transfer]
    p.send(d.Flow(next_incoming_id=1, incoming_window=100, next_outgoing_id=0, outgoing_window=100))
    out = performatives(p.out())
    assert [type(x) for x in out] == [d.Transfer, d.Transfer, d.Flow]
    assert (out[2].delivery_count, out[2].link_credit, out[2].handle) == (10, 0, 0)
    assert session.waiting_transfers == 0


def test_held_flow_carries_the_state_of_when_it_was_asked_for():
    p, session, link = _sender_behind_window()
    link.send(b"a", message())
    link.send(b"b", message())  # held
    link.flow()  # reports delivery-count 2
    p.send(d.Flow(next_incoming_id=0, incoming_window=1, next_outgoing_id=0, outgoing_window=100, handle=0,
                  delivery_count=0, link_credit=10))  # fmt: skip
    link.send(b"c", message())  # held, after the FLOW
    p.out()
    p.send(d.Flow(next_incoming_id=1, incoming_window=100, next_outgoing_id=0, outgoing_window=100))
    out = performatives(p.out())
    assert [type(x) for x in out] == [d.Transfer, d.Flow, d.Transfer]
    assert out[1].delivery_count == 2 and out[2].delivery_id == 2


def test_detach_drops_transfers_held_by_the_window():
    p, session, link = _sender_behind_window()
    sent = [link.send(bytes([i]), message()) for i in range(3)]
    p.out()
    assert link.detach() == sent
    assert [type(x) for x in performatives(p.out())] == [d.Detach]
    assert session.waiting_transfers == 0
    p.send(d.Flow(next_incoming_id=1, incoming_window=100, next_outgoing_id=0, outgoing_window=100))
    assert performatives(p.out(), d.Transfer) == []


def test_transfers_in_flight_under_a_reduced_grant_are_taken():
    """[2.6.7]: when the receiver lowers link-credit while transfers are in
    flight it may handle the excess normally; up to the highest limit it ever
    granted, we do."""
    p = ScriptedPeer()
    p.open()
    p.begin()
    link = p.attach(credit=5)
    link.flow(link_credit=0)  # e.g. a resource alarm
    p.out()
    for i in range(5):  # sent before the peer saw the new grant
        p.transfer(delivery_id=i, tag=b"%d" % i)
    assert len(of(p.events, ev.MessageReceived)) == 5 and not performatives(p.out(), d.Detach)
    assert link.link_credit == 0 and link.delivery_count == 5
    p.transfer(delivery_id=5, tag=b"5")
    assert only(performatives(p.out()), d.Detach).error.condition == Condition.TRANSFER_LIMIT_EXCEEDED
