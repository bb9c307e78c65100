"""A stream's log: its segments in offset order, appended to by flushes and
trimmed from the head by retention.

Positions are allocated on the event loop (`plan`), bytes written and
fsynced off it (`write`, on a worker thread, one batch in flight), and the
chunks made visible back on the loop (`commit`). Offsets are dense: the
n-th message ever appended has offset n, whatever retention removed since.
"""

from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import dataclass

from queues.stream.chunk import HEADER, ChunkHeader, Record, decode_records, encode_chunk
from queues.stream.config import StreamConfig
from queues.stream.segment import INDEX_ENTRY, Segment
from storage.faults import DiskFaults

__all__ = ["ChunkRef", "StreamLog", "WritePlan"]

LOADED_SEALED = 4  # sealed segments whose index stays in memory (readers a little behind the head)


@dataclass(slots=True)
class WritePlan:
    """One chunk on its way to disk."""

    segment: Segment
    position: int
    slot: int
    first_offset: int
    count: int
    timestamp: int
    chunk: bytes


@dataclass(slots=True, frozen=True)
class ChunkRef:
    """Where a committed chunk is, for a reader."""

    segment: Segment
    index: int

    @property
    def first_offset(self) -> int:
        return self.segment.offsets[self.index]

    @property
    def next_offset(self) -> int:
        return self.segment.offsets[self.index] + self.segment.counts[self.index]

    def header(self) -> tuple[ChunkHeader, bytes]:
        return self.segment.read_header(self.index)

    def records(self, header: ChunkHeader) -> list[Record]:
        return decode_records(header, self.segment.read_data(self.index, header))


