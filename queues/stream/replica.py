"""A replica's side of stream replication: pulls chunks from the leader, writes
them as they are, and reports how far its log is durable.

One fetch is out at a time (queues/stream/leader.py answers it): the answer
is written and fsynced on a worker thread, and only then does the next
fetch go, carrying the new end; that is the replica's acknowledgement. A
chunk whose CRC does not match, or that does not start where the log ends,
is not written (the fetch goes again). A `committed` notice only moves the
committed end: the leader keeps the fetch. A `truncate` cuts the log's tail
the leader does not have. The first answer of a new epoch records the epoch
in the log's directory (queues/stream/log_epoch.py) before the log takes
anything from it: an answer, since the leader answers only a fetch whose
tail it checked; a new leader's announcement only makes it fetch.

A candidate electing a new leader `stop`s the replica: it then takes
nothing more of that epoch and reports its log, so the log it reported is
the log it keeps. The fence holds until the replica follows a newer epoch,
never lifts by time alone: the candidate's election may be applied any time
later, and had the old leader meanwhile committed chunks with this copy's
fetches, the elected log would lack them. When no new epoch came within
FENCE_S and the replica reaches its leader again, its node has that leader
re-elected for the next epoch (`fence_overdue`, node/vhosts/stream_failover.py):
of that and a late election the metadata applies one, and either way the
leader of the next epoch has every committed chunk. The fence outlives a
restart (the file `fence`, queues/stream/log_epoch.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from queues.stream import wire
from queues.stream.chunk import ChunkHeader
from queues.stream.config import StreamConfig
from queues.stream.disk import StreamDisk
from queues.stream.log import StreamLog, WritePlan
from queues.stream.log_epoch import read_fence, read_log_epoch, write_fence, write_log_epoch

__all__ = ["StreamReplica"]

log = logging.getLogger("warren.stream")

RETRY_S = 3.0  # a fetch unanswered this long goes again (lost with a stream, or the leader restarted)
FENCE_S = 10.0  # how long a stop waits for a new epoch before its node re-elects the leader


class StreamReplica:
    def __init__(self, vhost: str, name: str, directory: str, config: StreamConfig, leader: str, epoch: int,
                 send: Callable[[str, object], None], loop: asyncio.AbstractEventLoop,
                 disk: StreamDisk | None = None) -> None:  # fmt: skip
        self.vhost = vhost
        self.disk = disk if disk is not None else StreamDisk()  # the node's: a full disk raises the alarm
        self.name = name
        self.directory = directory
        self.log = StreamLog(directory, config)
        self.log_epoch = read_log_epoch(directory)
        self.leader = leader
        self.epoch = epoch
        self.send = send
        self.loop = loop
        self.committed_end = self.log.first_offset  # what it learned from the leader
        self.fenced_epoch = read_fence(directory)  # a stop before a restart still holds
        self._fenced_until = time.monotonic() + FENCE_S
        self._writing = False
        self._closed = False
        self._on_idle: Callable[[], None] | None = None
        self._sent_at = 0.0
        self.on_commit: Callable[[], None] = lambda: None  # readers of this copy (node/vhosts/stream_follower.py)
        self._timer = loop.call_later(RETRY_S, self._retry)

    # -- fetching ----------------------------------------------------------------------

    def fetch(self) -> None:
        if self._closed or self._writing or self._fenced():
            return
        first, crc = self.log.last_chunk()
        self._sent_at = time.monotonic()
        self.send(self.leader, wire.Fetch(self.vhost, self.name, self.epoch, self.log.next_offset, first, crc,
                                          self.log_epoch, self.committed_end))  # fmt: skip

    def _retry(self) -> None:
        self._timer = self.loop.call_later(RETRY_S, self._retry)
        if not self._writing and time.monotonic() - self._sent_at >= RETRY_S:
            self.fetch()
        if not self._writing and self.log.config.max_age_s is not None:  # age retention with no chunk coming
            self.log.apply_retention(int(time.time() * 1000))

    def _fenced(self) -> bool:
        return self.fenced_epoch >= self.epoch

    def fence_overdue(self) -> bool:
        """Stopped for this epoch FENCE_S ago or more, and no newer epoch came."""
        return self._fenced() and time.monotonic() >= self._fenced_until

    def on_chunks(self, msg: wire.Chunks) -> None:
        if msg.epoch != self.epoch or self._writing or self._closed or self._fenced():
            return
        if msg.committed == wire.ANNOUNCED:
            # a new leader, which has not checked this log: recording its epoch now would make
            # a tail of an older epoch that it would cut look like its own to the next failover
            self.fetch()
            return
        try:
            if msg.chunks:
                self._place(msg.chunks[0])
            plans = [self.log.plan_raw(chunk) for chunk in msg.chunks]
        except ValueError as e:
            log.warning("stream %s/%s: chunks from %s refused: %s", self.vhost, self.name, self.leader, e)
            self.log.abandon()
            return  # the retry timer fetches again
        new_epoch = self.epoch if self.log_epoch != self.epoch else None
        self._writing = True
        future = self.loop.run_in_executor(None, self._write, plans, new_epoch)
        future.add_done_callback(lambda f: self._written(f, plans, msg.committed, new_epoch))

    def _place(self, chunk: bytes) -> None:
        """The leader's log starts past this one's end (retention there): start empty at its head."""
        header = ChunkHeader.parse(chunk)
        if header is not None and header.first_offset > self.log.allocated_offset:
            self.log.reset(header.first_offset)

    def _write(self, plans: list[WritePlan], new_epoch: int | None) -> None:
        if new_epoch is not None:
            write_log_epoch(self.directory, new_epoch)
        if plans:
            StreamLog.write(plans, self.disk.faults)

    def _written(self, future: asyncio.Future, plans: list[WritePlan], committed: int, new_epoch: int | None) -> None:
        self._writing = False
        if self._on_idle is not None:
            on_idle, self._on_idle = self._on_idle, None
            on_idle()
            return
        error = future.exception()
        if error is not None:
            log.error("stream %s/%s: replica write failed: %s", self.vhost, self.name, error)
            self.log.abandon()
            self.disk.failed(f"{self.vhost}/{self.name} (replica)", sum(len(p.chunk) for p in plans), error)
            return  # the retry timer fetches again
        if new_epoch is not None:
            self.log_epoch = new_epoch
        StreamLog.commit(plans)
        self.disk.wrote(f"{self.vhost}/{self.name} (replica)")
        self.log.apply_retention(int(time.time() * 1000))  # the leader's rule on the same segments
        moved = self._learn_committed(committed)
        self.fetch()
        if moved:
            self.on_commit()

    def _learn_committed(self, committed: int) -> bool:
        """The leader's committed end, as far as this copy holds it; whether it moved."""
        before = self.committed_end
        self.committed_end = max(before, min(committed, self.log.next_offset))
        return self.committed_end > before

    def on_committed(self, msg: wire.Committed) -> None:
        """The committed end moved while this replica's fetch waits at the leader, which keeps
        it: readers may go further, and no new fetch goes (the leader answers the one it has)."""
        if msg.epoch != self.epoch or self.log_epoch != self.epoch or self._closed or self._fenced():
            return
        self._sent_at = time.monotonic()  # the leader holds the fetch: nothing to retry yet
        if self._learn_committed(msg.committed):
            self.on_commit()

    def on_truncate(self, msg: wire.Truncate) -> None:
        if msg.epoch != self.epoch or self._writing or self._closed or self._fenced():
            return
        log.info("stream %s/%s: truncating from %d to %d for epoch %d", self.vhost, self.name,
                 self.log.next_offset, msg.offset, msg.epoch)  # fmt: skip
        self.log.truncate(msg.offset)
        self.committed_end = min(self.committed_end, self.log.next_offset)
        self.fetch()

    # -- policies ----------------------------------------------------------------------

    def apply_config(self, config: StreamConfig) -> None:
        """A policy changed the stream's limits: this copy cuts segments and retains by them too."""
        self.log.config = config
        if not self._writing and not self._closed:
            self.log.apply_retention(int(time.time() * 1000))

    # -- failover ----------------------------------------------------------------------

    def stop(self, epoch: int) -> tuple[int, int]:
        """Fenced for `epoch`: (log epoch, end) of the log it keeps."""
        if epoch > self.fenced_epoch:
            self.fenced_epoch = epoch
            if not self._closed:  # a destroyed copy's directory is not made again
                write_fence(self.directory, epoch)
        self._fenced_until = time.monotonic() + FENCE_S
        end = self.log.allocated_offset if self._writing else self.log.next_offset  # a write in flight lands
        return self.log_epoch, end

    def follow(self, leader: str, epoch: int) -> None:
        """A new epoch from the metadata."""
        self.leader, self.epoch = leader, epoch
        self.fetch()

    # -- lifecycle ---------------------------------------------------------------------

    def close(self, then: Callable[[], None] | None = None) -> None:
        """Files closed once the write in flight returns, then `then`."""
        self._closed = True
        self._timer.cancel()

        def closed() -> None:
            self.log.close()
            if then is not None:
                then()

        if self._writing:
            self._on_idle = closed
        else:
            closed()

    def destroy(self) -> None:
        self.close(lambda: self.log.destroy())
