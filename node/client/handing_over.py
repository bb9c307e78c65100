"""A connection that moves to the worker running its first link's queue
(issue 36; the sockets' side is node/workers/handover.py).

Until its first ATTACH a connection of a node with several workers keeps
every byte its client sent. If that ATTACH names a queue (`/queues/NAME`)
that another worker of this node runs (or reaches: another node's queue is
reached through worker 0, node/workers/slots.py), the connection flushes what it
answered so far (the SASL outcome, OPEN, BEGIN), sends its socket and those
bytes to that worker and stops, the ATTACH unanswered. The worker that takes
it replays the bytes through a connection of its own: the login is taken as
done (the first worker checked it), and whatever it would answer before that
ATTACH is dropped, the client has it already; from the ATTACH on it answers
as if it had accepted the socket. Its OPEN and BEGIN would be the same bytes:
every worker runs the same settings.

Only a plain TCP connection that logged in with a user (not a token, whose
expiry and scopes live in this process; not TLS, whose session state does)
and has no other link moves, and only to a worker that takes it at once."""

from __future__ import annotations

from typing import Any, Protocol

from routing import address
from routing.errors import RoutingError

MAX_KEPT = 64 * 1024  # a client that sent more before its first ATTACH stays where it is


class ConnectionMover(Protocol):
    """What a connection uses of its worker's handover end (node/workers/handover.py)."""

    def worker_of(self, vhost: str, queue: str) -> int | None:
        """The other worker a connection whose first link names `queue` moves to, if any."""

    def send(self, worker: int, fd: int, user: str, replay: bytes, counters: list[int]) -> bool:
        """Hands the socket `fd` over; False when `worker` cannot take it now."""


class TakenOver:
    """What a connection brings from the worker that accepted it."""

    __slots__ = ("user", "replay", "counters")

    def __init__(self, user: str, replay: bytes, counters: list[int]) -> None:
        self.user = user
        self.replay = replay  # every byte the client sent, from its first
        self.counters = counters  # connected_at, recv_oct, recv_cnt, send_oct, send_cnt


class HandedOver(Exception):
    """Raised out of the dispatch of the ATTACH that moved the connection:
    nothing after it is this worker's to handle."""


def queue_named(link: Any, attach: Any) -> str | None:
    """The queue a link's v2 `/queues/NAME` address names (source of a consumer, target of
    a publisher); None for anything else, which stays where it is."""
    terminus = attach.source if link.is_sender else attach.target
    where = getattr(terminus, "address", None)
    if not isinstance(where, str) or not where.startswith(address.QUEUES_PREFIX):
        return None
    if link.is_sender and getattr(terminus, "dynamic", False):
        return None
    try:
        return address.parse_source(where).queue
    except RoutingError:
        return None  # the link's own attach refuses it


class ConnectionHandover:
    """The handover half of `ConnectionHandler` (node/client/connection.py)."""

    def _keep(self, data: bytes) -> None:
        """Called with every read while the connection may still move."""
        self._kept.append(data)
        self._kept_bytes += len(data)
        if self._kept_bytes > MAX_KEPT:
            self._kept = None

    def _first_link(self, link: Any, attach: Any) -> None:
        """The first ATTACH: moves the connection (raising HandedOver), or answers it here."""
        if self._taken is not None:  # replayed: everything before this is answered already
            self.engine.data_to_send()
            self._taken = None
        elif self._move_for(link, attach):
            raise HandedOver
        self._on_attach(link, attach)

    def _move_for(self, link: Any, attach: Any) -> bool:
        kept, self._kept = self._kept, None
        handover = self.node.handover
        if kept is None or handover is None or self.grant is not None or self.user is None or self.vhost is None:
            return False
        if sum(len(session.links) for session in self.engine.sessions.values()) != 1:
            return False
        name = queue_named(link, attach)
        worker = handover.worker_of(self.vhost.name, name) if name is not None else None
        if worker is None:
            return False
        self._flush()  # what this worker answered goes first
        transport = self.transport
        sock = transport.get_extra_info("socket") if transport is not None else None
        if self._closed or sock is None or transport.get_write_buffer_size():
            return False
        counters = [self.connected_at, self.recv_oct, self.recv_cnt, self.send_oct, self.send_cnt]
        if not handover.send(worker, sock.fileno(), self.user, b"".join(kept), counters):
            return False
        # closing our descriptor leaves the socket open: the other worker holds it now
        self._closed = True
        transport.abort()
        return True

    def _replay_taken(self, taken: TakenOver) -> None:
        """A connection another worker handed over: what its client sent there, again."""
        self.user = taken.user
        self.data_received(taken.replay)
        self.connected_at, self.recv_oct, self.recv_cnt = taken.counters[:3]
        self.send_oct += taken.counters[3]
        self.send_cnt += taken.counters[4]
