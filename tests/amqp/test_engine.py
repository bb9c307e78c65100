"""Connection, session and link endpoints [2.4]-[2.7], driven in memory: a
client engine against a server engine (`Pair`), and hand-made byte scripts
against a server engine (`ScriptedPeer`) where the exact frame the server
answers with is checked."""

from __future__ import annotations

import pytest
from engine_helpers import (
    AMQP_HEADER,
    FakeClock,
    Pair,
    ScriptedPeer,
    close_error,
    decode_stream,
    frame,
    message,
    performatives,
    raw_frame,
)
from hypothesis import given
from hypothesis import strategies as st

from node.amqp import codec, serial
from node.amqp import definitions as d
from node.amqp import events as ev
from node.amqp.errors import Condition, LocalProtocolError
from node.amqp.framing import HEARTBEAT, MAX_DESCRIPTION
from node.amqp.types import Described, ULong

BEGIN = d.Begin(next_outgoing_id=0, incoming_window=100, outgoing_window=100)


def of(events, kind):
    return [e for e in events if isinstance(e, kind)]


def only(items, kind):
    found = [x for x in items if type(x) is kind]
    assert len(found) == 1, items
    return found[0]


@pytest.fixture
def pair():
    p = Pair()
    p.connect()
    return p


# ================================================================== connection


def test_open_carries_settings_both_ways():
    p = Pair(client_kw=dict(max_frame_size=4096, channel_max=7, idle_timeout=30),
             server_kw=dict(max_frame_size=8192, channel_max=9))  # fmt: skip
    p.client.start()
    p.pump()
    p.client.sasl_init("ANONYMOUS")
    p.pump()
    p.server.sasl_outcome(True)
    p.pump()
    p.client.open(hostname="vhost", properties={"product": "t"}, offered_capabilities=["A"],
                  desired_capabilities=["B"])  # fmt: skip
    s, _ = p.pump()
    o = s[0].open
    assert (o.container_id, o.hostname, o.max_frame_size, o.channel_max, o.idle_time_out) == (
        "client", "vhost", 4096, 7, 15000)  # fmt: skip
    assert o.properties == {"product": "t"} and o.offered_capabilities == ["A"] and o.desired_capabilities == ["B"]
    assert p.server.remote_max_frame_size == 4096 and p.server.remote_channel_max == 7
    assert p.server.remote_idle_timeout == 15  # half of the client's threshold [2.4.5]
    p.server.open()
    _, c = p.pump()
    assert c[0].open.max_frame_size == 8192 and p.client.remote_channel_max == 9


def test_close_from_client(pair):
    pair.client.close()
    s, c = pair.pump()
    assert s == [ev.ConnectionClosed(None, remote=True)] and c == [ev.ConnectionClosed(None, remote=True)]
    assert pair.client.closed and pair.server.closed
    assert performatives(b"".join(pair.s2c), d.Close) == [d.Close()]
    assert pair.client.data_to_send() == b"" and pair.server.data_to_send() == b""


def test_close_with_error_reaches_peer(pair):
    pair.server.close(Condition.CONNECTION_FORCED, "shutting down")
    _, c = pair.pump()
    assert c[0].error == d.Error(condition=Condition.CONNECTION_FORCED, description="shutting down")
    assert c[0].remote and pair.client.closed and pair.server.closed


def test_close_before_open_sends_open_first():
    p = ScriptedPeer()
    p.feed(AMQP_HEADER + frame(d.Open(container_id="peer")))
    p.server.close()
    assert [type(x) for x in performatives(p.out())] == [d.Open, d.Close]


def test_close_during_sasl_sends_no_frame():
    p = Pair()
    p.client.start()
    p.pump()
    p.server.close()
    assert p.server.closed and p.server.data_to_send() == b""


def test_nothing_is_sent_after_close(pair):
    cs, ss = pair.begin()
    cl, sl = pair.attach(cs, ss, "in", d.SENDER, credit=10)
    cl.send(b"1", message())
    s, _ = pair.pump()
    pair.server.close()
    sl.flow(link_credit=5)
    ss.settle(s[0].delivery, d.Accepted())
    ss.end()
    out = performatives(pair.server.data_to_send())
    assert out == [d.Close()]


def test_frames_after_peer_close_are_ignored():
    p = ScriptedPeer()
    p.open()
    p.send(d.Close())
    assert p.feed(frame(BEGIN) + b"garbage") == []
    assert performatives(p.out()) == [d.Close()]


