"""One segment of a stream: a file of chunks and its index.

`NNNNNNNNNNNNNNNNNNNN.segment` (named by the first offset it holds) holds
chunks back to back; `.index` beside it one fixed record per chunk (first
offset, timestamp, file position, count, size), so a reader finds the chunk
of an offset or a timestamp by bisection without reading the segment. The
index is kept in memory as arrays (32 bytes a chunk) for the segment being
written and for the few sealed ones readers use at the moment.

Writes (`write`) run on the stream's writer thread at positions the event
loop allocated, one write in flight per stream; the entries become visible
(`commit`) only after the fsync, so readers never see a chunk a crash could
take back. The index file is not fsynced: `open` rebuilds what it lacks from
the chunk headers, checks the last chunk's CRC and cuts a torn tail.
"""

from __future__ import annotations

import bisect
import os
import struct
from array import array

from queues.stream.chunk import HEADER, ChunkHeader

__all__ = ["INDEX_ENTRY", "Segment"]

INDEX_ENTRY = struct.Struct(">QqQII")  # first offset, timestamp, position, count, size


def _empty_columns() -> tuple[array, ...]:
    return array("Q"), array("q"), array("Q"), array("I"), array("I")


class Segment:
    def __init__(self, directory: str, first_offset: int) -> None:
        self.first_offset = first_offset
        self.path = os.path.join(directory, f"{first_offset:020d}.segment")
        self.index_path = self.path[: -len(".segment")] + ".index"
        self._columns: tuple[array, ...] | None = _empty_columns()
        self.chunks = 0  # committed
        self._next_offset = first_offset
        self.last_timestamp = 0
        self.size = 0  # bytes committed
        self.end = 0  # bytes allocated (committed + in flight): the next chunk's position
        self.allocated = 0  # chunks allocated
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        self.index_fd = os.open(self.index_path, os.O_RDWR | os.O_CREAT, 0o644)

    # -- state ---------------------------------------------------------------------

    @property
    def next_offset(self) -> int:
        return self._next_offset

    # The index columns: in memory for the segment being written, and for a
    # sealed one only while readers use it (StreamLog keeps a few loaded), so a
    # long stream holds a summary per segment, not 32 bytes per chunk.
    def _cols(self) -> tuple[array, ...]:
        if self._columns is None:
            raw = os.pread(self.index_fd, self.chunks * INDEX_ENTRY.size, 0)
            cols = _empty_columns()
            for entry in INDEX_ENTRY.iter_unpack(raw[: self.chunks * INDEX_ENTRY.size]):
                for column, value in zip(cols, entry, strict=True):
                    column.append(value)
            self._columns = cols
        return self._columns

    @property
    def loaded(self) -> bool:
        return self._columns is not None

    def release(self) -> None:
        """Drops the in-memory index of a sealed segment (read again from its file when needed)."""
        self._columns = None

    offsets = property(lambda self: self._cols()[0])
    timestamps = property(lambda self: self._cols()[1])
    positions = property(lambda self: self._cols()[2])
    counts = property(lambda self: self._cols()[3])
    sizes = property(lambda self: self._cols()[4])

    def chunk_for(self, offset: int) -> int:
        """The index of the chunk holding `offset`, or of the first after it."""
        i = bisect.bisect_right(self.offsets, offset) - 1
        if i < 0:
            return 0
        return i if offset < self.offsets[i] + self.counts[i] else i + 1

    def chunk_at_or_after(self, timestamp: int) -> int:
        """The first chunk whose timestamp is at or after `timestamp` (chunks: len when none)."""
        return bisect.bisect_left(self.timestamps, timestamp)

    # -- writing (the writer thread) and committing (the loop) --------------------------

    def allocate(self, size: int) -> tuple[int, int]:
        """The loop reserves room for a chunk: its file position and index slot."""
        position, slot = self.end, self.allocated
        self.end += size
        self.allocated += 1
        return position, slot

    def write(self, position: int, slot: int, chunk: bytes, entry: bytes) -> None:
        os.pwrite(self.fd, chunk, position)
        os.pwrite(self.index_fd, entry, slot * INDEX_ENTRY.size)

    def sync(self) -> None:
        os.fsync(self.fd)

    def commit(self, first: int, timestamp: int, position: int, count: int, size: int) -> None:
        for column, value in zip(self._cols(), (first, timestamp, position, count, size), strict=True):
            column.append(value)
        self.chunks += 1
        self._next_offset = first + count
        self.last_timestamp = timestamp
        self.size = position + size

    # -- reading (the loop: one chunk at a time) ------------------------------------------

    def read_header(self, i: int) -> tuple[ChunkHeader, bytes]:
        """The chunk's header and Bloom filter bytes."""
        raw = os.pread(self.fd, HEADER.size + 255, self.positions[i])
        header = ChunkHeader.parse(raw)
        if header is None:
            raise OSError(f"{self.path}: no chunk at {self.positions[i]}")
        return header, raw[HEADER.size : HEADER.size + header.bloom_len]

    def read_data(self, i: int, header: ChunkHeader) -> bytes:
        return os.pread(self.fd, header.data_len, self.positions[i] + HEADER.size + header.bloom_len)

    # -- lifecycle ---------------------------------------------------------------------

    def recover(self) -> None:
        """Loads the index, adds the chunks it lacks from the segment's
        headers, checks the last chunk's CRC and cuts a torn tail."""
        file_size = os.fstat(self.fd).st_size
        raw = os.pread(self.index_fd, os.fstat(self.index_fd).st_size, 0)
        for pos in range(0, len(raw) - INDEX_ENTRY.size + 1, INDEX_ENTRY.size):
            first, ts, position, count, size = INDEX_ENTRY.unpack_from(raw, pos)
            if position != self.size or position + size > file_size:
                break  # an entry the index kept but not its chunk, or out of order: rebuilt below
            self.commit(first, ts, position, count, size)
        while self.size < file_size:  # chunks written but not indexed
            header = ChunkHeader.parse(os.pread(self.fd, HEADER.size, self.size))
            if header is None or self.size + header.size > file_size or header.first_offset != self.next_offset:
                break
            self.commit(header.first_offset, header.timestamp, self.size, header.count, header.size)
        while self.chunks and not self._last_chunk_intact():
            self._drop_last()
        os.ftruncate(self.fd, self.size)
        os.ftruncate(self.index_fd, self.chunks * INDEX_ENTRY.size)
        self._rewrite_index()
        self.end, self.allocated = self.size, self.chunks

    def _last_chunk_intact(self) -> bool:
        i = self.chunks - 1
        raw = os.pread(self.fd, self.sizes[i], self.positions[i])
        header = ChunkHeader.parse(raw)
        if header is None or header.size != len(raw):
            return False
        bloom_end = HEADER.size + header.bloom_len
        return header.check(raw[: HEADER.size], raw[HEADER.size : bloom_end], raw[bloom_end:])

    def _drop_last(self) -> None:
        for column in self._cols():
            column.pop()
        self.chunks -= 1
        offsets, counts, timestamps = self.offsets, self.counts, self.timestamps
        self._next_offset = offsets[-1] + counts[-1] if self.chunks else self.first_offset
        self.last_timestamp = timestamps[-1] if self.chunks else 0
        self.size = self.positions[-1] + self.sizes[-1] if self.chunks else 0

    def truncate_last(self) -> None:
        """Drops the newest committed chunk from the files (fsynced)."""
        self._drop_last()
        os.ftruncate(self.fd, self.size)
        os.ftruncate(self.index_fd, self.chunks * INDEX_ENTRY.size)
        os.fsync(self.fd)
        self.end, self.allocated = self.size, self.chunks

    def _rewrite_index(self) -> None:
        entries = b"".join(INDEX_ENTRY.pack(*row) for row in zip(*self._cols(), strict=True))
        os.pwrite(self.index_fd, entries, 0)

    def close(self) -> None:
        for fd in (self.fd, self.index_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        self.fd = self.index_fd = -1

    def remove(self) -> None:
        self.close()
        for path in (self.path, self.index_path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
