"""Protocol headers [2.2], frames [2.3] and SASL [5.3] on the sans-I/O engine:
header negotiation, incremental parsing of a stream cut anywhere, heartbeats,
max-frame-size and extended frame headers."""

from __future__ import annotations

import random

import pytest
from engine_helpers import (
    AMQP_HEADER,
    SASL_HEADER,
    ScriptedPeer,
    close_error,
    decode_stream,
    describe,
    frame,
    message,
    raw_frame,
    sasl_frame,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from amqp import definitions as d
from amqp import events as ev
from amqp.connection import CLIENT, SERVER, Connection
from amqp.errors import Condition
from amqp.framing import HEARTBEAT, TLS_HEADER, Frame, FrameParser, ProtocolHeader

OPEN = frame(d.Open(container_id="peer", max_frame_size=65536))


def server(**kw) -> Connection:
    return Connection(SERVER, container_id="server", **kw)


# ------------------------------------------------------------------ header negotiation


def test_sasl_then_amqp():
    s = server()
    assert s.receive_data(SASL_HEADER) == []
    out = decode_stream(s.data_to_send())
    assert out[0].header == SASL_HEADER
    assert out[1].type == 1 and out[1].performative == d.SaslMechanisms(sasl_server_mechanisms=["PLAIN", "ANONYMOUS"])

    events = s.receive_data(sasl_frame(d.SaslInit(mechanism="PLAIN", initial_response=b"\x00u\x00p")))
    assert events == [ev.SaslInitReceived("PLAIN", b"\x00u\x00p", None)]
    s.sasl_outcome(True)
    out = decode_stream(s.data_to_send())
    assert [(w.type, w.performative) for w in out] == [(1, d.SaslOutcome(code=0))]

    assert s.receive_data(AMQP_HEADER) == []
    assert decode_stream(s.data_to_send())[0].header == AMQP_HEADER
    events = s.receive_data(OPEN)
    assert isinstance(events[0], ev.ConnectionOpened)
    assert s.sasl_done and not s.closed


def test_amqp_without_sasl_when_not_required():
    s = server(require_sasl=False)
    assert s.receive_data(AMQP_HEADER + OPEN)[0].open.container_id == "peer"
    assert decode_stream(s.data_to_send())[0].header == AMQP_HEADER


def test_sasl_still_offered_when_not_required():
    s = server(require_sasl=False)
    s.receive_data(SASL_HEADER)
    assert decode_stream(s.data_to_send())[0].header == SASL_HEADER


def test_amqp_header_refused_when_sasl_required():
    s = server()
    events = s.receive_data(AMQP_HEADER + OPEN)
    assert s.data_to_send() == SASL_HEADER
    assert s.closed
    assert [type(e) for e in events] == [ev.ConnectionClosed]
    assert events[0].error.condition == Condition.NOT_ALLOWED and not events[0].remote


@pytest.mark.parametrize(
    "header",
    [
        TLS_HEADER,
        b"AMQP\x00\x00\x09\x01",  # AMQP 0-9-1
        b"AMQP\x00\x01\x00\x01",  # 1.0.1
        b"AMQP\x03\x01\x00\x01",
        b"GET / HTTP/1.1\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01",  # a TLS ClientHello
        b"B",  # garbage noticed before a whole header arrived
        b"AMQX",
    ],
)
@pytest.mark.parametrize("require_sasl", [True, False])
def test_unsupported_header_answered_with_ours_then_closed(header, require_sasl):
    s = server(require_sasl=require_sasl)
    events = s.receive_data(header)
    assert s.data_to_send() == SASL_HEADER  # SASL is offered either way, so it is what we speak first
    assert s.closed
    assert len(events) == 1 and isinstance(events[0], ev.ConnectionClosed)
    assert events[0].error.condition in (Condition.NOT_ALLOWED, Condition.FRAMING_ERROR)
    assert s.receive_data(AMQP_HEADER) == [] and s.data_to_send() == b""


@pytest.mark.parametrize("header", [SASL_HEADER, TLS_HEADER, b"HTTP/1.1"])
def test_bad_header_after_sasl_answered_with_amqp_header(header):
    s = server()
    s.receive_data(SASL_HEADER + sasl_frame(d.SaslInit(mechanism="ANONYMOUS")))
    s.sasl_outcome(True)
    s.data_to_send()
    events = s.receive_data(header)
    assert s.data_to_send() == AMQP_HEADER
    assert s.closed and isinstance(events[0], ev.ConnectionClosed)


def test_header_fed_byte_by_byte():
    s = server(require_sasl=False)
    for b in AMQP_HEADER:
        assert s.receive_data(bytes([b])) == []
    assert s.data_to_send() == AMQP_HEADER
    assert not s.closed


def test_failed_sasl_outcome_closes():
    s = server()
    s.receive_data(SASL_HEADER + sasl_frame(d.SaslInit(mechanism="PLAIN", initial_response=b"\x00u\x00bad")))
    s.sasl_outcome(False)
    out = decode_stream(s.data_to_send())
    assert out[-1].performative == d.SaslOutcome(code=d.SASL_AUTH)
    assert s.closed


def test_sasl_frame_of_wrong_kind_from_client():
    s = server()
    events = s.receive_data(SASL_HEADER + sasl_frame(d.SaslOutcome(code=0)))
    assert s.closed and events[-1].error.condition == Condition.NOT_ALLOWED


def test_amqp_frame_during_sasl_is_a_framing_error():
    s = server()
    events = s.receive_data(SASL_HEADER + OPEN)
    assert s.closed and events[-1].error.condition == Condition.FRAMING_ERROR


def test_sasl_frame_after_sasl_is_a_framing_error():
    p = ScriptedPeer()
    p.open()
    p.feed(sasl_frame(d.SaslInit(mechanism="ANONYMOUS")))
    assert close_error(p.out()).condition == Condition.FRAMING_ERROR


def test_sasl_pipelined_by_client_waits_for_outcome():
    """A client may send its AMQP header and OPEN right behind the SASL init;
    they wait in the buffer until the application gives the outcome."""
    s = server()
    script = (
        SASL_HEADER + sasl_frame(d.SaslInit(mechanism="ANONYMOUS")) + AMQP_HEADER + OPEN
    )  # fmt: skip
    events = s.receive_data(script)
    assert [type(e) for e in events] == [ev.SaslInitReceived]
    s.sasl_outcome(True)
    events = s.receive_data(b"")
    assert [type(e) for e in events] == [ev.ConnectionOpened]
    out = decode_stream(s.data_to_send())
    assert [w.header for w in out if w.header] == [SASL_HEADER, AMQP_HEADER]


def test_client_sasl_exchange():
    c = Connection(CLIENT)
    c.start()
    assert c.data_to_send() == SASL_HEADER
    events = c.receive_data(SASL_HEADER + sasl_frame(d.SaslMechanisms(sasl_server_mechanisms=["ANONYMOUS"])))
    assert events == [ev.SaslMechanismsReceived(["ANONYMOUS"])]
    c.sasl_init("ANONYMOUS")
    assert decode_stream(c.data_to_send())[0].performative == d.SaslInit(mechanism="ANONYMOUS")
    # the outcome, the AMQP header and the server's OPEN in one read
    events = c.receive_data(sasl_frame(d.SaslOutcome(code=0)) + AMQP_HEADER + OPEN)
    assert [type(e) for e in events] == [ev.SaslOutcomeReceived, ev.ConnectionOpened]
    assert c.data_to_send() == AMQP_HEADER


def test_client_refuses_wrong_header_from_server():
    c = Connection(CLIENT)
    c.start(sasl=False)
    c.data_to_send()
    events = c.receive_data(SASL_HEADER)
    assert c.closed and isinstance(events[0], ev.ConnectionClosed)


# ------------------------------------------------------------------ frames


def test_heartbeats_are_accepted_anywhere_and_produce_no_events():
    s = server(require_sasl=False)
    assert s.receive_data(AMQP_HEADER + HEARTBEAT + OPEN + HEARTBEAT * 3)[0].open.container_id == "peer"
    s.open()
    s.data_to_send()
    assert s.receive_data(HEARTBEAT) == []
    assert s.receive_data(raw_frame(b"", doff=5)) == []  # an empty frame with an extended header
    assert not s.closed


@pytest.mark.parametrize("doff", [3, 4, 16, 255])
def test_extended_header_is_skipped(doff):
    ext = bytes(i % 256 for i in range(doff * 4 - 8))
    s = server(require_sasl=False)
    body = d.Open(container_id="ext", max_frame_size=4096).encode()
    events = s.receive_data(AMQP_HEADER + raw_frame(body, doff=doff, ext=ext))
    assert events[0].open.container_id == "ext"
    s.open()
    s.data_to_send()
    begin = d.Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10).encode()
    events = s.receive_data(raw_frame(begin, doff=doff, ext=ext))
    assert isinstance(events[0], ev.SessionBegun)


