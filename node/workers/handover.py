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
connection stays where it is, crossing the worker link as before. A datagram
carries its sender's credentials (SCM_CREDENTIALS, vouched for by the kernel):
one from a process of another user is dropped with its socket, since it names
the user the connection is to act as."""

from __future__ import annotations

import array
import asyncio
import logging
import socket
import struct
from collections.abc import Callable
from typing import Any

from amqp import codec
from amqp.errors import DecodeError
from node.client.connection import ConnectionHandler
from node.client.handing_over import MAX_KEPT as MAX_REPLAY
from node.client.handing_over import TakenOver

from .control import address, same_user
from .slots import Slots

__all__ = ["Handover", "TakenOver", "serve_handovers"]

log = logging.getLogger("warren.workers")

_DATAGRAM = MAX_REPLAY + 4096  # the replay and what travels with it
_UCRED = struct.Struct("3i")  # pid, uid, gid
_ANCILLARY = socket.CMSG_SPACE(array.array("i").itemsize) + socket.CMSG_SPACE(_UCRED.size)


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
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # each datagram says who sent it
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
                data, ancdata, _flags, _ = self._sock.recvmsg(_DATAGRAM, _ANCILLARY)
            except (BlockingIOError, InterruptedError):
                return
            fds, uid = array.array("i"), None
            for level, kind, cdata in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(cdata[: len(cdata) - len(cdata) % fds.itemsize])
                elif level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                    _pid, uid, _gid = _UCRED.unpack(cdata[: _UCRED.size])
            self._received(data, list(fds), uid)

    def _received(self, data: bytes, fds: list[int], uid: int | None) -> None:
        if len(fds) != 1 or uid is None or not same_user(uid):
            for fd in fds:
                socket.close(fd)
            log.warning("a handover datagram with %d sockets from uid %s dropped", len(fds), uid)
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
