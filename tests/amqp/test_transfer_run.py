"""The publisher's TRANSFER run (amqp/transfer_run.py) does what the generic path does.

The same bytes go to two server engines, one with the run and one without:
events, what each writes back and the session and link state must be equal,
whatever the frames (well formed or not, within the rules or not) and however
the bytes are cut."""

from __future__ import annotations

from engine_helpers import ScriptedPeer, describe, frame, raw_frame
from hypothesis import given, settings
from hypothesis import strategies as st

from amqp import definitions as d
from amqp import events as ev
from amqp.connection import Connection
from amqp.structs import U32
from amqp.transfer_run import take_transfers

PROTON_MESSAGE = bytes.fromhex("005370c0020141 005373 45 005375a00c") + b"x" * 12


def _uint(kind: str, v: int) -> bytes:
    if kind == "uint0":
        return b"\x43"
    if kind == "smalluint":
        return bytes((0x52, v & 0xFF))
    if kind == "uint":
        return b"\x70" + U32.pack(v)
    return b"\x40"  # null


def transfer_body(handle: bytes, delivery_id: bytes, tag: bytes | None, fmt: bytes | None, settled: bytes | None,
                  extra: bytes = b"", count: int | None = None) -> bytes:  # fmt: skip
    """A TRANSFER as a list8 from already encoded fields (None: the list ends before it)."""
    fields = [handle, delivery_id]
    for f in (b"\xa0" + bytes((len(tag),)) + tag if tag is not None else None, fmt, settled):
        if f is None:
            break
        fields.append(f)
    encoded = b"".join(fields) + extra
    n = len(fields) if count is None else count
    return b"\x00\x53\x14\xc0" + bytes((len(encoded) + 1, n)) + encoded


usual = st.just


@st.composite
def transfer_frames(draw) -> bytes:
    """Mostly TRANSFER frames in the encodings the run takes, each field now and then in
    another encoding or of another type, and some frames that it must leave alone."""
    kind = draw(st.sampled_from(["simple"] * 12 + ["more", "state", "flow", "garbage", "channel1", "oversize",
                                                   "count", "doff", "padded"]))  # fmt: skip

    def pick(common: bytes, *odd: bytes) -> bytes:
        return draw(st.sampled_from([common] * 4 + list(odd)))

    n = draw(st.integers(0, 300))
    handle = pick(b"\x43", b"\x52\x00", b"\x70\x00\x00\x00\x00", b"\x52\x01", b"\x52\x02", b"\x52\x03",
                  b"\x40", b"\xa1\x00")  # fmt: skip
    delivery_id = pick(bytes((0x52, n % 256)), b"\x70" + U32.pack(n * 40503 % 2**32), b"\x43", b"\x40",
                       b"\x53\x01", b"\x52")  # fmt: skip
    tag = draw(st.sampled_from([bytes(8)] * 4 + [None, b"", b"t" * 32, b"u" * 40]))
    fmt = pick(b"\x43", b"\x40", b"\x52\x07", b"\x70\x00\x00\x01\x00", b"\xa1\x01a", None)
    settled = pick(None, b"\x41", b"\x42", b"\x40", b"\x43", b"\x56\x01") if fmt is not None else None
    payload = draw(st.sampled_from([PROTON_MESSAGE] * 3 + [b"", b"\x00\x53\x75\xa0\x01z"]))
    channel = 1 if kind == "channel1" else 0
    if kind == "more":
        body = transfer_body(handle, delivery_id, tag or b"t", b"\x43", b"\x42", b"\x41", count=6)
    elif kind == "state":
        return frame(d.Transfer(handle=0, delivery_id=n, delivery_tag=b"s", state=d.Accepted()), payload=payload)
    elif kind == "flow":
        return frame(d.Flow(next_incoming_id=n, incoming_window=5, next_outgoing_id=0, outgoing_window=100,
                            handle=0, delivery_count=n % 7, link_credit=n % 5))  # fmt: skip
    elif kind == "garbage":
        return raw_frame(b"\x00\x53\x14\xc0" + draw(st.binary(max_size=12)))
    elif kind == "padded":  # the list8 says one byte more than its fields take
        body = transfer_body(handle, delivery_id, tag, fmt, settled, extra=b"\x40", count=4 + (settled is not None))
    elif kind == "count":
        body = transfer_body(handle, delivery_id, tag, fmt, settled, count=n % 13)
    else:
        body = transfer_body(handle, delivery_id, tag, fmt, settled)
    if kind == "oversize":
        payload = b"\x00\x53\x75\xb0" + U32.pack(600) + b"o" * 600
    if kind == "doff":
        return raw_frame(body + payload, channel, doff=3)
    return raw_frame(body + payload, channel)


