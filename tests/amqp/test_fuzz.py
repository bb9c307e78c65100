"""Fuzzing the server engine (STYLE.md, h11): whatever bytes a peer sends,
`receive_data()` and `data_to_send()` raise nothing, the connection either
keeps going or ends with an AMQP error condition, and what the engine writes
stays well-formed (valid frames, within the peer's max-frame-size, nothing
after CLOSE).

Inputs: a full client conversation (SASL, OPEN, sessions, links both ways,
single and multi-frame transfers, dispositions, DETACH, END, CLOSE) mutated
at the byte and at the frame level, plus random performatives built from the
definitions with random field values, fed in random cuts to a server engine
driven by the mini broker. Every case has its own seed; a failure names it.

500 cases always; 10,000 with the `slow` marker (`pytest -m slow`) or when
the CI environment variable is set.
"""

from __future__ import annotations

import os
import random
import traceback
import uuid

import pytest
from engine_helpers import AMQP_HEADER, SASL_HEADER, decode_stream, frame, message, raw_frame, sasl_frame
from mini_server import BrokerHandler, Store

from amqp import codec
from amqp import definitions as d
from amqp import events as ev
from amqp.connection import CLIENT, SERVER, Connection
from amqp.framing import HEARTBEAT, MIN_MAX_FRAME_SIZE
from amqp.types import (
    Array,
    Byte,
    Char,
    Described,
    Float,
    Int,
    Short,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
    UShort,
)

SMALL_RUN = 500
BIG_RUN = 10_000
MAX_CHUNKS = 400  # bounds the feeding loop of one case


# ------------------------------------------------------------------ the valid conversation


def conversation(rng: random.Random) -> list[bytes]:
    """A complete, valid client conversation as a list of wire units."""
    mfs = rng.choice([512, 1024, 65536])
    big = message(bytes(rng.randrange(256) for _ in range(rng.choice([600, 3000]))))
    chunk = mfs - 64
    parts = [
        SASL_HEADER,
        sasl_frame(d.SaslInit(mechanism=rng.choice(["ANONYMOUS", "PLAIN"]), initial_response=b"\x00guest\x00guest")),
        AMQP_HEADER,
        frame(d.Open(container_id="fuzz", max_frame_size=mfs, channel_max=rng.choice([1, 7]),
                     idle_time_out=rng.choice([None, 1000]))),
        frame(d.Begin(next_outgoing_id=0, incoming_window=rng.choice([1, 2, 100]), outgoing_window=100,
                      handle_max=rng.choice([None, 1, 3]))),
        frame(d.Attach(name="snd", handle=0, role=d.SENDER, source=d.Source(), target=d.Target(address="q"),
                       initial_delivery_count=rng.choice([0, 0xFFFFFFFE]),
                       snd_settle_mode=rng.choice([0, 1, 2]))),
        frame(d.Attach(name="rcv", handle=1, role=d.RECEIVER, source=d.Source(address="q"), target=d.Target(),
                       rcv_settle_mode=rng.choice([0, 1]))),
        frame(d.Flow(next_incoming_id=0, incoming_window=100, next_outgoing_id=0, outgoing_window=100, handle=1,
                     delivery_count=0, link_credit=rng.choice([1, 10]), drain=rng.random() < 0.3)),
        frame(d.Transfer(handle=0, delivery_id=0, delivery_tag=b"a"), 0, message(b"one")),
        frame(d.Transfer(handle=0, delivery_id=1, delivery_tag=b"b", settled=True), 0, message(b"two")),
    ]  # fmt: skip
    pos, first = 0, True
    while pos < len(big):
        more = pos + chunk < len(big)
        t = (
            d.Transfer(handle=0, delivery_id=2, delivery_tag=b"c", more=more)
            if first
            else d.Transfer(handle=0, more=more)
        )
        parts.append(frame(t, 0, big[pos : pos + chunk]))
        pos += chunk
        first = False
    parts += [
        frame(d.Transfer(handle=0, delivery_id=3, delivery_tag=b"d", more=True), 0, b"partial"),
        frame(d.Transfer(handle=0, aborted=True)),
        HEARTBEAT,
        frame(d.Disposition(role=d.RECEIVER, first=0, last=3, settled=True, state=d.Accepted())),
        frame(d.Flow(next_incoming_id=2, incoming_window=100, next_outgoing_id=5, outgoing_window=100, echo=True)),
        frame(d.Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10), 1),
        frame(d.Detach(handle=0, closed=True)),
        frame(d.Detach(handle=1, closed=rng.random() < 0.8)),
        frame(d.End(error=d.Error(condition="amqp:internal-error")) if rng.random() < 0.2 else d.End()),
        frame(d.End(), 1),
        frame(d.Close()),
    ]  # fmt: skip
    return parts


