"""Client connections handed to the worker that runs their queue (issue 36,
docs/architecture.md "Workers").

The kernel spreads a node's connections over its workers (SO_REUSEPORT); a
publisher or consumer whose queue runs on another worker would cross the
worker link with every message. So a connection whose first link names a
queue another worker of this node runs (or reaches: worker 0, for another
node's queue) moves there, once, before that link is
answered: the worker that accepted it sends the socket itself (SCM_RIGHTS)
with what the client sent so far and who it logged in as, and stops reading;
the receiving worker replays those bytes through a connection of its own,
answering nothing it had already been answered (node/client/handing_over.py),
and serves it from there. The client sees one connection.

Each worker has one datagram socket at an abstract name (control.address):
one datagram is one connection, so a send either hands the connection over
whole or fails (the receiver is restarting, its queue is full) and the
connection stays where it is, crossing the worker link as before."""

from __future__ import annotations

import array
import asyncio
import logging
import socket
from collections.abc import Callable
from typing import Any

from amqp import codec
from amqp.errors import DecodeError
from node.client.connection import ConnectionHandler

from .control import address
from .slots import Slots

__all__ = ["Handover", "TakenOver", "serve_handovers"]

log = logging.getLogger("warren.workers")

MAX_REPLAY = 64 * 1024  # a connection that sent more before its first link is not moved
_DATAGRAM = MAX_REPLAY + 4096  # the replay and what travels with it
_FD_SPACE = socket.CMSG_SPACE(array.array("i").itemsize)


class TakenOver:
    """What a connection brings from the worker that accepted it."""

    __slots__ = ("user", "replay", "counters")

    def __init__(self, user: str, replay: bytes, counters: list[int]) -> None:
        self.user = user
        self.replay = replay  # every byte the client sent, from its first
        self.counters = counters  # connected_at, recv_oct, recv_cnt, send_oct, send_cnt


class Handover:
    """Worker `index`'s end: sends connections to the other workers and takes theirs.
    `accept(sock, taken)` serves a connection received; `worker_running(vhost, name)`
    is the worker of this node that runs a queue (None: none of them)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, data_dir: str, index: int,
                 accept: Callable[[socket.socket, TakenOver], Any],
                 worker_running: Callable[[str, str], int | None]) -> None:  # fmt: skip
        self.loop = loop
        self.data_dir = data_dir
        self.index = index
        self._accept = accept
        self._worker_running = worker_running
        self._sock: socket.socket | None = None
        self.handed = self.taken = 0  # connections sent and received

    def start(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            sock.bind(address(self.data_dir, f"handover-{self.index}"))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * _DATAGRAM)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self._sock = sock
        self.loop.add_reader(sock.fileno(), self._readable)

    def close(self) -> None:
        if self._sock is not None:
            self.loop.remove_reader(self._sock.fileno())
            self._sock.close()
            self._sock = None

    def worker_of(self, vhost: str, queue: str) -> int | None:
        """The other worker a connection whose first link names `queue` moves to, if any."""
        worker = self._worker_running(vhost, queue)
        return None if worker == self.index else worker

    def send(self, worker: int, fd: int, user: str, replay: bytes, counters: list[int]) -> bool:
        """Hands the socket `fd` to `worker`; False when it cannot take it now (the caller
        keeps the connection). On True the caller must stop reading and writing it."""
        if self._sock is None or len(replay) > MAX_REPLAY:
            return False
        payload = codec.dumps([user, replay, counters])
        fds = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))]
        try:
            self._sock.sendmsg([payload], fds, 0, address(self.data_dir, f"handover-{worker}"))
        except OSError as e:  # nobody there (restarting), or its queue is full
            log.debug("handover to worker %d refused: %s", worker, e)
            return False
        self.handed += 1
        return True

    def _readable(self) -> None:
        while self._sock is not None:
            try:
                data, ancdata, _flags, _ = self._sock.recvmsg(_DATAGRAM, _FD_SPACE)
            except (BlockingIOError, InterruptedError):
                return
            fds = array.array("i")
            for level, kind, cdata in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(cdata[: len(cdata) - len(cdata) % fds.itemsize])
            self._received(data, list(fds))

    def _received(self, data: bytes, fds: list[int]) -> None:
        if len(fds) != 1:
            for fd in fds:
                socket.close(fd)
            log.warning("a handover datagram with %d sockets dropped", len(fds))
            return
        sock = socket.socket(fileno=fds[0])
        try:
            user, replay, counters = codec.loads(data)
            taken = TakenOver(str(user), bytes(replay), [int(c) for c in counters])
        except (DecodeError, TypeError, ValueError):
            sock.close()
            log.warning("a handover datagram that does not decode dropped with its connection")
            return
        sock.setblocking(False)
        self.taken += 1
        self._accept(sock, taken)


def serve_handovers(node: Any, slots: Slots) -> Handover:
    """Worker `node.index`'s handover end, started: connections handed to it are served
    as `node`'s own, from their replayed bytes on."""

    def accept(sock: socket.socket, taken: TakenOver) -> None:
        served = node.loop.connect_accepted_socket(lambda: ConnectionHandler(node, taken), sock)
        node.background(served, "a connection handed over")

    def worker_running(vhost: str, name: str) -> int | None:
        record = node.metadata.state.queue(vhost, name)
        return slots.worker_reaching(record) if record is not None else None

    handover = Handover(node.loop, node.config.data_dir, slots.me, accept, worker_running)
    handover.start()
    return handover
