"""The leader's side of stream replication: answers the replicas' fetches and
moves the committed end.

Replicas pull (queues/stream/replica.py). A fetch names the replica's end
and its last chunk; the leader first checks that tail against its own log
(same first offset, same CRC) and tells a replica whose tail it does not
have to truncate. A checked fetch from a replica that has recorded this
epoch reports that replica's durable end; the committed end is the end a
majority of the replicas (the leader's own disk included) has reached.
Chunks go out only once they are on the leader's disk, at most BATCH_BYTES
per message, one message per request: a replica asks for the next batch
while it writes the last, and reports each write that lands (a fetch with
`want` false, not answered). A request with nothing to send waits here
("parked") until a chunk is written or the committed end moves.

Nothing here does I/O but reading committed chunks; `send(peer, message)`
is the node's transport (node/vhosts/stream_replication.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from queues.stream import wire

__all__ = ["StreamLeader"]

log = logging.getLogger("warren.stream")


class StreamLeader:
    def __init__(self, queue: Any, me: str, epoch: int, replicas: tuple[str, ...],
                 send: Callable[[str, object], None]) -> None:  # fmt: skip
        self.queue = queue
        self.me = me
        self.epoch = epoch
        self.replicas = replicas
        self.send = send
        self.ends: dict[str, int] = {}  # replica -> durable end it reported in this epoch
        self.parked: dict[str, wire.Fetch] = {}

    # -- the replicas' requests ---------------------------------------------------------

    def on_fetch(self, peer: str, fetch: wire.Fetch) -> None:
        if fetch.epoch != self.epoch or peer not in self.replicas:
            return  # a replica of another epoch: it learns the current one from the metadata
        if fetch.want:
            self.parked.pop(peer, None)  # its earlier request is answered by this one
        log_ = self.queue.log
        cut = self._diverges(fetch)
        if cut is not None:
            self.send(peer, wire.Truncate(fetch.vhost, fetch.name, self.epoch, cut))
            return
        if fetch.log_epoch == self.epoch:
            self.ends[peer] = fetch.durable_end
            self._recompute()
        if not fetch.want:
            return
        if fetch.end < log_.next_offset or fetch.log_epoch != self.epoch or fetch.committed < self.queue.committed_end:
            self._answer(peer, fetch)
        else:
            self.parked[peer] = fetch

    def _diverges(self, fetch: wire.Fetch) -> int | None:
        """Where a replica must cut its log to be a prefix of this one; None if it is one."""
        log_ = self.queue.log
        if fetch.end > log_.next_offset:
            return log_.next_offset
        if fetch.last_first < 0 or fetch.end <= log_.first_offset:
            return None  # empty, or behind this log's head (it restarts from the head)
        ref = log_.chunk_for(fetch.last_first)
        if ref is None or ref.first_offset != fetch.last_first or ref.next_offset != fetch.end:
            return fetch.last_first
        header, _ = ref.header()
        return None if header.crc == fetch.last_crc else fetch.last_first

    def _answer(self, peer: str, fetch: wire.Fetch) -> None:
        log_ = self.queue.log
        chunks: list[bytes] = []
        offset, size = max(fetch.end, log_.first_offset), 0
        while size < wire.BATCH_BYTES and offset < log_.next_offset:
            ref = log_.chunk_for(offset)
            if ref is None:
                break
            data = log_.chunk_bytes(ref)
            chunks.append(data)
            size += len(data)
            offset = ref.next_offset
        self.send(peer, wire.Chunks(fetch.vhost, fetch.name, self.epoch, self.queue.committed_end, chunks))

    # -- the leader's own writes ------------------------------------------------------

    def appended(self, durable_end: int) -> None:
        """Chunks are on this node's disk: count them, and send them to the waiting replicas."""
        self._recompute()
        self._wake_parked()

    def _recompute(self) -> None:
        ends = sorted((self.queue.log.next_offset, *(self.ends.get(r, 0) for r in self.replicas if r != self.me)),
                      reverse=True)  # fmt: skip
        committed = ends[len(self.replicas) // 2]
        if committed > self.queue.committed_end:
            self.queue.advance(committed)
            self._wake_parked()  # they learn the new committed end

    def _wake_parked(self) -> None:
        parked, self.parked = self.parked, {}
        for peer, fetch in parked.items():
            self._answer(peer, fetch)
