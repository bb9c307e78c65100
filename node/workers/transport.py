"""The queue proxy's transport between the workers of one node (issue 36,
docs/architecture.md "Cross-worker traffic").

The queue proxy (node/vhosts/remote_queue.py, proxy_outbox.py, answer_gate.py)
speaks to another node through the part of the cluster transport
(raft/transport.py `NodeTransport`) that carries node messages: a stream per
peer with an epoch, `send_node_message`, `on_peer_down`. `WorkerTransport` is
that part over Unix stream sockets, so the proxy runs between two workers of a
node unchanged, skipping gRPC. The differences, each simpler:

- One socket per worker pair carries both directions, so the stream to a
  peer and the stream from it share one epoch: a peer's messages always have
  a stream to be answered on (the answer gate never holds them).
- Each pair has one dialing side (`dial_to(peer)` gives the address, or None
  when the peer dials us); the dialing side names itself in a first "hello"
  item and dials again after the socket ends, while the peer is wanted
  (`add_peer`).
- Nothing is partitioned or gated: a worker's socket ends only when a process
  does (or a frame cannot be read), and then `on_peer_down(peer)` runs once,
  as for a node's stream.

Items on a link are `[channel, payload]` (payload: the channel's bytes, e.g. a
`queue.proxy` record), a loop turn's in one frame (link.py)."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable

from raft.transport import TransportOptions

from .control import CONTROL, dial, listen
from .link import WorkerLink

__all__ = ["WorkerTransport"]

log = logging.getLogger("warren.workers")

REDIAL = (0.01, 0.5)  # first and longest wait between dials of a wanted peer


class WorkerTransport:
    """Node messages between this worker (`name`) and the others of its node."""

    def __init__(self, loop: asyncio.AbstractEventLoop, name: str, listen: str | None,
                 dial_to: Callable[[str], str | None], options: TransportOptions | None = None) -> None:  # fmt: skip
        self.loop = loop
        self.name = name
        self._listen = listen
        self._dial_to = dial_to
        self.options = options or TransportOptions()
        self.failed: BaseException | None = None  # the cluster transport's fatal error; none here
        self.on_peer_down: list[Callable[[str], None]] = []
        self.on_node_message: Callable[[str, str, bytes], None] | None = None
        self.inbound = self  # answer_gate.py cuts a peer's inbound stream through this
        self._links: dict[str, tuple[WorkerLink, int]] = {}  # peer -> (its live link, that link's epoch)
        self._wanted: set[str] = set()
        self._dialing: dict[str, asyncio.Task] = {}
        self._epochs = itertools.count(1)
        self._server: asyncio.AbstractServer | None = None
        self._closed = False

    async def start(self) -> None:
        if self._listen is not None:
            self._server = await listen(self.loop, self._accepted, self._listen)

    async def close(self) -> None:
        self._closed = True
        if self._server is not None:
            self._server.close()
        for task in self._dialing.values():
            task.cancel()
        for link, _ in list(self._links.values()):
            link.close()

    # -- what the queue proxy uses ------------------------------------------------------

    def add_peer(self, peer: str) -> None:
        """Keep a link to `peer`: dial it now and after each end, when this side dials."""
        self._wanted.add(peer)
        if peer not in self._links and peer not in self._dialing and self._dial_to(peer) is not None:
            self._dialing[peer] = self.loop.create_task(self._dial(peer))

    def is_connected(self, peer: str) -> bool:
        return peer in self._links

    def epoch_to(self, peer: str) -> int | None:
        entry = self._links.get(peer)
        return entry[1] if entry is not None else None

    epoch_from = epoch_to  # one socket carries both directions

    def is_partitioned(self, peer: str) -> bool:
        return False

    def send_node_message(self, peer: str, channel: str, payload: bytes, gated: bool = True) -> bool:
        """Queue `payload` for `peer` on `channel`; False when there is no link to it now."""
        entry = self._links.get(peer)
        return entry is not None and entry[0].send([channel, payload])

    def cut(self, peer: str, reason: str) -> None:
        entry = self._links.get(peer)
        if entry is not None:
            log.warning("closing the link to %s: %s", peer, reason)
            entry[0].close()

    # -- links ---------------------------------------------------------------------------

    async def _dial(self, peer: str) -> None:
        wait = REDIAL[0]
        try:
            while peer in self._wanted and not self._closed and peer not in self._links:
                address = self._dial_to(peer)
                if address is None:
                    return
                try:
                    link = await dial(self.loop, lambda: self._link(peer), address)
                except OSError as e:
                    log.debug("worker %s not reachable yet: %s", peer, e)
                else:
                    if not link.lost:  # else it ended already: dial again
                        link.send(["hello", self.name])
                        self._up(peer, link)
                        return
                await asyncio.sleep(wait)
                wait = min(wait * 2, REDIAL[1])
        finally:
            self._dialing.pop(peer, None)

    def _accepted(self) -> WorkerLink:
        return self._link(None)

    def _link(self, peer: str | None) -> WorkerLink:
        """A link, known by its peer at once when dialed, or once its "hello" came when accepted."""
        state = {"peer": peer}
        link: WorkerLink = WorkerLink(self.loop, lambda items: self._received(link, state, items),
                                      lambda reason: self._ended(link, state["peer"], reason), CONTROL)  # fmt: skip
        return link

    def _up(self, peer: str, link: WorkerLink) -> None:
        old = self._links.get(peer)
        self._links[peer] = (link, next(self._epochs))
        if old is not None:  # the peer came back before its old socket's end was seen
            old[0].close()
            self._down(peer)

    def _received(self, link: WorkerLink, state: dict, items: list) -> None:
        for item in items:
            peer = state["peer"]
            if peer is None:
                if item[0] != "hello" or len(item) != 2:
                    log.warning("a worker link that did not say hello first; closed")
                    link.close()
                    return
                state["peer"] = item[1]
                self._up(item[1], link)
                continue
            if self.on_node_message is not None:
                try:
                    self.on_node_message(peer, item[0], item[1])
                except Exception:
                    log.exception("handling a %r message from %s failed", item[0], peer)

    def _ended(self, link: WorkerLink, peer: str | None, reason: Exception | None) -> None:
        if peer is None or self._links.get(peer, (None,))[0] is not link:
            return  # never said hello, or a link a newer one replaced (reported then)
        del self._links[peer]
        log.info("the link to worker %s ended: %s", peer, reason or "closed")
        self._down(peer)
        if peer in self._wanted and not self._closed:
            self.add_peer(peer)

    def _down(self, peer: str) -> None:
        for callback in list(self.on_peer_down):
            try:
                callback(peer)
            except Exception:
                log.exception("a peer-down callback for %s failed", peer)
