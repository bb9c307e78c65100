"""A peer's cross-node queue messages wait until this node has a stream back to it.

The cluster transport has one stream per direction: a peer's messages come on
its stream to us, our answers (deliveries, confirms, credit replies) go on
ours to it. When the peer restarts, its new stream to us is up at once, while
ours to it waits out its reconnect backoff (in Docker, a new address too). A
message handled in that window is answered into nothing: a consumer's attach
has the queue check messages out to a link that never receives them, and
nothing returns them, since no stream of that link ever ends. So what a peer
sends while we have no stream to it waits, in order, until we have one. If
none comes within HOLD_WAIT, we cut the peer's stream to us: the peer then
fails what it sent (confirms unknown, consumer links detached), as for any
stream that ends, and reconnects.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from node.tasks import BackgroundTasks

log = logging.getLogger("warren.remote")

HOLD_WAIT = 5.0  # seconds a peer's messages wait for our stream to it
POLL = 0.02  # the transport reports a stream's end, not its start: check this often


class AnswerGate:
    """Holds a peer's messages while this node has no stream to answer it on."""

    def __init__(self, transport: Any, loop: asyncio.AbstractEventLoop, handle: Callable[[str, list], None],
                 connect: Callable[[str], None]) -> None:  # fmt: skip
        self.transport = transport
        self.loop = loop
        self.handle = handle  # (peer, message): what to do with one once it may be answered
        self.connect = connect  # (peer): keep a stream to it
        self._held: dict[str, tuple[int | None, list]] = {}  # peer -> (its stream's epoch, messages in order)
        self._releasing = BackgroundTasks(loop, log)  # one task a peer with held messages

    def admit(self, peer: str, messages: list) -> bool:
        """True: handle `messages` now; else they were held (behind earlier ones)."""
        held = self._held.get(peer)
        stream = self.transport.epoch_from(peer)
        if held is not None and held[0] != stream:  # they came on a stream that a newer one replaced
            del self._held[peer]
            held = None
        if held is None:
            if self.transport.epoch_to(peer) is not None:
                return True
            held = self._held[peer] = (stream, [])
            self.connect(peer)
            self._releasing.spawn(self._release(peer, held), f"releasing the messages held from {peer}")
        held[1].extend(messages)
        return False

    def close(self) -> None:
        """The node stops: held messages are never handled."""
        self._releasing.cancel()

    def peer_down(self, peer: str) -> None:
        """A stream with `peer` ended: if it was the one the held messages came
        on, they are dropped (the peer fails them when it sees the end)."""
        held = self._held.get(peer)
        if held is not None and held[0] != self.transport.epoch_from(peer):
            del self._held[peer]

    async def _release(self, peer: str, held: tuple[int | None, list]) -> None:
        transport = self.transport
        deadline = self.loop.time() + HOLD_WAIT
        while self._held.get(peer) is held and transport.epoch_to(peer) is None and self.loop.time() < deadline:
            await asyncio.sleep(POLL)
        if self._held.get(peer) is not held:
            return  # the stream they came on ended
        del self._held[peer]
        if transport.epoch_to(peer) is None:
            log.warning("no stream to %s within %.0fs: cutting its stream, %d messages from it dropped",
                        peer, HOLD_WAIT, len(held[1]))  # fmt: skip
            transport.inbound.cut(peer, "no stream back to this node")
            return
        for message in held[1]:
            self.handle(peer, message)
