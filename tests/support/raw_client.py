"""A client on Warren's own AMQP engine (client role) over a real socket, for
what python-qpid-proton will not do on request: stay silent, pick channels and
handles, put several settlements in one DISPOSITION, count heartbeats.

Everything waits for frames from the broker with a deadline; nothing sleeps.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from typing import Any

from amqp import definitions as d
from amqp import events as ev
from amqp.connection import CLIENT, Connection
from amqp.framing import encode_frame


class RawClient:
    def __init__(self, port: int, idle_timeout: float | None = None, max_frame_size: int = 65536):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # idle_timeout is what our OPEN advertises; we never tick(), so the
        # engine never closes on its own and sends nothing unless told to
        self.engine = Connection(CLIENT, container_id="raw-client", idle_timeout=idle_timeout,
                                 max_frame_size=max_frame_size)  # fmt: skip
        self.events: list = []
        self.received = bytearray()  # every byte the broker sent
        self.eof = False
        self.deliveries: list = []  # received and not yet taken by receive()
        self._tags = 0

    # ------------------------------------------------------------ I/O

    def flush(self) -> None:
        data = self.engine.data_to_send()
        if data:
            self.sock.sendall(data)

    def send_frame(self, channel: int, performative: Any, payload: bytes = b"") -> None:
        """Writes a frame behind the engine's back (to break the rules on purpose)."""
        self.flush()
        self.sock.sendall(encode_frame(channel, performative, payload))

    def _read(self, timeout: float) -> list:
        self.flush()
        if self.eof:
            return []
        self.sock.settimeout(max(timeout, 0.001))
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            return []
        except ConnectionResetError:
            data = b""
        if not data:
            self.eof = True
            return []
        self.received += data
        new = self.engine.receive_data(data)
        self.events += new
        self.deliveries += [e.delivery for e in new if type(e) is ev.MessageReceived]
        return new

    def wait_for(self, predicate: Callable[[Any], bool], timeout: float = 10.0) -> Any:
        """The first event from now on that satisfies `predicate`."""
        deadline = time.monotonic() + timeout
        while True:
            for e in self._read(deadline - time.monotonic()):
                if predicate(e):
                    return e
            if self.eof:
                raise AssertionError(f"broker hung up; events: {self.events}")
            if time.monotonic() >= deadline:
                raise AssertionError(f"timed out; events: {self.events}")

    def wait_event(self, kind: type, timeout: float = 10.0, **fields: Any) -> Any:
        return self.wait_for(
            lambda e: type(e) is kind and all(getattr(e, k) is v or getattr(e, k) == v for k, v in fields.items()),
            timeout,
        )

    def wait_closed(self, timeout: float = 10.0) -> tuple[Any, float]:
        """Waits for the broker's CLOSE; returns (its error, seconds waited)."""
        start = time.monotonic()
        closed = self.wait_event(ev.ConnectionClosed, timeout)
        assert closed.remote, closed
        return closed.error, time.monotonic() - start

    def wait_eof(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.eof and time.monotonic() < deadline:
            self._read(deadline - time.monotonic())
        assert self.eof, "the broker kept the socket open"

    def wait_heartbeats(self, n: int, timeout: float = 10.0) -> float:
        """Reads until n empty frames have arrived; returns the seconds it took."""
        start = time.monotonic()
        deadline = start + timeout
        while self.heartbeats() < n:
            assert not self.eof, f"broker hung up; events: {self.events}"
            assert time.monotonic() < deadline, f"{self.heartbeats()} heartbeats in {timeout} s"
            self._read(deadline - time.monotonic())
        return time.monotonic() - start

    def close(self) -> None:
        self.sock.close()

    # ------------------------------------------------------------ AMQP steps

    def connect(self, hostname: str | None = None) -> Any:
        """SASL ANONYMOUS then OPEN; returns the broker's OPEN."""
        self.engine.start(sasl=True)
        self.wait_event(ev.SaslMechanismsReceived)
        self.engine.sasl_init("ANONYMOUS", b"raw-client")
        outcome = self.wait_event(ev.SaslOutcomeReceived)
        assert outcome.code == d.SASL_OK, outcome
        self.engine.open(hostname=hostname)
        return self.wait_event(ev.ConnectionOpened).open

    def begin(self) -> Any:
        session = self.engine.create_session()
        session.begin()
        self.wait_event(ev.SessionBegun, session=session)
        return session

    def receiver(self, session: Any, address: str, credit: int = 0, name: str = "rcv", settled: bool = False,
                 max_message_size: int | None = None) -> Any:  # fmt: skip
        link = session.create_link(name, d.RECEIVER)
        link.attach(source=d.Source(address=address), target=d.Target(),
                    snd_settle_mode=d.SND_SETTLED if settled else d.SND_UNSETTLED,
                    max_message_size=max_message_size)  # fmt: skip
        self.wait_event(ev.LinkAttached, link=link)
        if credit:
            link.flow(link_credit=credit)
        return link

    def sender(self, session: Any, address: str, name: str = "snd") -> Any:
        link = session.create_link(name, d.SENDER)
        link.attach(source=d.Source(), target=d.Target(address=address), snd_settle_mode=d.SND_UNSETTLED)
        self.wait_event(ev.LinkAttached, link=link)
        if link.link_credit <= 0:
            self.wait_for(lambda e: type(e) is ev.LinkFlow and e.link is link and link.link_credit > 0)
        return link

    def send(self, link: Any, payload: bytes) -> Any:
        self._tags += 1
        delivery = link.send(struct.pack(">I", self._tags), payload)
        self.flush()
        return delivery

    def receive(self, n: int, timeout: float = 10.0) -> list:
        """The next n deliveries, in arrival order."""
        deadline = time.monotonic() + timeout
        while len(self.deliveries) < n:
            self.wait_event(ev.MessageReceived, timeout=deadline - time.monotonic())
        got, self.deliveries = self.deliveries[:n], self.deliveries[n:]
        return got

    def heartbeats(self) -> int:
        """Empty frames among the bytes received so far."""
        data, pos, count = bytes(self.received), 0, 0
        while pos + 8 <= len(data):
            if data[pos : pos + 4] == b"AMQP":
                pos += 8
                continue
            size = struct.unpack_from(">I", data, pos)[0]
            if size == 8:
                count += 1
            pos += size
        return count