# ------------------------------------------------------------------ idle timeout [2.4.5]


def test_idle_timeout_closes_with_resource_limit_exceeded():
    clock = FakeClock()
    p = ScriptedPeer(idle_timeout=10, clock=clock)
    out = p.open()
    assert only(performatives(out), d.Open).idle_time_out == 5000  # half of what is enforced
    clock.advance(6)
    assert p.server.tick() == pytest.approx(clock.now + 4)
    p.feed(HEARTBEAT)  # any input resets the timer
    clock.advance(6)
    assert p.server.tick() == pytest.approx(clock.now + 4) and not p.server.closed
    clock.advance(4)
    assert p.server.tick() is None and p.server.closed
    assert close_error(p.out()).condition == Condition.RESOURCE_LIMIT_EXCEEDED
    # the event comes with the next receive_data()
    events = p.feed(b"")
    assert events[0].error.condition == Condition.RESOURCE_LIMIT_EXCEEDED and not events[0].remote


def test_empty_read_does_not_reset_idle_timer():
    clock = FakeClock()
    p = ScriptedPeer(idle_timeout=10, clock=clock)
    p.open()
    clock.advance(9)
    p.feed(b"")
    clock.advance(1)
    p.server.tick()
    assert p.server.closed


def test_heartbeats_at_half_the_peers_idle_timeout():
    clock = FakeClock()
    p = ScriptedPeer(clock=clock)
    p.open(idle_time_out=4000)
    assert p.server.tick() == pytest.approx(clock.now + 2)
    clock.advance(1.9)
    p.server.tick()
    assert p.server.data_to_send() == b""
    clock.advance(0.1)
    p.server.tick()
    assert p.server.data_to_send() == HEARTBEAT
    clock.advance(1)
    p.server.tick()
    assert p.server.data_to_send() == b""
    # sending anything counts: no heartbeat 2 s after a real frame
    p.send(BEGIN)
    p.events[-1].session.begin()
    p.out()
    clock.advance(1.5)
    p.server.tick()
    assert p.server.data_to_send() == b""
    clock.advance(0.5)
    p.server.tick()
    assert p.server.data_to_send() == HEARTBEAT


def test_pair_stays_alive_on_heartbeats():
    clock = FakeClock()
    p = Pair(client_kw=dict(idle_timeout=2, clock=clock), server_kw=dict(idle_timeout=3, clock=clock))
    p.connect()
    for _ in range(50):
        clock.advance(0.5)
        p.client.tick()
        p.server.tick()
        p.pump()
    assert not p.client.closed and not p.server.closed
    assert HEARTBEAT in p.s2c and HEARTBEAT in p.c2s


def test_no_idle_timeout_no_deadline():
    p = ScriptedPeer()
    p.open()
    assert p.server.tick() is None


# ------------------------------------------------------------------ channel-max


def test_channel_above_channel_max_is_a_framing_error():
    p = ScriptedPeer(channel_max=3)
    out = p.open()
    assert only(performatives(out), d.Open).channel_max == 3
    p.send(BEGIN, channel=3)
    assert not p.server.closed
    p.send(BEGIN, channel=4)
    assert close_error(p.out()).condition == Condition.FRAMING_ERROR


def test_client_cannot_use_more_channels_than_the_server_allows():
    p = Pair(server_kw=dict(channel_max=1))
    p.connect()
    p.begin()
    p.begin()
    with pytest.raises(LocalProtocolError):
        p.client.create_session()


def test_peer_beginning_more_sessions_than_its_channel_max_lets_us_answer_is_an_internal_error():
    """The natural trigger of amqp:internal-error: the peer's channel-max of 0
    leaves us one channel, and it begins a second session that we cannot
    answer. The engine's LocalProtocolError surfaces as internal-error."""
    p = ScriptedPeer()
    p.open(channel_max=0)
    p.begin(channel=0)
    p.send(BEGIN, channel=1)
    assert close_error(p.out()).condition == Condition.INTERNAL_ERROR
    assert p.closed_with() == Condition.INTERNAL_ERROR


# ------------------------------------------------------------------ max-frame-size


def test_max_frame_size_below_512_is_invalid_field():
    p = ScriptedPeer()
    p.feed(AMQP_HEADER + frame(d.Open(container_id="peer", max_frame_size=511)))
    assert close_error(p.out()).condition == Condition.INVALID_FIELD