# ------------------------------------------------------------------ random values


def rand_scalar(rng: random.Random):
    kind = rng.randrange(17)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return UByte(rng.randrange(256))
    if kind == 3:
        return UShort(rng.randrange(65536))
    if kind == 4:
        return UInt(rng.choice([0, 1, 255, 256, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, rng.randrange(1 << 32)]))
    if kind == 5:
        return ULong(rng.choice([0, 1, 0x10, 0x53, 1 << 63, rng.randrange(1 << 64)]))
    if kind == 6:
        return rng.choice([Byte(-1), Short(-300), Int(-70000), rng.randrange(-(1 << 63), 1 << 63)])
    if kind == 7:
        return rng.choice([Float(1.5), float("nan"), -0.0, 1e300])
    if kind == 8:
        return Timestamp(rng.randrange(-(1 << 63), 1 << 63))
    if kind == 9:
        return uuid.UUID(int=rng.getrandbits(128))
    if kind == 10:
        return rng.randbytes(rng.choice([0, 1, 5, 40, 300]))
    if kind == 11:
        return "".join(rng.choice("aé€😀😀\x00 ") for _ in range(rng.choice([0, 3, 20, 300, 600])))
    if kind == 12:
        return Symbol("".join(rng.choice("abcxyz:-._") for _ in range(rng.choice([0, 4, 30]))))
    if kind == 13:
        return Char(rng.choice("a€😀"))
    if kind == 14:
        return Array([Symbol(f"s{i}") for i in range(rng.randrange(4))], code=0xA3)
    if kind == 15:
        return Array([UInt(rng.randrange(1 << 32)) for _ in range(rng.randrange(1, 4))])
    return rng.randbytes(rng.randrange(4))


def rand_value(rng: random.Random, depth: int = 0):
    if depth > 3 or rng.random() < 0.6:
        return rand_scalar(rng)
    kind = rng.randrange(5)
    if kind == 0:
        return [rand_value(rng, depth + 1) for _ in range(rng.randrange(5))]
    if kind == 1:
        out = {}
        for _ in range(rng.randrange(4)):
            key = rand_scalar(rng)
            if isinstance(key, (list, dict, Array)):  # unhashable: no map key
                continue
            out[key] = rand_value(rng, depth + 1)
        return out
    if kind == 2:
        return Described(ULong(rng.choice([0x28, 0x29, 0x24, 0x1D, 0x77, 0x99, 0x10])), rand_value(rng, depth + 1))
    if kind == 3:
        return Described(
            Symbol(rng.choice(["amqp:source:list", "x:y", "amqp:accepted:list"])), rand_value(rng, depth + 1)
        )
    return rng.choice([d.Source(address="q"), d.Target(address=rand_scalar(rng)), d.Accepted(), d.Released(),
                       d.Rejected(error=d.Error(condition=Symbol("amqp:x"))), d.Modified(delivery_failed=True)])  # fmt: skip