def test_frame_at_max_frame_size_is_accepted_and_one_byte_more_is_not():
    p = ScriptedPeer(max_frame_size=1024)
    p.open()
    p.begin()
    p.attach()
    overhead = len(frame(d.Transfer(handle=0, delivery_id=0, delivery_tag=b"t")))
    events = p.transfer(payload=b"x" * (1024 - overhead))
    assert len(events[0].delivery.payload) == 1024 - overhead and not p.server.closed
    events = p.transfer(delivery_id=1, payload=b"x" * (1025 - overhead))
    assert p.server.closed and events[0].error.condition == Condition.FRAMING_ERROR
    assert close_error(p.out()).condition == Condition.FRAMING_ERROR


def test_largest_empty_frame_is_accepted():
    p = ScriptedPeer()
    p.open()
    assert p.feed(raw_frame(b"", doff=255)) == [] and not p.server.closed


def test_oversized_frame_is_refused_on_its_header_alone():
    s = server(require_sasl=False, max_frame_size=4096)
    s.receive_data(AMQP_HEADER + OPEN)
    s.open()
    s.data_to_send()
    events = s.receive_data(b"\x40\x00\x00\x00\x02\x00\x00\x00")  # announces 1 GiB
    assert s.closed and events[0].error.condition == Condition.FRAMING_ERROR
    assert s.parser.buffered == 0 or s.closed


