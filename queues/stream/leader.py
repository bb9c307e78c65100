"""The leader's side of stream replication: answers the replicas' fetches and
moves the committed end.

Replicas pull (queues/stream/replica.py). A fetch names the replica's end
and its last chunk; the leader first checks that tail against its own log
(same first offset, same CRC) and tells a replica whose tail it does not
have to truncate. A checked fetch from a replica that has recorded this
epoch counts as that replica's durable end; the committed end is the end a
majority of the replicas (the leader's own disk included) has reached.
Chunks go out as soon as a flush has cut them (`flushing`), from memory,
so the replicas write them while the leader's own write is out; once on
the leader's disk they are read back from it. A replica may so be ahead of
the leader's disk: its end counts only as far as the leader's own, so a
chunk is confirmed once a majority has it on disk and the leader among
them (readers read the leader's log), and a write that fails here makes
replicas that took its chunks cut them (their end is past this log's and
no longer among the chunks in flight). At most BATCH_BYTES per message
and one message per replica in flight: the replica's next fetch is its
acknowledgement. A fetch with nothing to send waits here ("parked") until
a flush cuts chunks, which carry the committed end; a new committed end
alone is sent to the waiting replicas only when no write is out here (at
the end of the loop turn), so a busy stream sends one message per flush
and replica, not one more per move of the committed end. Once every node
knows it (flag stream_commit_notices, `notices`), that news is a
`committed` notice and the replica's fetch stays parked here: before, it
was an answer without chunks, which ended the fetch, so the replica sent
another (a round trip per move of the committed end, a quarter to a third
of a busy leader's replication messages, and a flush cut meanwhile waited
for that fetch).

Nothing here does I/O but reading committed chunks; `send(peer, message)`
is the node's transport (node/vhosts/stream_replication.py).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from queues.stream import wire
from queues.stream.chunk import ChunkHeader
from queues.stream.log import WritePlan

__all__ = ["StreamLeader"]

log = logging.getLogger("warren.stream")

# How long a new committed end waits for a flush to carry it before a notice does: a busy
# stream cuts its next flush sooner (its publishers' confirms bring their next messages),
# and a replica's readers of an idle stream learn the end this much later.
NOTICE_DELAY_S = 0.005


class StreamLeader:
    def __init__(self, queue: Any, me: str, epoch: int, replicas: tuple[str, ...],
                 send: Callable[[str, object], None], notices: Callable[[], bool] = lambda: False,
                 on_lost_log: Callable[[], None] = lambda: None) -> None:  # fmt: skip
        self.queue = queue
        self.me = me
        self.epoch = epoch
        self.replicas = replicas
        self.send = send
        self.notices = notices  # whether every replica takes `committed` notices (flag stream_commit_notices)
        self.ends: dict[str, int] = {}  # replica -> durable end it reported in this epoch
        self.parked: dict[str, wire.Fetch] = {}
        self.flushed: list[WritePlan] = []  # chunks on their way to this node's disk, in offset order
        self._telling = False
        # a replica knows of committed chunks past this log's end: this log was lost (a wiped
        # node back as the leader the metadata still names). It then holds its publishes and
        # answers no fetch, which would cut the replicas' logs to its own, and `on_lost_log`
        # has the replica with the log elected (node/vhosts/stream_failover.py)
        self.stale = False
        self.on_lost_log = on_lost_log

    def announce(self) -> None:
        """Tells each replica that this node leads, which a replica takes as its cue to
        fetch: its first fetch may have come before this node led (and was dropped), and
        would otherwise go again only after its retry timer. It carries no committed end:
        nothing has checked the replica's log yet (wire.ANNOUNCED)."""
        for peer in self.replicas:
            if peer != self.me:
                self.send(peer, wire.Chunks(self.queue.vhost, self.queue.name, self.epoch, wire.ANNOUNCED, []))

    # -- the replicas' requests ---------------------------------------------------------

    def on_fetch(self, peer: str, fetch: wire.Fetch) -> None:
        if fetch.epoch != self.epoch or peer not in self.replicas or self.stale:
            return  # a replica of another epoch: it learns the current one from the metadata
        if self.queue.closed:
            return  # this node stops (or leads no more): its log, closing, cuts no replica's
        if fetch.committed > self.queue.log.next_offset:  # never so with this log: each committed chunk is on it
            log.error("stream %s/%s: %s knows of committed offsets up to %d, this leader's log ends at %d: its"
                      " log was lost; holding it until a replica with the log leads", self.queue.vhost,
                      self.queue.name, peer, fetch.committed, self.queue.log.next_offset)  # fmt: skip
            self.stale = True
            self.queue.hold()
            self.on_lost_log()
            return
        self.parked.pop(peer, None)  # its earlier fetch is answered by this one
        cut = self._diverges(fetch)
        if cut is not None:
            self.send(peer, wire.Truncate(fetch.vhost, fetch.name, self.epoch, cut))
            return
        if fetch.log_epoch == self.epoch:
            self.ends[peer] = fetch.end
            self._recompute()
        if fetch.end < self._sendable_end() or fetch.log_epoch != self.epoch:
            self._answer(peer, fetch)
        else:
            self.parked[peer] = fetch
            if fetch.committed < self.queue.committed_end:
                self._tell_committed_soon()

    def _diverges(self, fetch: wire.Fetch) -> int | None:
        """Where a replica must cut its log to be a prefix of this one; None if it is one."""
        log_ = self.queue.log
        if fetch.end > log_.next_offset:
            plan = self._flushed_at(fetch.last_first)
            if plan is not None and plan.first_offset + plan.count == fetch.end and _crc(plan.chunk) == fetch.last_crc:
                return None  # it has the chunks in flight here
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
        for plan in self.flushed:  # then what this node is writing: the replica writes it meanwhile
            if size >= wire.BATCH_BYTES:
                break
            if plan.first_offset == offset:
                chunks.append(plan.chunk)
                size += len(plan.chunk)
                offset += plan.count
        self.send(peer, wire.Chunks(fetch.vhost, fetch.name, self.epoch, self.queue.committed_end, chunks))

    # -- the leader's own writes ------------------------------------------------------

    def flushing(self, plans: list[WritePlan]) -> None:
        """A flush cut these chunks and writes them: the waiting replicas get them now."""
        self.flushed.extend(plans)
        self._wake_parked()

    def appended(self, durable_end: int) -> None:
        """Chunks are on this node's disk: count them, and send them to the waiting replicas."""
        self.flushed = [p for p in self.flushed if p.first_offset >= durable_end]
        self._recompute()
        self._tell_committed_soon()

    def abandoned(self) -> None:
        """The write in flight failed: its chunks will not be; replicas that took them cut them."""
        self.flushed = []
        end = self.queue.log.next_offset
        self.ends = {peer: min(e, end) for peer, e in self.ends.items()}
        for peer, fetch in list(self.parked.items()):
            if fetch.end > end:
                del self.parked[peer]
                self.send(peer, wire.Truncate(fetch.vhost, fetch.name, self.epoch, end))

    def _flushed_at(self, first_offset: int) -> WritePlan | None:
        for plan in self.flushed:
            if plan.first_offset == first_offset:
                return plan
        return None

    def _sendable_end(self) -> int:
        return self.flushed[-1].first_offset + self.flushed[-1].count if self.flushed else self.queue.log.next_offset

    def _recompute(self) -> None:
        own = self.queue.log.next_offset
        ends = sorted((own, *(self.ends.get(r, 0) for r in self.replicas if r != self.me)), reverse=True)
        committed = min(ends[len(self.replicas) // 2], own)  # a replica ahead of this disk counts to its end
        if committed > self.queue.committed_end:
            self.queue.advance(committed)
            self._tell_committed_soon()  # the replicas' readers read up to it

    def _wake_parked(self) -> None:
        parked, self.parked = self.parked, {}
        for peer, fetch in parked.items():
            self._answer(peer, fetch)

    def _tell_committed_soon(self) -> None:
        """The waiting replicas learn a new committed end, at the end of this loop turn (an
        answer without chunks ends their fetch) or, by notices, NOTICE_DELAY_S later (their
        fetch stays here meanwhile); a flush cut meanwhile carries it with its chunks."""
        if not self._telling:
            self._telling = True
            if self.notices():
                self.queue.loop.call_later(NOTICE_DELAY_S, self._tell_committed)
            else:
                self.queue.loop.call_soon(self._tell_committed)

    def _tell_committed(self) -> None:
        self._telling = False
        if self.flushed:
            return  # a write is out: its `appended` tells, unless the next flush's chunks do
        committed = self.queue.committed_end
        notices = self.notices()
        for peer, fetch in list(self.parked.items()):
            if fetch.committed < committed:
                if notices:  # the fetch stays here, as if it had named this committed end
                    self.parked[peer] = dataclasses.replace(fetch, committed=committed)
                    self.send(peer, wire.Committed(fetch.vhost, fetch.name, self.epoch, committed))
                else:
                    del self.parked[peer]
                    self._answer(peer, fetch)


def _crc(chunk: bytes) -> int:
    header = ChunkHeader.parse(chunk)
    return header.crc if header is not None else -1