def _server(run: bool, credit: int, window: int, max_message_size: int) -> tuple[ScriptedPeer, object]:
    peer = ScriptedPeer(max_frame_size=512)
    peer.server.transfer_run = run
    peer.open()
    peer.begin(channel=0, server_window=window)
    link = peer.attach("pub", handle=0, credit=credit)
    link.max_message_size = max_message_size
    peer.attach("sub", handle=1, role=d.RECEIVER)  # the server sends on it: a transfer there is an error
    peer.attach("pub2", handle=2, credit=1)
    return peer, link


def _state(peer: ScriptedPeer) -> tuple:
    conn = peer.server
    out = [(s.next_incoming_id, s.incoming_window, s.remote_outgoing_window, s.flow_due, sorted(s.incoming_unsettled),
            [(lk.handle, lk.link_credit, lk.delivery_count, lk.detach_sent) for lk in s.links.values()])
           for s in conn.sessions.values()]  # fmt: skip
    return conn.phase, conn.parser.pos, len(conn.parser.buf), out


@settings(max_examples=300, deadline=None)
@given(
    frames=st.lists(transfer_frames(), min_size=1, max_size=16),
    cuts=st.lists(st.integers(1, 200), max_size=6),
    credit=st.integers(0, 12),
    window=st.integers(1, 12),
    max_message_size=st.sampled_from([0, 0, 20]),
    settle=st.booleans(),
)
def test_the_run_and_the_generic_path_agree(frames, cuts, credit, window, max_message_size, settle):
    data = b"".join(frames)
    chunks, pos = [], 0
    for cut in cuts:
        chunks.append(data[pos : pos + cut])
        pos += cut
    chunks.append(data[pos:])
    results = []
    for run in (True, False):
        peer, _ = _server(run, credit, window, max_message_size)
        events, written = [], b""
        for chunk in chunks:
            got = peer.server.receive_data(chunk)
            for e in got:
                if settle and type(e) is ev.MessageReceived and not e.delivery.settled:
                    e.link.session.settle(e.delivery, d.Accepted())
            events += got
            written += peer.server.data_to_send()
        formats = [e.delivery.message_format for e in events if type(e) is ev.MessageReceived]
        results.append((describe(events), formats, written, _state(peer)))
    assert results[0] == results[1]


def test_a_proton_publishers_transfers_take_the_run():
    """The frames qpid-proton (arrow, and most clients) sends for a whole message are taken in the run,
    none left for the generic path."""
    peer, link = _server(True, credit=100, window=100, max_message_size=0)
    data = b"".join(
        raw_frame(
            transfer_body(b"\x43", _uint("smalluint", i) if i else b"\x43", bytes(8), b"\x43", None) + PROTON_MESSAGE
        )  # fmt: skip
        for i in range(50)
    )
    peer.server.parser.feed(data)
    events: list = []
    take_transfers(peer.server, events)
    assert peer.server.parser.buffered == 0
    assert [e.delivery.id for e in events] == list(range(50))
    assert all(type(e) is ev.MessageReceived and e.delivery.payload == PROTON_MESSAGE for e in events)
    assert link.link_credit == 50 and link.delivery_count == 50
    assert sorted(link.session.incoming_unsettled) == list(range(50))


def test_the_run_stops_where_the_rules_need_the_generic_path():
    """No credit left: the run leaves the frame, and the generic path detaches the link with
    transfer-limit-exceeded, as without the run."""
    peer, link = _server(True, credit=2, window=100, max_message_size=0)
    frames = [raw_frame(transfer_body(b"\x43", _uint("smalluint", i), b"t", b"\x43", None) + PROTON_MESSAGE)
              for i in range(3)]  # fmt: skip
    events = peer.feed(b"".join(frames))
    assert [type(e) for e in events] == [ev.MessageReceived, ev.MessageReceived, ev.LinkDetached]
    assert events[-1].error.condition == "amqp:link:transfer-limit-exceeded"
    assert Connection.transfer_run is True


def test_a_whole_frame_after_a_first_part_is_its_continuation():
    """A frame that looks like a whole message but follows a part with more=true continues that
    delivery (the generic path's rules), in both paths."""
    results = []
    for run in (True, False):
        peer, link = _server(run, credit=10, window=100, max_message_size=0)
        first = raw_frame(transfer_body(b"\x43", b"\x43", b"t", b"\x43", b"\x42", b"\x41", count=6) + b"\x00\x53")
        rest = raw_frame(transfer_body(b"\x43", b"\x43", b"t", b"\x43", None) + b"\x75\xa0\x01z")
        events = peer.feed(first + rest)
        assert [type(e) for e in events] == [ev.MessageReceived]
        assert events[0].delivery.payload == b"\x00\x53\x75\xa0\x01z" and link.link_credit == 9
        results.append(describe(events))
    assert results[0] == results[1]