@pytest.mark.parametrize(
    "bad",
    [
        b"\x00\x00\x00\x07\x02\x00\x00\x00",  # size below 8
        b"\x00\x00\x00\x10\x01\x00\x00\x00" + b"\x00" * 8,  # doff below 2
        b"\x00\x00\x00\x0c\x04\x00\x00\x00" + b"\x00" * 4,  # doff*4 beyond size
        b"\x00\x00\x00\x08\x02\x05\x00\x00",  # unknown frame type
    ],
)
def test_malformed_frame_header_is_a_framing_error(bad):
    p = ScriptedPeer()
    p.open()
    events = p.feed(bad)
    assert events[0].error.condition == Condition.FRAMING_ERROR
    assert close_error(p.out()).condition == Condition.FRAMING_ERROR


def test_malformed_frame_header_before_open_is_answered_with_open_and_close():
    s = server(require_sasl=False)
    s.receive_data(AMQP_HEADER + b"\x00\x00\x00\x07\x02\x00\x00\x00")
    out = decode_stream(s.data_to_send())
    assert out[0].header == AMQP_HEADER
    assert [type(w.performative) for w in out[1:]] == [d.Open, d.Close]
    assert out[2].performative.error.condition == Condition.FRAMING_ERROR


# ------------------------------------------------------------------ incremental parsing


def _parser_items(chunks: list[bytes]) -> list:
    parser = FrameParser()
    items = []
    for c in chunks:
        parser.feed(c)
        while (item := parser.next()) is not None:
            items.append(item)
            if isinstance(item, ProtocolHeader):
                parser.expect_header = False
            elif isinstance(item, Frame) and item.type == 1 and type(item.performative) is d.SaslOutcome:
                parser.expect_header = True
    return items


def _parser_stream() -> bytes:
    return b"".join(
        [
            SASL_HEADER,
            sasl_frame(d.SaslInit(mechanism="ANONYMOUS")),
            sasl_frame(d.SaslOutcome(code=0)),
            AMQP_HEADER,
            OPEN,
            HEARTBEAT,
            raw_frame(d.Begin(next_outgoing_id=0, incoming_window=5, outgoing_window=5).encode(), doff=7, channel=3),
            frame(d.Transfer(handle=0, delivery_id=0, delivery_tag=b"t"), 3, b"p" * 300),
            frame(d.Close()),
        ]
    )


def _cuts(data: bytes, positions: list[int]) -> list[bytes]:
    points = sorted({p % (len(data) + 1) for p in positions})
    out, prev = [], 0
    for p in points + [len(data)]:
        out.append(data[prev:p])
        prev = p
    return out


def test_parser_whole_and_byte_by_byte_agree():
    data = _parser_stream()
    whole = _parser_items([data])
    assert len(whole) == 9
    assert repr(_parser_items([bytes([b]) for b in data])) == repr(whole)
    assert repr(_parser_items([data, b""])) == repr(whole)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=1 << 20), max_size=40))
def test_parser_random_cuts_agree(positions):
    data = _parser_stream()
    assert repr(_parser_items(_cuts(data, positions))) == repr(_parser_items([data]))


# A connection-level script: the setup (SASL, OPEN, BEGIN, one link each way)
# is fed first and answered by the test; the stream under test then needs no
# application reaction, so any cutting of it must give the same events.


