"""What the queue proxy (remote_queue.py) sends its peers: one loop turn's
messages to a peer go as one node message, a typed record
(proxy_records.py), cut at about BATCH_BYTES; until every node reads records
(feature flag `queue_proxy_records`), one AMQP list each.

They skip the transport's durability gate (raft/outbound.py), which holds
what a turn sends until the Raft log write pending at its end has landed:
that is for Raft's answers, and these answer for nothing in the log. A
delivery or a credit reply is made by applying a committed entry, a quorum
queue's confirm too, a classic queue confirms once its own store synced,
and the rest (attach, credit, settle, counts) promise nothing about disk. A
busy leader always has a write pending, so each of its deliveries to a
consumer's node waited for one more fsync (measured: 10-30 ms from the
leader's send to the consumer's node, 1-8 ms without). They still never
overtake a message for the same peer that waits at the gate."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from amqp import codec

from . import proxy_records

__all__ = ["BATCH_BYTES", "Outbox", "ProxySender", "body_size"]

log = logging.getLogger("warren.remote")

BATCH_BYTES = 256 << 10  # a loop turn's messages to one peer are cut into node messages of about this size


class ProxySender:
    """Batches the messages of a loop turn per peer and hands them to the transport at its end."""

    def __init__(self, loop: asyncio.AbstractEventLoop, transport: Any, channel: str,
                 batched: Callable[[], bool]) -> None:  # fmt: skip
        self._loop = loop
        self._transport = transport
        self._channel = channel
        self._batched = batched  # every node reads records now
        self._pinned: set[str] = set()
        self._outbox: dict[str, Outbox] = {}  # peer -> this loop turn's messages to it
        self._flush_scheduled = False

    def send(self, peer: str, message: list) -> bool:
        """Queue `message` for `peer`, sent at the end of this loop turn with the
        turn's others; False if there is no stream to the peer now."""
        self.pin(peer)
        transport = self._transport
        epoch = transport.epoch_to(peer)
        if epoch is None or transport.failed is not None or transport.is_partitioned(peer):
            return False
        if body_size(message) > transport.options.max_message_bytes - 1024:
            return False  # the transport refuses a node message that large (as it did a lone list)
        outbox = self._outbox.get(peer)
        if outbox is None or outbox.epoch != epoch:  # a new stream: what the old one had not taken is lost with it
            outbox = self._outbox[peer] = Outbox(epoch)
        outbox.add(message)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)
        return True

    def pin(self, peer: str) -> None:
        if peer not in self._pinned:  # keep a stream to the peer even if no group shares it
            self._pinned.add(peer)
            self._transport.add_peer(peer)

    def _flush(self) -> None:
        """Hand this turn's messages to the transport: one record per peer (and
        per BATCH_BYTES), or one AMQP list each until every node reads records."""
        self._flush_scheduled = False
        outboxes, self._outbox = self._outbox, {}
        batched = self._batched()
        transport, channel = self._transport, self._channel
        for peer, outbox in outboxes.items():
            if transport.epoch_to(peer) != outbox.epoch:
                continue  # the stream ended meanwhile: remote_queue.py's _peer_down reported what it carried
            for items in outbox.batches():
                if batched:
                    try:
                        transport.send_node_message(peer, channel, proxy_records.encode_batch(items), False)
                        continue
                    except Exception:  # one item cannot be encoded: send the others one by one
                        log.exception("encoding a %s batch for %s failed", channel, peer)
                for item in items:
                    try:
                        data = proxy_records.encode_batch([item]) if batched else codec.dumps(item)
                    except Exception:
                        log.exception("dropped a %r for %s that cannot be encoded", item[0], peer)
                        continue
                    transport.send_node_message(peer, channel, data, False)


class Outbox:
    """One loop turn's messages to one peer, cut at BATCH_BYTES."""

    __slots__ = ("epoch", "done", "items", "size")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch  # of the stream they were queued for
        self.done: list[list] = []
        self.items: list = []
        self.size = 0

    def add(self, message: list) -> None:
        self.items.append(message)
        self.size += body_size(message)
        if self.size >= BATCH_BYTES:
            self.done.append(self.items)
            self.items, self.size = [], 0

    def batches(self) -> list[list]:
        return [*self.done, self.items] if self.items else self.done


def body_size(message: list) -> int:
    """The bytes of the message a "pub" or "deliver" carries (the rest are small)."""
    kind = message[0]
    if kind == "pub":
        return len(message[4])
    return len(message[3]) if kind == "deliver" else 0