def field_value(rng: random.Random, field) -> object:
    """Mostly a value of the field's type, sometimes null or of another type."""
    r = rng.random()
    if r < 0.15:
        return None
    if r < 0.22:
        return rand_value(rng)
    t = field.type
    if field.multiple and t == "symbol":
        n = rng.randrange(3)
        return Symbol("cap") if n == 1 and rng.random() < 0.5 else Array([Symbol(f"c{i}") for i in range(n)], code=0xA3)
    if t == "uint":
        return UInt(rng.choice([0, 1, 2, 5, 100, 511, 512, 65535, 0x7FFFFFFF, 0xFFFFFFFE, 0xFFFFFFFF]))
    if t == "ushort":
        return UShort(rng.choice([0, 1, 2, 7, 65535]))
    if t == "ubyte":
        return UByte(rng.choice([0, 1, 2, 3, 255]))
    if t == "ulong":
        return ULong(rng.choice([0, 1, 1 << 20, (1 << 64) - 1]))
    if t == "bool":
        return rng.random() < 0.5
    if t == "string":
        return rng.choice(["", "q", "a" * 1000, "é"])
    if t == "symbol":
        return Symbol(rng.choice(["", "ANONYMOUS", "PLAIN", "amqp:not-found", "x" * 300]))
    if t == "binary":
        return rng.randbytes(rng.choice([0, 1, 8, 33, 600]))
    if t in ("fields", "map"):
        return {Symbol("k"): rand_value(rng)}
    if t == "timestamp":
        return Timestamp(0)
    if field.name in ("source",):
        return rng.choice([d.Source(address="q"), d.Source(), d.Source(address=rand_scalar(rng))])
    if field.name in ("target",):
        return rng.choice([d.Target(address="q"), d.Target(), d.Target(address=rand_scalar(rng))])
    if field.name in ("state", "default_outcome"):
        return rng.choice([d.Accepted(), d.Received(section_number=0, section_offset=1), rand_value(rng)])
    if field.name == "error":
        return rng.choice([d.Error(condition=Symbol("amqp:internal-error")), rand_value(rng)])
    return rand_value(rng)


def random_performative(rng: random.Random) -> bytes:
    """A frame holding a random performative (or SASL frame) built from the
    definitions' field tables, encoded as a raw described list so that fields
    may also carry values of the wrong type."""
    cls = rng.choice(d.PERFORMATIVES * 3 + d.SASL_FRAMES + (d.Source, d.Accepted, d.Error))
    values = [field_value(rng, f) for f in cls.FIELDS]
    while values and values[-1] is None and rng.random() < 0.8:
        values.pop()
    if rng.random() < 0.05:
        values.append(rand_value(rng))  # a field from a later version
    body = codec.dumps(Described(ULong(cls.CODE), values))
    payload = rng.randbytes(rng.choice([0, 0, 10, 700])) if cls is d.Transfer else b""
    type_ = 1 if cls in d.SASL_FRAMES and rng.random() < 0.8 else 0
    channel = rng.choice([0, 0, 0, 1, 2, 65535])
    return raw_frame(body + payload, channel=channel, type_=type_, doff=rng.choice([2, 2, 2, 3]))


# ------------------------------------------------------------------ mutations


def mutate(rng: random.Random, parts: list[bytes]) -> bytes:
    parts = list(parts)
    for _ in range(rng.choice([1, 1, 1, 2, 3, 6])):
        op = rng.randrange(10)
        i = rng.randrange(len(parts)) if parts else 0
        if not parts:
            parts.append(random_performative(rng))
        elif op == 0:  # replace a frame with a random performative
            parts[i] = random_performative(rng)
        elif op == 1:  # insert a random performative
            parts.insert(i, random_performative(rng))
        elif op == 2:  # drop a frame
            del parts[i]
        elif op == 3:  # duplicate a frame
            parts.insert(i, parts[i])
        elif op == 4 and len(parts) > 1:  # swap two frames
            j = rng.randrange(len(parts))
            parts[i], parts[j] = parts[j], parts[i]
        else:  # byte-level damage inside one unit
            b = bytearray(parts[i])
            if not b:
                continue
            k = rng.randrange(len(b))
            if op == 5:
                b[k] ^= 1 << rng.randrange(8)
            elif op == 6:
                b[k] = rng.choice([0x00, 0x40, 0x45, 0xA0, 0xC0, 0xD0, 0xE0, 0xF0, 0xFF, rng.randrange(256)])
            elif op == 7:
                b[k:k] = rng.randbytes(rng.randrange(1, 9))
            elif op == 8:
                del b[k : k + rng.randrange(1, 9)]
            else:
                del b[k:]  # truncate
            parts[i] = bytes(b)
    data = b"".join(parts)
    if rng.random() < 0.05:
        data = data[: rng.randrange(len(data) + 1)]
    return data