def test_each_side_splits_transfers_by_the_peers_max_frame_size():
    p = Pair(client_kw=dict(max_frame_size=512), server_kw=dict(max_frame_size=2048))
    p.connect()
    cs, ss = p.begin()
    up, sl = p.attach(cs, ss, "up", d.SENDER, credit=10)
    down, sender = p.attach(cs, ss, "down", d.RECEIVER)
    down.flow(link_credit=10)
    p.pump()
    body = bytes(range(256)) * 40  # 10 KB
    up.send(b"u", message(body))
    sender.send(b"d", message(body))
    s, c = p.pump()
    assert of(s, ev.MessageReceived)[0].delivery.payload == message(body)
    assert of(c, ev.MessageReceived)[0].delivery.payload == message(body)
    s2c = [w for chunk in p.s2c for w in decode_stream(chunk) if w.header is None]
    c2s = [w for chunk in p.c2s for w in decode_stream(chunk) if w.header is None]
    assert max(w.size for w in s2c) <= 512
    assert max(w.size for w in c2s) <= 2048
    assert max(w.size for w in c2s) > 512
    s2c_transfers = [w.performative for w in s2c if type(w.performative) is d.Transfer]
    assert len(s2c_transfers) > 20
    assert all(t.more for t in s2c_transfers[:-1]) and not s2c_transfers[-1].more
    # continuation frames repeat only the handle [2.7.5]
    assert all(t.delivery_id is None and t.delivery_tag is None for t in s2c_transfers[1:])


def test_frame_size_too_small_for_attach_reply():
    """The peer allows 512-byte frames and attaches with a long address; our
    ATTACH echoing it cannot fit and cannot be split."""
    p = ScriptedPeer()
    p.open(max_frame_size=512)
    p.begin()
    address = "a" * 600
    link = p.attach(target=d.Target(address=address), answer=False)
    link.attach(source=d.Source(), target=d.Target(address=address))  # raises nothing at the application
    assert p.server.closed
    out = p.out()
    assert close_error(out).condition == Condition.FRAME_SIZE_TOO_SMALL
    assert all(w.size <= 512 for w in out)
    assert not performatives(out, d.Attach)
    events = p.feed(b"")
    assert events == [ev.ConnectionClosed(p.server.error, remote=False)]
    assert events[0].error.condition == Condition.FRAME_SIZE_TOO_SMALL


def test_long_error_descriptions_are_cut_to_fit_a_small_frame():
    # a decode error quoting a large bad value
    p = ScriptedPeer()
    # an OPEN whose hostname (a string field) holds a 2000-byte binary
    body = b"\x00\x53\x10\xd0" + (4 + 6 + 5 + 2000).to_bytes(4, "big") + (2).to_bytes(4, "big")
    body += b"\xa1\x04peer" + b"\xb0" + (2000).to_bytes(4, "big") + b"z" * 2000
    p.feed(AMQP_HEADER + raw_frame(body))
    out = p.out()
    err = close_error(out)
    assert err.condition == Condition.DECODE_ERROR
    assert len(err.description) <= MAX_DESCRIPTION
    assert all(w.size <= 512 for w in out)


def test_error_descriptions_are_cut_by_encoded_size():
    # offered-capabilities (symbols) holding a string of 4-byte characters
    body = codec.dumps(Described(ULong(0x10), ["peer", None, None, None, None, None, None, "\U0001f600" * 200]))
    p = ScriptedPeer()
    p.feed(AMQP_HEADER + raw_frame(body))
    out = p.out()
    err = close_error(out)
    assert err.condition == Condition.DECODE_ERROR
    assert len(err.description.encode()) <= MAX_DESCRIPTION
    assert all(w.size <= 512 for w in out)


# ------------------------------------------------------------------ sessions


def test_begin_and_end(pair):
    cs, ss = pair.begin(client_kw=dict(incoming_window=50, handle_max=7), server_kw=dict(incoming_window=60))
    assert ss.remote_incoming_window == 50 and ss.remote_handle_max == 7
    assert cs.remote_incoming_window == 60
    assert cs.remote_channel == ss.channel and ss.remote_channel == cs.channel
    cs.end()
    s, c = pair.pump()
    assert s == [ev.SessionEnded(ss, None, True)] and c == [ev.SessionEnded(cs, None, True)]
    assert pair.client.sessions == {} and pair.server.sessions == {} and pair.server.remote_sessions == {}
    cs2, _ = pair.begin()
    assert cs2.channel == 0  # the channel is free again


