"""Connection and session endpoints [2.4], [2.5] driven in memory: OPEN/CLOSE,
idle timeout, channel-max, max-frame-size, sessions, windows and handle-max."""

from __future__ import annotations

import pytest
from engine_helpers import (
    AMQP_HEADER,
    BEGIN,
    FakeClock,
    Pair,
    ScriptedPeer,
    close_error,
    decode_stream,
    frame,
    message,
    of,
    only,
    performatives,
    raw_frame,
)

from amqp import codec
from amqp import definitions as d
from amqp import events as ev
from amqp.errors import Condition, LocalProtocolError
from amqp.framing import HEARTBEAT, MAX_DESCRIPTION
from amqp.types import Described, ULong

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