def cuts(rng: random.Random, data: bytes) -> list[bytes]:
    mode = rng.randrange(4)
    if mode == 0:
        return [data]
    if mode == 1 and len(data) < 3000:
        return [data[i : i + 1] for i in range(len(data))]
    n = min(MAX_CHUNKS - 1, rng.randrange(1, 40))
    points = sorted(rng.randrange(len(data) + 1) for _ in range(n))
    out, prev = [], 0
    for p in points + [len(data)]:
        out.append(data[prev:p])
        prev = p
    return out


# ------------------------------------------------------------------ applications


class NaiveHandler:
    """An application that answers every event without looking at the
    engine's state first: peer-initiated endpoints get their answer, credit
    is granted, messages are settled and sent back. The engine must never
    make it raise."""

    def __init__(self, conn: Connection, rng: random.Random):
        self.conn = conn
        self.rng = rng

    def handle(self, events: list) -> None:
        for e in events:
            if isinstance(e, ev.SaslInitReceived):
                self.conn.sasl_outcome(self.rng.random() < 0.95)
            elif isinstance(e, ev.ConnectionOpened):
                self.conn.open()
            elif isinstance(e, ev.SessionBegun):
                e.session.begin(incoming_window=self.rng.choice([None, 1, 3]))
            elif isinstance(e, ev.LinkAttached):
                e.link.attach(source=e.attach.source, target=e.attach.target)
                if not e.link.is_sender:
                    e.link.flow(link_credit=self.rng.choice([1, 5]), drain=self.rng.random() < 0.1)
            elif isinstance(e, ev.MessageReceived):
                if not e.delivery.settled:
                    e.link.session.settle(e.delivery, self.rng.choice([d.Accepted(), d.Released()]))
            elif isinstance(e, ev.LinkFlow) and e.link.is_sender:
                link = e.link
                while link.active and link.link_credit > 0:
                    link.send(b"n", message(b"x" * self.rng.choice([1, 700])), settled=self.rng.random() < 0.5)
                if e.drain and link.active:
                    link.drained()
            elif isinstance(e, ev.DeliveriesUpdated):
                for x in e.deliveries:
                    if not x.settled:
                        e.session.settle(x, x.state)


# ------------------------------------------------------------------ one case


class EngineFault(AssertionError):
    pass


def check_output(out: bytes, conn: Connection, state: dict) -> None:
    """The server's bytes parse, fit the peer's max-frame-size, and nothing
    follows a CLOSE."""
    for w in decode_stream(out):
        if state["closed"]:
            raise EngineFault(f"engine wrote {w} after its CLOSE")
        if w.header is not None:
            continue
        limit = conn.remote_max_frame_size if conn.open_received else MIN_MAX_FRAME_SIZE
        if w.type == 0 and w.size > limit and type(w.performative) is not d.Open:
            raise EngineFault(f"frame of {w.size} bytes exceeds the peer's max-frame-size {limit}: {w}")
        if type(w.performative) is d.Close:
            state["closed"] = True


