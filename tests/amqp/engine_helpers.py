"""Test helpers for the sans-I/O AMQP engine: byte-script builders, a decoder
for what an engine writes, an in-memory client/server pair and a scripted
peer that drives a server engine with hand-made bytes.

No sockets here (STYLE.md, h11): everything runs in memory.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from amqp import codec
from amqp import definitions as d
from amqp import events as ev
from amqp.connection import CLIENT, SERVER, Connection
from amqp.framing import AMQP_HEADER, FRAME_AMQP, FRAME_SASL, SASL_HEADER, encode_frame
from amqp.structs import FRAME_HEADER

__all__ = [
    "AMQP_HEADER",
    "SASL_HEADER",
    "FakeClock",
    "Pair",
    "ScriptedPeer",
    "Wire",
    "close_error",
    "decode_stream",
    "describe",
    "frame",
    "message",
    "performatives",
    "raw_frame",
    "sasl_frame",
]


# ------------------------------------------------------------------ building bytes


def frame(performative: Any, channel: int = 0, payload: bytes = b"") -> bytes:
    return encode_frame(channel, performative, payload)


def sasl_frame(performative: Any) -> bytes:
    return encode_frame(0, performative, type_=FRAME_SASL)


def raw_frame(body: bytes, channel: int = 0, type_: int = FRAME_AMQP, doff: int = 2, ext: bytes | None = None,
              size: int | None = None) -> bytes:  # fmt: skip
    """A frame from raw parts; `ext` is the extended header (doff*4 - 8 bytes,
    zeros by default), `size` overrides the size field for malformed cases."""
    if ext is None:
        ext = b"\x00" * max(0, doff * 4 - 8)
    total = 8 + len(ext) + len(body)
    return FRAME_HEADER.pack(total if size is None else size, doff, type_, channel) + ext + body


def message(body: bytes = b"hello") -> bytes:
    """A minimal message payload: one data section."""
    return d.Data(body).encode()


# ------------------------------------------------------------------ reading bytes


@dataclasses.dataclass
class Wire:
    """One item an engine wrote: a protocol header or a frame."""

    header: bytes | None = None
    type: int = FRAME_AMQP
    channel: int = 0
    performative: Any = None  # None for a heartbeat or a header
    payload: bytes = b""
    size: int = 0  # bytes the frame took on the wire

    def __repr__(self) -> str:
        if self.header is not None:
            return f"<header {self.header!r}>"
        if self.performative is None:
            return "<heartbeat>"
        return f"<ch{self.channel} {self.performative!r}{f' +{len(self.payload)}B' if self.payload else ''}>"


def decode_stream(data: bytes) -> list[Wire]:
    """Splits engine output into headers and frames. A frame never starts
    with b'AMQP' (that would be a 1 GB frame), so headers are recognised
    anywhere."""
    items: list[Wire] = []
    pos = 0
    while pos < len(data):
        if data[pos : pos + 4] == b"AMQP":
            items.append(Wire(header=bytes(data[pos : pos + 8]), size=8))
            pos += 8
            continue
        size, doff, type_, channel = FRAME_HEADER.unpack_from(data, pos)
        assert size >= 8 and doff >= 2 and pos + size <= len(data), f"engine wrote a bad frame at {pos}"
        body = data[pos + doff * 4 : pos + size]
        if body:
            perf, after = codec.decode(body)
            items.append(Wire(None, type_, channel, perf, bytes(body[after:]), size))
        else:
            items.append(Wire(None, type_, channel, None, b"", size))
        pos += size
    return items


def performatives(data: bytes | list[Wire], kind: type | None = None) -> list[Any]:
    items = decode_stream(data) if isinstance(data, (bytes, bytearray)) else data
    out = [w.performative for w in items if w.performative is not None]
    return [p for p in out if kind is None or type(p) is kind]


def close_error(data: bytes | list[Wire]) -> Any:
    """The error of the CLOSE in engine output (asserts there is exactly one)."""
    closes = performatives(data, d.Close)
    assert len(closes) == 1, f"expected one CLOSE, got {closes}"
    return closes[0].error


def describe(events: list) -> list[tuple]:
    """Events as plain tuples (engine objects replaced by their identifying
    fields), so that two runs of the same script can be compared."""

    def value(v: Any) -> Any:
        if isinstance(v, ev.Delivery):
            return ("delivery", v.id, v.tag, v.payload, v.settled, repr(v.state), v.remote_settled)
        if type(v).__name__ == "Session":
            return ("session", v.channel)
        if type(v).__name__ == "Link":
            return ("link", v.name, v.handle)
        if isinstance(v, list):
            return [value(x) for x in v]
        return repr(v)

    return [(type(e).__name__, *(value(getattr(e, f.name)) for f in dataclasses.fields(e))) for e in events]


class FakeClock:
    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


# ------------------------------------------------------------------ in-memory pair


class Pair:
    """A client and a server engine wired together in memory."""

    def __init__(self, client_kw: dict | None = None, server_kw: dict | None = None):
        self.client = Connection(CLIENT, container_id="client", **(client_kw or {}))
        self.server = Connection(SERVER, container_id="server", **(server_kw or {}))
        self.c2s: list[bytes] = []  # every chunk the client wrote
        self.s2c: list[bytes] = []

    def pump(self, limit: int = 100) -> tuple[list, list]:
        """Moves bytes both ways until both are quiet; returns (server_events, client_events)."""
        s_events: list = []
        c_events: list = []
        for _ in range(limit):
            a = self.client.data_to_send()
            if a:
                self.c2s.append(a)
                s_events += self.server.receive_data(a)
            b = self.server.data_to_send()
            if b:
                self.s2c.append(b)
                c_events += self.client.receive_data(b)
            if not a and not b:
                return s_events, c_events
        raise AssertionError("engines never went quiet")

    def connect(self, sasl: bool = True, hostname: str | None = None) -> tuple[list, list]:
        self.client.start(sasl=sasl)
        if sasl:
            _, c = self.pump()
            assert isinstance(c[0], ev.SaslMechanismsReceived), c
            self.client.sasl_init("ANONYMOUS", b"anonymous")
            s, _ = self.pump()
            assert isinstance(s[0], ev.SaslInitReceived), s
            self.server.sasl_outcome(True)
            _, c = self.pump()
            assert c == [ev.SaslOutcomeReceived(0)], c
        self.client.open(hostname=hostname)
        s, _ = self.pump()
        assert isinstance(s[0], ev.ConnectionOpened), s
        self.server.open()
        s2, c = self.pump()
        assert isinstance(c[0], ev.ConnectionOpened), c
        return s + s2, c

    def begin(self, client_kw: dict | None = None, server_kw: dict | None = None):
        """A session begun by the client; returns (client_session, server_session)."""
        cs = self.client.create_session()
        cs.begin(**(client_kw or {}))
        s, _ = self.pump()
        assert isinstance(s[0], ev.SessionBegun), s
        ss = s[0].session
        ss.begin(**(server_kw or {}))
        _, c = self.pump()
        assert isinstance(c[0], ev.SessionBegun) and c[0].session is cs, c
        return cs, ss

    def attach(self, cs, ss, name: str, role: bool, address: str = "q", credit: int = 0,
               client_kw: dict | None = None, server_kw: dict | None = None):  # fmt: skip
        """A link from the client with `role` (the client's role); the server
        answers and, as receiver, grants `credit`. Returns (client_link, server_link)."""
        cl = cs.create_link(name, role)
        source = d.Source(address=address) if role == d.RECEIVER else d.Source()
        target = d.Target(address=address) if role == d.SENDER else d.Target()
        cl.attach(source=source, target=target, **(client_kw or {}))
        s, _ = self.pump()
        attached = [e for e in s if isinstance(e, ev.LinkAttached)]
        assert attached, s
        sl = attached[0].link
        assert sl.session is ss
        sl.attach(source=attached[0].attach.source, target=attached[0].attach.target, **(server_kw or {}))
        if credit and not sl.is_sender:
            sl.flow(link_credit=credit)
        _, c = self.pump()
        assert any(isinstance(e, ev.LinkAttached) and e.link is cl for e in c), c
        return cl, sl


# ------------------------------------------------------------------ scripted peer


class ScriptedPeer:
    """Plays the client by hand against a server engine (no SASL by default):
    the test writes frames, the server's replies are decoded for asserts."""

    def __init__(self, **server_kw: Any):
        server_kw.setdefault("require_sasl", False)
        self.server = Connection(SERVER, container_id="server", **server_kw)
        self.events: list = []

    def feed(self, *chunks: bytes) -> list:
        events = []
        for c in chunks:
            events += self.server.receive_data(c)
        self.events += events
        return events

    def send(self, performative: Any, channel: int = 0, payload: bytes = b"") -> list:
        return self.feed(frame(performative, channel, payload))

    def out(self) -> list[Wire]:
        return decode_stream(self.server.data_to_send())

    def open(self, max_frame_size: int = 65536, **kw: Any) -> list[Wire]:
        """Header and OPEN, answered by the server's header and OPEN."""
        events = self.feed(AMQP_HEADER, frame(d.Open(container_id="peer", max_frame_size=max_frame_size, **kw)))
        assert isinstance(events[-1], ev.ConnectionOpened), events
        self.server.open()
        return self.out()

    def begin(self, channel: int = 0, incoming_window: int = 100, server_window: int | None = None,
              **kw: Any):  # fmt: skip
        """BEGIN from the peer, answered by the server; returns the server Session."""
        events = self.send(
            d.Begin(next_outgoing_id=0, incoming_window=incoming_window, outgoing_window=1000, **kw), channel
        )
        assert isinstance(events[-1], ev.SessionBegun), events
        session = events[-1].session
        session.begin(incoming_window=server_window)
        self.out()
        return session

    def attach(self, name: str = "l", handle: int = 0, role: bool = d.SENDER, channel: int = 0,
               credit: int = 10, answer: bool = True, **kw: Any):  # fmt: skip
        """ATTACH from the peer with `role` (the peer's role). The server
        answers and, as receiver, grants `credit`. Returns the server Link."""
        kw.setdefault("source", d.Source(address="q"))
        kw.setdefault("target", d.Target(address="q"))
        if role == d.SENDER:
            kw.setdefault("initial_delivery_count", 0)
        events = self.send(d.Attach(name=name, handle=handle, role=role, **kw), channel)
        attached = [e for e in events if isinstance(e, ev.LinkAttached)]
        assert attached, events
        link = attached[0].link
        if answer:
            link.attach(source=kw["source"], target=kw["target"])
            if not link.is_sender and credit:
                link.flow(link_credit=credit)
            self.out()
        return link

    def transfer(self, handle: int = 0, delivery_id: int | None = 0, tag: bytes | None = b"t",
                 payload: bytes = b"x", channel: int = 0, **kw: Any) -> list:  # fmt: skip
        return self.send(d.Transfer(handle=handle, delivery_id=delivery_id, delivery_tag=tag, **kw), channel,
                         payload)  # fmt: skip

    def closed_with(self) -> str | None:
        """The condition of the ConnectionClosed event the server reported."""
        closed = [e for e in self.events if isinstance(e, ev.ConnectionClosed)]
        assert closed, self.events
        return closed[-1].error.condition if closed[-1].error else None


# ------------------------------------------------------------------ shared by the engine tests

BEGIN = d.Begin(next_outgoing_id=0, incoming_window=100, outgoing_window=100)


def of(events: list, kind: type) -> list:
    return [e for e in events if isinstance(e, kind)]


def only(items: list, kind: type) -> Any:
    found = [x for x in items if type(x) is kind]
    assert len(found) == 1, items
    return found[0]