def _setup_server() -> tuple[Connection, list]:
    s = server()
    events = s.receive_data(SASL_HEADER + sasl_frame(d.SaslInit(mechanism="ANONYMOUS")))
    s.sasl_outcome(True)
    events += s.receive_data(AMQP_HEADER + OPEN)
    s.open()
    events += s.receive_data(frame(d.Begin(next_outgoing_id=0, incoming_window=100, outgoing_window=100)))
    session = events[-1].session
    session.begin(incoming_window=100)
    events += s.receive_data(
        frame(d.Attach(name="in", handle=0, role=d.SENDER, source=d.Source(), target=d.Target(address="q"),
                       initial_delivery_count=0))
        + frame(d.Attach(name="out", handle=1, role=d.RECEIVER, source=d.Source(address="q"), target=d.Target()))
    )  # fmt: skip
    rcv, snd = events[-2].link, events[-1].link
    rcv.attach(source=d.Source(), target=d.Target(address="q"))
    rcv.flow(link_credit=50)
    snd.attach(source=d.Source(address="q"), target=d.Target())
    s.data_to_send()
    return s, [rcv, snd]


def _stream_under_test() -> bytes:
    big = message(b"B" * 3000)
    parts = [
        frame(d.Transfer(handle=0, delivery_id=0, delivery_tag=b"a"), 0, message(b"one")),
        HEARTBEAT,
        frame(d.Transfer(handle=0, delivery_id=1, delivery_tag=b"b", more=True), 0, big[:1000]),
        raw_frame(d.Transfer(handle=0, more=True).encode() + big[1000:2000], doff=4),
        frame(d.Transfer(handle=0), 0, big[2000:]),
        frame(d.Transfer(handle=0, delivery_id=2, delivery_tag=b"c", more=True), 0, b"partial"),
        frame(d.Transfer(handle=0, aborted=True)),
        frame(d.Transfer(handle=0, delivery_id=3, delivery_tag=b"d", settled=True), 0, message(b"pre")),
        frame(d.Flow(next_incoming_id=0, incoming_window=100, next_outgoing_id=4, outgoing_window=100, handle=1,
                     delivery_count=0, link_credit=7, echo=True)),
        frame(d.Flow(next_incoming_id=0, incoming_window=100, next_outgoing_id=4, outgoing_window=100, echo=True)),
        frame(d.Disposition(role=d.RECEIVER, first=0, last=5, settled=True, state=d.Accepted())),
        frame(d.Detach(handle=1, closed=True)),
        frame(d.Detach(handle=0, closed=True)),
        frame(d.End()),
        frame(d.Close()),
    ]  # fmt: skip
    return b"".join(parts)


def _run_stream(chunks: list[bytes]) -> tuple[list, bytes]:
    s, _ = _setup_server()
    events: list = []
    out = bytearray()
    for c in chunks:
        events += s.receive_data(c)
        out += s.data_to_send()
    return describe(events), bytes(out)


def test_connection_whole_byte_by_byte_and_trailing_data_agree():
    data = _stream_under_test()
    whole, out = _run_stream([data])
    kinds = [e[0] for e in whole]
    assert kinds == [
        "MessageReceived", "MessageReceived", "DeliveryAborted", "MessageReceived", "LinkFlow",
        "LinkDetached", "LinkDetached", "SessionEnded", "ConnectionClosed",
    ]  # fmt: skip
    assert _run_stream([bytes([b]) for b in data])[0] == whole
    # bytes after the CLOSE are ignored
    assert _run_stream([data + HEARTBEAT + b"junk"])[0] == whole


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=1 << 20), max_size=30))
def test_connection_random_cuts_agree(positions):
    data = _stream_under_test()
    assert _run_stream(_cuts(data, positions))[0] == _run_stream([data])[0]


def test_random_cuts_of_a_whole_sasl_conversation_agree():
    """With SASL pipelined behind the init, the outcome is given as soon as
    the init is seen, whatever the cutting."""
    script = (
        SASL_HEADER + sasl_frame(d.SaslInit(mechanism="ANONYMOUS")) + AMQP_HEADER + OPEN
        + frame(d.Begin(next_outgoing_id=0, incoming_window=100, outgoing_window=100)) + frame(d.End())
        + frame(d.Close())
    )  # fmt: skip

    def run(chunks):
        s = server()
        seen = []
        for c in chunks + [b""]:
            events = s.receive_data(c)
            seen += describe(events)
            for e in events:
                if isinstance(e, ev.SaslInitReceived):
                    s.sasl_outcome(True)
                    events2 = s.receive_data(b"")
                    seen += describe(events2)
        return seen

    whole = run([script])
    assert [e[0] for e in whole] == [
        "SaslInitReceived", "ConnectionOpened", "SessionBegun", "SessionEnded", "ConnectionClosed",
    ]  # fmt: skip
    rng = random.Random(7)
    for _ in range(50):
        cuts = _cuts(script, [rng.randrange(len(script)) for _ in range(rng.randrange(1, 12))])
        assert run(cuts) == whole