def run_case(seed: int) -> None:
    rng = random.Random(seed)
    if rng.random() < 0.15:
        data = (SASL_HEADER if rng.random() < 0.5 else AMQP_HEADER) + b"".join(
            random_performative(rng) for _ in range(rng.randrange(1, 12))
        )
        require_sasl = rng.random() < 0.5
    else:
        data = mutate(rng, conversation(rng))
        require_sasl = rng.random() < 0.8
    clock_now = [0.0]
    conn = Connection(SERVER, require_sasl=require_sasl, idle_timeout=rng.choice([None, 5.0]),
                      max_frame_size=rng.choice([512, 4096, 131072]), clock=lambda: clock_now[0])  # fmt: skip
    if rng.random() < 0.3:
        handler = NaiveHandler(conn, rng)
    else:
        handler = BrokerHandler(conn, Store(), credit=rng.choice([3, 100, 100]), window=rng.choice([None, None, 2, 5]))
    state = {"closed": False}
    try:
        for chunk in cuts(rng, data):
            events = conn.receive_data(chunk) + conn.receive_data(b"")
            for e in events:
                if isinstance(e, ev.ConnectionClosed) and not e.remote:
                    assert e.error is not None and str(e.error.condition).startswith("amqp:"), e
            handler.handle(events)
            check_output(conn.data_to_send(), conn, state)
            clock_now[0] += rng.choice([0.0, 0.1, 3.0])
            conn.tick()
            check_output(conn.data_to_send(), conn, state)
        if not conn.closed and rng.random() < 0.2:
            conn.close("amqp:internal-error", "x" * 10000)
            check_output(conn.data_to_send(), conn, state)
    except EngineFault as e:
        raise AssertionError(f"seed {seed}: {e}\ninput: {data.hex()}") from None
    except Exception:
        raise AssertionError(f"seed {seed}: {traceback.format_exc()}\ninput: {data.hex()}") from None


def test_valid_conversation_completes():
    """The unmutated script runs to CLOSE against the broker (a sanity check
    that the fuzz starts from something the engine accepts)."""
    for seed in range(20):
        rng = random.Random(seed)
        conn = Connection(SERVER)
        handler = BrokerHandler(conn, Store())
        events: list = []
        for part in conversation(rng):
            new = conn.receive_data(part) + conn.receive_data(b"")
            handler.handle(new)
            conn.data_to_send()
            events += new
        closed = [e for e in events if isinstance(e, ev.ConnectionClosed)]
        assert closed and closed[0].remote, (seed, closed)
        errors = [e for e in events if isinstance(e, (ev.SessionEnded, ev.LinkDetached)) and e.error and not e.remote]
        assert errors == [], (seed, errors)
        assert len([e for e in events if isinstance(e, ev.MessageReceived)]) == 3


# ------------------------------------------------------------------ the client role


class ClientApp:
    """A client that does everything as soon as it may: SASL ANONYMOUS,
    OPEN, one session with a sending and a receiving link, sends while it
    has credit, settles what it receives."""

    def __init__(self, conn: Connection):
        self.conn = conn
        self.sent = 0

    def start(self) -> None:
        self.conn.start()

    def handle(self, events: list) -> None:
        for e in events:
            if isinstance(e, ev.SaslMechanismsReceived):
                self.conn.sasl_init("ANONYMOUS", b"")
            elif isinstance(e, ev.SaslOutcomeReceived) and e.code == 0:
                self.conn.open()
                session = self.conn.create_session()
                session.begin()
                out = session.create_link("out", d.SENDER)
                out.attach(source=d.Source(), target=d.Target(address="q"))
                inp = session.create_link("in", d.RECEIVER)
                inp.attach(source=d.Source(address="q"), target=d.Target())
                inp.flow(link_credit=5)
            elif isinstance(e, ev.LinkFlow) and e.link.is_sender:
                while e.link.active and e.link.link_credit > 0 and self.sent < 4:
                    self.sent += 1
                    e.link.send(b"%d" % self.sent, message(b"m" * (1 + 900 * (self.sent % 2))))
                if e.drain and e.link.active:
                    e.link.drained()
            elif isinstance(e, ev.MessageReceived) and not e.delivery.settled:
                e.link.session.settle(e.delivery, d.Accepted())
            elif isinstance(e, ev.LinkAttached) and e.link.is_sender is False and not e.link.attach_sent:
                e.link.refuse("amqp:not-allowed")
            elif isinstance(e, ev.SessionBegun) and not e.session.begin_sent:
                e.session.end("amqp:not-allowed")