class StreamLog:
    def __init__(self, directory: str, config: StreamConfig) -> None:
        self.directory = directory
        self.config = config
        os.makedirs(directory, exist_ok=True)
        self.segments: list[Segment] = []
        self._loaded: list[Segment] = []  # sealed segments with their index in memory, least recently used first
        self.allocated_offset = 0  # the offset the next planned message gets
        self._open()

    def _open(self) -> None:
        names = sorted(n for n in os.listdir(self.directory) if n.endswith(".segment"))
        for name in names:
            segment = Segment(self.directory, int(name[: -len(".segment")]))
            segment.recover()
            self.segments.append(segment)
        # An empty segment is a roll that crashed before its first chunk: its name may run ahead of
        # the previous segment's end once a torn tail is cut, so it goes, unless it alone says where
        # the offsets stand (every segment empty).
        empty = [s for s in self.segments if not s.chunks]
        if len(empty) < len(self.segments):
            doomed = empty
        else:
            doomed = empty[:-1]
        for segment in doomed:
            segment.remove()
            self.segments.remove(segment)
        for segment in self.segments[:-1]:
            segment.release()
        self.allocated_offset = self.next_offset

    # -- offsets -----------------------------------------------------------------------

    @property
    def first_offset(self) -> int:
        """The oldest offset still held (== next_offset when empty)."""
        for segment in self.segments:
            if segment.chunks:
                return segment.first_offset  # named by its first chunk's offset
        return self.next_offset

    @property
    def next_offset(self) -> int:
        """One past the newest committed offset."""
        return self.segments[-1].next_offset if self.segments else 0

    @property
    def message_count(self) -> int:
        return self.next_offset - self.first_offset

    @property
    def bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def last_chunk_offset(self) -> int:
        """The first offset of the newest chunk (the `last` offset spec)."""
        for segment in reversed(self.segments):
            if segment.chunks:
                return segment.offsets[-1]
        return self.next_offset

    def offset_for_timestamp(self, timestamp: int) -> int:
        """The first offset of the first chunk written at or after `timestamp` (ms)."""
        for segment in self.segments:
            if segment.chunks and segment.last_timestamp >= timestamp:
                self._touch(segment)
                return segment.offsets[segment.chunk_at_or_after(timestamp)]
        return self.next_offset

    def chunk_for(self, offset: int) -> ChunkRef | None:
        """The committed chunk holding `offset` (or the first after it); None at the end."""
        for segment in self.segments:
            if segment.chunks and offset < segment.next_offset:
                self._touch(segment)
                return ChunkRef(segment, segment.chunk_for(offset))
        return None

    def _touch(self, segment: Segment) -> None:
        """Keeps the index of at most LOADED_SEALED sealed segments in memory, the most recently read."""
        if segment is self.segments[-1]:
            return
        if segment in self._loaded:
            self._loaded.remove(segment)
        self._loaded.append(segment)
        while len(self._loaded) > LOADED_SEALED:
            old = self._loaded.pop(0)
            if old is not self.segments[-1]:
                old.release()

    # -- appending ---------------------------------------------------------------------

    def plan(self, records: list[bytes], filter_values: list[str | None], timestamp: int) -> WritePlan:
        """Allocates the next chunk (rolling to a new segment when the current one is full);
        `records` as encode_chunk takes them, one filter value per record."""
        first = self.allocated_offset
        chunk = encode_chunk(first, timestamp, records, filter_values, self.config.filter_bytes)
        segment = self.segments[-1] if self.segments else None
        if segment is None or (segment.end and segment.end + len(chunk) > self.config.segment_bytes):
            segment = Segment(self.directory, first)
            self.segments.append(segment)
        position, slot = segment.allocate(len(chunk))
        self.allocated_offset += len(filter_values)
        return WritePlan(segment, position, slot, first, len(filter_values), timestamp, chunk)

    def plan_raw(self, chunk: bytes) -> WritePlan:
        """A replica's chunk, exactly as the leader wrote it, at the next offset
        (raises ValueError for a chunk that is not intact or out of place)."""
        header = ChunkHeader.parse(chunk)
        bloom_end = HEADER.size + (header.bloom_len if header else 0)
        if header is None or header.size != len(chunk) or \
                not header.check(chunk[: HEADER.size], chunk[HEADER.size : bloom_end], chunk[bloom_end:]):  # fmt: skip
            raise ValueError("a chunk whose CRC or size does not match")
        if header.first_offset != self.allocated_offset:
            raise ValueError(f"a chunk at offset {header.first_offset}, expected {self.allocated_offset}")
        segment = self.segments[-1] if self.segments else None
        if segment is None or (segment.end and segment.end + len(chunk) > self.config.segment_bytes):
            segment = Segment(self.directory, header.first_offset)
            self.segments.append(segment)
        position, slot = segment.allocate(len(chunk))
        self.allocated_offset += header.count
        return WritePlan(segment, position, slot, header.first_offset, header.count, header.timestamp, chunk)

    def chunk_bytes(self, ref: ChunkRef) -> bytes:
        """A committed chunk's bytes as written (what a replica fetches)."""
        segment, i = ref.segment, ref.index
        return os.pread(segment.fd, segment.sizes[i], segment.positions[i])

    def last_chunk(self) -> tuple[int, int]:
        """(first offset, CRC) of the newest chunk; (-1, 0) when empty: how a
        replica names its tail to the leader."""
        for segment in reversed(self.segments):
            if segment.chunks:
                header, _ = segment.read_header(segment.chunks - 1)
                return header.first_offset, header.crc
        return -1, 0

    def truncate(self, offset: int) -> None:
        """Drops every chunk that ends past `offset` (whole chunks), fsynced:
        a replica cutting the tail a new leader does not have. No write may
        be in flight."""
        while self.segments and self.next_offset > offset:
            segment = self.segments[-1]
            if not segment.chunks:
                if len(self.segments) == 1:
                    break
                self.segments.pop().remove()
                continue
            segment.truncate_last()
            if not segment.chunks and len(self.segments) > 1:
                self.segments.pop().remove()
        if self.segments and not self.segments[-1].chunks and self.next_offset > offset:
            self.segments.pop().remove()  # the head itself goes: start again where the leader's log starts
            self.segments.append(Segment(self.directory, offset))
        self.abandon()

    def reset(self, offset: int) -> None:
        """Drops everything and starts empty at `offset` (the leader's head moved past this log's end)."""
        for segment in self.segments:
            segment.remove()
        self._loaded.clear()
        self.segments = [Segment(self.directory, offset)]
        self.allocated_offset = offset

    @staticmethod
    def write(plans: list[WritePlan], faults: DiskFaults | None = None) -> None:
        """The worker thread: the chunks and index entries, then one fsync per segment
        (`faults`: injected test faults, asked before each, storage/faults.py)."""
        for p in plans:
            entry = INDEX_ENTRY.pack(p.first_offset, p.timestamp, p.position, p.count, len(p.chunk))
            if faults is not None:
                faults.check("stream", "write")
            p.segment.write(p.position, p.slot, p.chunk, entry)
        for segment in {id(p.segment): p.segment for p in plans}.values():
            if faults is not None:
                faults.check("stream", "fsync")
            segment.sync()

    @staticmethod
    def commit(plans: list[WritePlan]) -> None:
        for p in plans:
            p.segment.commit(p.first_offset, p.timestamp, p.position, p.count, len(p.chunk))

    def abandon(self) -> None:
        """The write in flight failed: forget every allocation past the
        committed chunks (and the segments it rolled to), so offsets, file
        positions and index slots go on from there."""
        while len(self.segments) > 1 and not self.segments[-1].chunks:
            self.segments.pop().remove()
        for segment in self.segments:
            segment.end, segment.allocated = segment.size, segment.chunks
        self.allocated_offset = self.next_offset

    # -- retention ---------------------------------------------------------------------

    def apply_retention(self, now_ms: int, config: StreamConfig | None = None) -> int:
        """Deletes whole segments from the head while the stream is over
        x-max-length-bytes, or their newest message is older than x-max-age.
        The newest segment always stays. Returns the messages removed."""
        config = config or self.config
        removed = 0
        total = self.bytes
        while len(self.segments) > 1:
            head = self.segments[0]
            over_size = config.max_bytes is not None and total > config.max_bytes
            too_old = config.max_age_s is not None and head.chunks and \
                head.last_timestamp < now_ms - config.max_age_s * 1000  # fmt: skip
            if not (over_size or too_old):
                break
            total -= head.size
            removed += head.next_offset - head.first_offset if head.chunks else 0
            head.remove()
            self.segments.pop(0)
            if head in self._loaded:
                self._loaded.remove(head)
        return removed

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        for segment in self.segments:
            segment.close()

    def retire(self) -> None:
        """Moves the files out of the way at once (a stream of the same name
        may be declared again before `destroy` runs)."""
        retired = f"{self.directory}.deleted-{uuid.uuid4().hex}"
        try:
            os.rename(self.directory, retired)
            self.directory = retired
        except FileNotFoundError:
            pass

    def destroy(self) -> None:
        self.close()
        shutil.rmtree(self.directory, ignore_errors=True)

