"""Clients that misbehave on purpose, over plain sockets, for the
test_hostile_*.py files: they write what they like and read until the broker
answers or hangs up, under a deadline; nothing sleeps."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

from amqp import events as ev
from amqp.connection import CLIENT, Connection


class WireClient:
    """A socket that writes raw bytes and reads the broker's side with a
    client-role engine (which never writes anything itself)."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.engine = Connection(CLIENT, container_id="wire-client")
        self.engine.handshake.sasl_expected = True  # we write the SASL header ourselves
        self.engine.header_sent = True
        self.events: list = []
        self.eof = False

    def write(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _read(self, timeout: float) -> None:
        self.sock.settimeout(max(timeout, 0.001))
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            return
        except ConnectionResetError:
            data = b""
        if not data:
            self.eof = True
            return
        self.events += self.engine.receive_data(data)

    def wait_for(self, predicate: Callable[[Any], bool], timeout: float = 10.0) -> Any:
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for e in self.events[seen:]:
                if predicate(e):
                    return e
            seen = len(self.events)
            if self.eof:
                raise AssertionError(f"broker hung up; events: {self.events}")
            if time.monotonic() >= deadline:
                raise AssertionError(f"timed out; events: {self.events}")
            self._read(deadline - time.monotonic())

    def wait_event(self, kind: type, timeout: float = 10.0) -> Any:
        return self.wait_for(lambda e: type(e) is kind, timeout)

    def wait_eof(self, timeout: float = 10.0) -> None:
        """Reads (and drops) until the broker closes the socket."""
        deadline = time.monotonic() + timeout
        while not self.eof:
            assert time.monotonic() < deadline, "the broker kept the socket open"
            self._read(deadline - time.monotonic())

    def close(self) -> None:
        self.sock.close()


def closed_error(client: WireClient) -> Any:
    """The error of the broker's CLOSE, once it came."""
    return client.wait_event(ev.ConnectionClosed).error