def test_end_with_error(pair):
    cs, ss = pair.begin()
    ss.end(Condition.RESOURCE_DELETED, "gone")
    _, c = pair.pump()
    assert c == [ev.SessionEnded(cs, d.Error(condition=Condition.RESOURCE_DELETED, description="gone"), True)]


def test_several_sessions_on_distinct_channels(pair):
    sessions = [pair.begin() for _ in range(5)]
    assert sorted(cs.channel for cs, _ in sessions) == [0, 1, 2, 3, 4]
    cs, ss = sessions[2]
    cs.end()
    pair.pump()
    assert 2 not in pair.client.sessions and len(pair.server.sessions) == 4


def test_second_begin_on_a_channel_is_not_allowed():
    p = ScriptedPeer()
    p.open()
    p.begin()
    p.send(BEGIN)
    assert close_error(p.out()).condition == Condition.NOT_ALLOWED


def test_begin_answering_a_session_we_never_began_is_not_allowed():
    p = ScriptedPeer()
    p.open()
    p.send(d.Begin(remote_channel=5, next_outgoing_id=0, incoming_window=1, outgoing_window=1))
    assert close_error(p.out()).condition == Condition.NOT_ALLOWED


def test_frames_of_an_ended_session_are_discarded_until_its_end():
    p = ScriptedPeer()
    p.open()
    session = p.begin()
    session.end(Condition.RESOURCE_LIMIT_EXCEEDED)
    assert only(performatives(p.out()), d.End).error.condition == Condition.RESOURCE_LIMIT_EXCEEDED
    assert p.transfer(handle=9) == []  # in flight before our END reached the peer
    events = p.send(d.End())
    assert events == [ev.SessionEnded(session, None, True)]
    assert p.out() == [] and p.server.sessions == {}


def test_session_error_before_our_begin_still_sends_begin_then_end():
    p = ScriptedPeer()
    p.open()
    p.send(BEGIN)  # the application has not answered yet
    p.transfer(handle=3)
    out = performatives(p.out())
    assert [type(x) for x in out] == [d.Begin, d.End]
    assert out[1].error.condition == Condition.UNATTACHED_HANDLE


# ------------------------------------------------------------------ windows [2.5.6]


def test_sender_blocked_by_peer_window_holds_transfers_until_flow():
    p = ScriptedPeer()
    p.open()
    session = p.begin(incoming_window=2)
    link = p.attach(role=d.RECEIVER, source=d.Source(address="q"))
    p.send(d.Flow(next_incoming_id=0, incoming_window=2, next_outgoing_id=0, outgoing_window=100, handle=0,
                  delivery_count=0, link_credit=10))  # fmt: skip
    for i in range(5):
        link.send(bytes([i]), message(b"m%d" % i))
    sent = performatives(p.out(), d.Transfer)
    assert [t.delivery_id for t in sent] == [0, 1]
    assert session.waiting_transfers == 3 and session.remote_incoming_window == 0
    p.send(d.Flow(next_incoming_id=2, incoming_window=1, next_outgoing_id=0, outgoing_window=100))
    assert [t.delivery_id for t in performatives(p.out(), d.Transfer)] == [2]
    p.send(d.Flow(next_incoming_id=3, incoming_window=100, next_outgoing_id=0, outgoing_window=100))
    assert [t.delivery_id for t in performatives(p.out(), d.Transfer)] == [3, 4]
    assert session.waiting_transfers == 0


def test_pair_window_of_two_moves_many_messages_in_order():
    p = Pair()
    p.connect()
    cs, ss = p.begin(server_kw=dict(incoming_window=2))
    cl, _ = p.attach(cs, ss, "in", d.SENDER, credit=50)
    for i in range(40):
        cl.send(b"%d" % i, message(b"%d" % i))
    assert cs.waiting_transfers == 38
    received = []
    for _ in range(100):
        s, _ = p.pump()
        received += [e.delivery.payload for e in of(s, ev.MessageReceived)]
        if len(received) == 40:
            break
    assert received == [message(b"%d" % i) for i in range(40)]


def test_multi_frame_transfer_spends_one_window_unit_per_frame():
    p = ScriptedPeer()
    p.open(max_frame_size=512)
    session = p.begin(incoming_window=100)
    link = p.attach(role=d.RECEIVER, source=d.Source(address="q"))
    p.send(d.Flow(next_incoming_id=0, incoming_window=100, next_outgoing_id=0, outgoing_window=100, handle=0,
                  delivery_count=0, link_credit=10))  # fmt: skip
    link.send(b"t", b"x" * 2000)
    frames = performatives(p.out(), d.Transfer)
    assert len(frames) == 5 and session.next_outgoing_id == 5 and session.remote_incoming_window == 95


