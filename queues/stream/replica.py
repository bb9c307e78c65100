"""A replica's side of stream replication: pulls chunks from the leader, writes
them as they are, and reports how far its log is durable.

One request is out at a time (queues/stream/leader.py answers it), and it
goes as soon as an answer's chunks are planned: the next batch travels
while this one is written and fsynced on a worker thread (an answer that
comes meanwhile waits, and is written next, in one write). When a write
lands the replica reports its new durable end at once, in its next request
or, while one is out, in a report that is not answered; that report is what
lets the leader confirm. So a replica under load always has a batch on the
way, and the leader hears of each fsync one message after it. A chunk
whose CRC does not match, or that does not start where the log ends, is not
written (the fetch goes again); an answer older than the log's end (a
retried request answered twice) is dropped. A `truncate` cuts the log's
tail the leader does not have. The first answer of a new epoch records the epoch
in the log's directory (queues/stream/log_epoch.py) before the log takes
anything from it.

A candidate electing a new leader `stop`s the replica: it then takes
nothing more of that epoch (for FENCE_S, in case no election follows) and
reports its log, so the log it reported is the log it keeps.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from queues.stream import wire
from queues.stream.chunk import ChunkHeader
from queues.stream.config import StreamConfig
from queues.stream.log import StreamLog, WritePlan
from queues.stream.log_epoch import read_log_epoch, write_log_epoch

__all__ = ["StreamReplica"]

log = logging.getLogger("warren.stream")

RETRY_S = 3.0  # a fetch unanswered this long goes again (lost with a stream, or the leader restarted)
FENCE_S = 10.0  # how long a stop holds when no new epoch follows


class StreamReplica:
    def __init__(self, vhost: str, name: str, directory: str, config: StreamConfig, leader: str, epoch: int,
                 send: Callable[[str, object], None], loop: asyncio.AbstractEventLoop) -> None:  # fmt: skip
        self.vhost = vhost
        self.name = name
        self.directory = directory
        self.log = StreamLog(directory, config)
        self.log_epoch = read_log_epoch(directory)
        self.leader = leader
        self.epoch = epoch
        self.send = send
        self.loop = loop
        self.committed_end = self.log.first_offset  # what it learned from the leader
        self.fenced_epoch = 0
        self._fenced_until = 0.0
        self._writing = False
        self._requested = False  # a request is out, not answered yet
        self._waiting: list[wire.Chunks] = []  # answers that came while a write was out: written next
        self._tail: tuple[int, int] | None = None  # (first offset, CRC) of the last chunk planned; None: read the log
        self._closed = False
        self._on_idle: Callable[[], None] | None = None
        self._sent_at = 0.0
        self.on_commit: Callable[[], None] = lambda: None  # readers of this copy (node/vhosts/stream_follower.py)
        self._timer = loop.call_later(RETRY_S, self._retry)

    # -- fetching ----------------------------------------------------------------------

    def fetch(self) -> None:
        """Asks for what follows the log's end (once no write is out: its end is the log's then)."""
        if self._closed or self._writing or self._fenced():
            return
        self._tail = None
        self._request()

    def _request(self) -> None:
        """Asks for what follows what this replica has taken, written or not; reports what is durable."""
        self._requested = True
        self._sent_at = time.monotonic()
        self._report(want=True)

    def _report(self, want: bool) -> None:
        first, crc = self._tail if self._tail is not None else self.log.last_chunk()
        self.send(self.leader, wire.Fetch(self.vhost, self.name, self.epoch, self.log.allocated_offset, first, crc,
                                          self.log_epoch, self.committed_end, self.log.next_offset, want))  # fmt: skip

    def _retry(self) -> None:
        self._timer = self.loop.call_later(RETRY_S, self._retry)
        if not self._writing and time.monotonic() - self._sent_at >= RETRY_S:
            self.fetch()

    def _fenced(self) -> bool:
        return self.fenced_epoch >= self.epoch and time.monotonic() < self._fenced_until

    def on_chunks(self, msg: wire.Chunks) -> None:
        if msg.epoch != self.epoch or self._closed or self._fenced():
            return
        self._requested = False
        if self._writing:
            self._waiting.append(msg)  # written once the write out lands
        else:
            self._take([msg])

    def _take(self, answers: list[wire.Chunks]) -> None:
        """Writes the answers' chunks after the log's end, in one write, and asks for
        the next batch at once; with nothing to write, reports the durable end."""
        chunks = self._new_chunks(answers)
        committed = max(msg.committed for msg in answers)
        try:
            if chunks:
                self._place(chunks[0])
            plans = [self.log.plan_raw(chunk) for chunk in chunks]
        except ValueError as e:
            log.warning("stream %s/%s: chunks from %s refused: %s", self.vhost, self.name, self.leader, e)
            self.log.abandon()
            self._tail = None
            return  # the retry timer fetches again
        new_epoch = self.epoch if self.log_epoch != self.epoch else None
        if not plans and new_epoch is None:
            self._learn(committed)
            self._after_write()
            return
        self._writing = True
        future = self.loop.run_in_executor(None, self._write, plans, new_epoch)
        future.add_done_callback(lambda f: self._written(f, plans, committed, new_epoch))
        if plans:
            header = ChunkHeader.parse(plans[-1].chunk)
            assert header is not None  # plan_raw checked it
            self._tail = (header.first_offset, header.crc)
            self._request()  # the next batch comes while this one is written

    def _new_chunks(self, answers: list[wire.Chunks]) -> list[bytes]:
        """The answers' chunks, less an answer that starts before the log's end (a retried request answered twice)."""
        chunks: list[bytes] = []
        end = self.log.allocated_offset
        for msg in answers:
            header = ChunkHeader.parse(msg.chunks[0]) if msg.chunks else None
            if header is None or header.first_offset < end:
                continue  # empty, or this log has it already (an intact chunk is plan_raw's to check)
            last = ChunkHeader.parse(msg.chunks[-1])
            chunks.extend(msg.chunks)
            end = last.first_offset + last.count if last is not None else end
        return chunks

    def _place(self, chunk: bytes) -> None:
        """The leader's log starts past this one's end (retention there): start empty at its head."""
        header = ChunkHeader.parse(chunk)
        if header is not None and header.first_offset > self.log.allocated_offset:
            self.log.reset(header.first_offset)

    def _write(self, plans: list[WritePlan], new_epoch: int | None) -> None:
        if new_epoch is not None:
            write_log_epoch(self.directory, new_epoch)
        if plans:
            StreamLog.write(plans)

    def _written(self, future: asyncio.Future, plans: list[WritePlan], committed: int, new_epoch: int | None) -> None:
        self._writing = False
        if self._on_idle is not None:
            on_idle, self._on_idle = self._on_idle, None
            on_idle()
            return
        waiting, self._waiting = self._waiting, []
        error = future.exception()
        if error is not None:
            log.error("stream %s/%s: replica write failed: %s", self.vhost, self.name, error)
            self.log.abandon()
            self._tail = None
            return  # the retry timer fetches again
        if new_epoch is not None:
            self.log_epoch = new_epoch
        StreamLog.commit(plans)
        self.log.apply_retention(int(time.time() * 1000))  # the leader's rule on the same segments
        self._learn(committed)
        if waiting and not self._fenced():
            self._take(waiting)  # its request (or report) says this write landed
        else:
            self._after_write()

    def _after_write(self) -> None:
        """Reports the durable end: in a new request, or alone while the request out waits for its answer."""
        if self._requested and not self._fenced():
            self._report(want=False)
        else:
            self.fetch()

    def _learn(self, committed: int) -> None:
        before = self.committed_end
        self.committed_end = max(self.committed_end, min(committed, self.log.next_offset))
        if self.committed_end > before:
            self.on_commit()

    def on_truncate(self, msg: wire.Truncate) -> None:
        if msg.epoch != self.epoch or self._closed or self._fenced():
            return
        if self._writing:
            self._requested = False  # the write lands first, then the fetch that follows it is told again
            return
        self._waiting = []
        log.info("stream %s/%s: truncating from %d to %d for epoch %d", self.vhost, self.name,
                 self.log.next_offset, msg.offset, msg.epoch)  # fmt: skip
        self.log.truncate(msg.offset)
        self.committed_end = min(self.committed_end, self.log.next_offset)
        self.fetch()

    # -- failover ----------------------------------------------------------------------

    def stop(self, epoch: int) -> tuple[int, int]:
        """Fenced for `epoch`: (log epoch, end) of the log it keeps."""
        self.fenced_epoch = max(self.fenced_epoch, epoch)
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