def split_units(data: bytes) -> list[bytes]:
    """Cuts an engine's output into its headers and frames."""
    units, pos = [], 0
    while pos < len(data):
        n = 8 if data[pos : pos + 4] == b"AMQP" else int.from_bytes(data[pos : pos + 4], "big")
        units.append(data[pos : pos + n])
        pos += n
    return units


def server_transcript(seed: int) -> list[bytes]:
    """What a broker writes to ClientApp in a complete conversation."""
    rng = random.Random(seed)
    server = Connection(SERVER, max_frame_size=rng.choice([512, 65536]))
    broker = BrokerHandler(server, Store(), credit=rng.choice([1, 5]))
    client = Connection(CLIENT, max_frame_size=rng.choice([512, 65536]))
    app = ClientApp(client)
    app.start()
    s2c = bytearray()
    for _ in range(50):
        a = client.data_to_send()
        if a:
            broker.handle(server.receive_data(a) + server.receive_data(b""))
        b = server.data_to_send()
        if b:
            s2c += b
            app.handle(client.receive_data(b))
        if not a and not b:
            break
    client.close()
    broker.handle(server.receive_data(client.data_to_send()))
    s2c += server.data_to_send()
    return split_units(bytes(s2c))


_TRANSCRIPTS: dict[int, list[bytes]] = {}


def run_client_case(seed: int) -> None:
    rng = random.Random(seed)
    key = seed % 8
    if key not in _TRANSCRIPTS:
        _TRANSCRIPTS[key] = server_transcript(key)
    data = mutate(rng, _TRANSCRIPTS[key])
    client = Connection(CLIENT, max_frame_size=rng.choice([512, 65536]))
    app = ClientApp(client)
    app.start()
    state = {"closed": False}
    try:
        check_output(client.data_to_send(), client, state)
        for chunk in cuts(rng, data):
            events = client.receive_data(chunk)
            for e in events:
                if isinstance(e, ev.ConnectionClosed) and not e.remote:
                    assert e.error is not None and str(e.error.condition).startswith("amqp:"), e
            app.handle(events)
            check_output(client.data_to_send(), client, state)
    except EngineFault as e:
        raise AssertionError(f"client seed {seed}: {e}\ninput: {data.hex()}") from None
    except Exception:
        raise AssertionError(f"client seed {seed}: {traceback.format_exc()}\ninput: {data.hex()}") from None


def test_client_transcript_is_a_full_conversation():
    kinds = [type(w.performative).__name__ for w in decode_stream(b"".join(server_transcript(0)))]
    for kind in ("SaslMechanisms", "SaslOutcome", "Open", "Begin", "Attach", "Flow", "Transfer", "Disposition",
                 "Close"):  # fmt: skip
        assert kind in kinds, kinds


def test_fuzz_client():
    for seed in range(200):
        run_client_case(seed)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_fuzz_client_big():
    for seed in range(200, 5200):
        run_client_case(seed)


@pytest.mark.parametrize("start", range(0, SMALL_RUN, 100))
def test_fuzz(start):
    base = 10_000_000 if os.environ.get("CI") else 0
    for seed in range(base + start, base + start + 100):
        run_case(seed)


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("start", range(SMALL_RUN, BIG_RUN + SMALL_RUN, 1000))
def test_fuzz_big(start):
    for seed in range(start, start + 1000):
        run_case(seed)


if os.environ.get("CI"):  # CI fuzzes seeds of its own on top; elsewhere it is not collected (no skip to read)

    def test_fuzz_ci():
        for seed in range(100_000, 100_000 + BIG_RUN):
            run_case(seed)