def test_transfers_beyond_incoming_window_are_a_window_violation():
    p = ScriptedPeer()
    p.open()
    session = p.begin(server_window=4)
    p.attach(credit=100)
    for i in range(4):  # the peer does not wait for our FLOW: the window is what we advertised
        p.transfer(delivery_id=i, tag=b"%d" % i)
    assert session.incoming_window == 0 and not of(p.events, ev.SessionEnded)
    p.transfer(delivery_id=4, tag=b"4")
    out = performatives(p.out())
    end = only(out, d.End)
    assert end.error.condition == Condition.WINDOW_VIOLATION
    assert of(p.events, ev.SessionEnded)[0].error.condition == Condition.WINDOW_VIOLATION
    assert not p.server.closed


def test_window_refills_when_our_flow_goes_out():
    p = ScriptedPeer()
    p.open()
    session = p.begin(server_window=4)
    p.attach(credit=100)
    p.transfer(delivery_id=0, tag=b"0")
    p.transfer(delivery_id=1, tag=b"1")
    flows = performatives(p.out(), d.Flow)  # half the window used: a FLOW reopens it
    assert flows[-1].incoming_window == 4 and flows[-1].next_incoming_id == 2
    for i in range(2, 6):
        p.transfer(delivery_id=i, tag=b"%d" % i)
    assert not of(p.events, ev.SessionEnded) and session.incoming_window == 0


def test_block_advertises_zero_but_accepts_transfers_already_allowed():
    p = ScriptedPeer()
    p.open()
    session = p.begin(server_window=10)
    p.attach(credit=100)
    session.block()
    flow = only(performatives(p.out()), d.Flow)
    assert flow.incoming_window == 0
    for i in range(10):  # sent before the peer saw our FLOW
        p.transfer(delivery_id=i, tag=b"%d" % i)
    assert len(of(p.events, ev.MessageReceived)) == 10 and not of(p.events, ev.SessionEnded)
    assert performatives(p.out(), d.Flow) == []  # still blocked: no refill
    p.transfer(delivery_id=10, tag=b"10")
    assert only(performatives(p.out()), d.End).error.condition == Condition.WINDOW_VIOLATION


def test_unblock_reopens_the_window():
    p = ScriptedPeer()
    p.open()
    session = p.begin(server_window=10)
    session.block()
    p.out()
    session.unblock()
    assert only(performatives(p.out()), d.Flow).incoming_window == 10


def test_session_echo_is_answered():
    p = ScriptedPeer()
    p.open()
    p.begin()
    p.send(d.Flow(next_incoming_id=0, incoming_window=100, next_outgoing_id=0, outgoing_window=100, echo=True))
    flow = only(performatives(p.out()), d.Flow)
    assert flow.handle is None and not flow.echo


# ------------------------------------------------------------------ handle-max


def test_handle_above_handle_max_is_a_framing_error():
    p = ScriptedPeer()
    p.open()
    session = p.send(BEGIN)[0].session
    session.begin(handle_max=1)
    p.out()
    p.attach(handle=1)
    p.send(d.Attach(name="x", handle=2, role=d.SENDER, initial_delivery_count=0))
    assert close_error(p.out()).condition == Condition.FRAMING_ERROR


def test_peer_handle_max_bounds_our_handles():
    p = Pair()
    p.connect()
    cs, ss = p.begin(client_kw=dict(handle_max=0))
    ss.create_link("a", d.SENDER)
    with pytest.raises(LocalProtocolError):
        ss.create_link("b", d.SENDER)


def test_peer_attaching_more_links_than_its_handle_max_is_an_internal_error():
    p = ScriptedPeer()
    p.open()
    p.send(d.Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10, handle_max=0))
    p.events[-1].session.begin()
    p.attach(handle=0)
    p.send(d.Attach(name="l2", handle=1, role=d.SENDER, initial_delivery_count=0))
    assert close_error(p.out()).condition == Condition.INTERNAL_ERROR


def test_handle_in_use():
    p = ScriptedPeer()
    p.open()
    p.begin()
    p.attach(handle=0)
    p.send(d.Attach(name="other", handle=0, role=d.SENDER, initial_delivery_count=0))
    assert only(performatives(p.out()), d.End).error.condition == Condition.HANDLE_IN_USE


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
