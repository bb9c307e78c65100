"""The durable local message store for classic queues, on RocksDB (rocksdict).

One RocksDB database per node, at `<data_dir>/messages`. Every queue's messages
live in it under queue-scoped, ordered keys, so recovery reads a queue in
enqueue order and deleting a queue is a single range tombstone.

Writes are buffered: `put`, `update`, `delete` and `delete_queue` go into the
*pending* WriteBatch and return a `Ticket`, a per-store counter that grows by
one per buffered write. `commit()` writes the pending batch and fsyncs it;
afterwards `durable_seq()` is at least every ticket the batch covered. Many
writes share one fsync: that is group commit. RocksDB alone does ~1.2M synced
puts/s in batches of 1,000 against ~6k/s with a sync per put
(/work/shared/MEASUREMENTS.md); here the Python cost of a put (~2 us) bounds
it first (bench/store.py). `group_commit.GroupCommitter` drives the split
form of `commit()` (`seal()` on the event loop, `write()` in a worker thread)
so the fsync never blocks the loop; this module has no asyncio in it. The
batches, tickets and the fsync (an unsynced write, then an fdatasync of the
WAL that releases the GIL) are `storage.batch.BatchWriter`'s, and the calls
the committer makes (`storage.batch_store.GroupCommitStore`) are
`storage.batch_store.BatchStore`'s, both shared with the Raft log.

Nothing in here reads a clock: timestamps come in the records.

Key layout (all integers big-endian, so byte order is numeric order):

    b"\\x00format"                          -> u8 store format version (2)
    b"i" | u16 len(Q) | Q | u64 seq         -> index entry (format 2)
    b"m" | u16 len(Q) | Q | u64 seq         -> message record
    b"p" | u16 len(Q) | Q                   -> positions snapshot (format 2)

where Q is the queue name in UTF-8 (at most 65,535 bytes). The length prefix
keeps one queue's keys from interleaving with another's whose name extends it
("a" vs "ab"), so b"m" | u16 | Q is a prefix that holds exactly queue Q's
messages, in seq order, and [prefix, prefix | b"\\xff" * 9) spans all of them.

Every message record has an index entry beside it, written and deleted in
the same batch, so the two never disagree on disk. The index is what a
restart reads: 13 bytes a message instead of its body, so a queue's
positions come back without reading the bodies (`indexed_queues`,
`iter_index`); bodies are read when delivered (`read`). Index value:

    offset size field
    0      4    size: u32, the payload size the queue accounts for
    4      1    flags: the record's flags
    5      8    expires_at: u64 ms since the Unix epoch, 0 = never

A queue may also keep a positions snapshot (`put_positions`): an opaque
blob from the queue, written in the same ordered stream as its messages
(queues/classic/checkpoint.py: its paged positions, run-length encoded,
and how far the index must still be read), so that the next start, clean
or after a crash, reads the blob and a bounded part of the index instead of
all of it. `take_positions` reads them all at start and deletes them in the
same go, so a snapshot serves one start; each queue writes a new one once
it has recovered.

Store format 1 had no index: opening one builds the index from the records
(reading every body once) and then marks the store format 2, in one synced
batch; a crash before that leaves format 1 and the upgrade runs again.

Record value layout (`Record.encode`), format version 1, 22-byte header:

    offset size field
    0      1    format version, 1
    1      1    flags (u8; bit meanings belong to the queue, see Record.flags)
    2      8    enqueued_at: u64 ms since the Unix epoch
    10     8    expires_at:  u64 ms since the Unix epoch, 0 = never
    18     4    delivery_count: u32 (failed deliveries, AMQP header) [3.2.1]
    22     ...  the message bytes, exactly as the queue will deliver them

A reader that meets a version it does not know raises StoreFormatError rather
than guessing; a new layout gets a new version byte and old versions stay
decodable.

Threading contract: the buffering calls, `seal()` and reads run on one thread
(the event loop's); `write()` may run on another, one batch at a time, in
`seal()` order. The two sides share no mutable Python state except the
`durable_seq` integer, which only `write()` sets.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator
from typing import NamedTuple

from rocksdict import AccessType, Options, Rdict

from storage.batch import BatchWriter, Ticket
from storage.batch_store import BatchStore

__all__ = [
    "FORMAT_VERSION",
    "MessageStore",
    "Record",
    "StoreClosedError",
    "StoreError",
    "StoreFormatError",
    "StoreFullError",
    "Ticket",
    "queue_chunks",
]

FORMAT_VERSION = 1
_STORE_FORMAT = 2
_OLDER_STORE_FORMATS = (1,)

_HEADER = struct.Struct(">BBQQI")
_SEQ = struct.Struct(">Q")
_QLEN = struct.Struct(">H")
_INDEX_VALUE = struct.Struct(">IBQ")
_MEMTABLE_BYTES = 32 * 1024 * 1024
_UPGRADE_BATCH = 65536  # index entries per synced batch while upgrading a format-1 store

_MSG = b"m"
_INDEX = b"i"
_POSITIONS = b"p"
_FORMAT_KEY = b"\x00format"
_MAX_QUEUE_NAME = (1 << 16) - 1
# After a queue prefix every key has exactly 8 more bytes, all <= 0xff.
_RANGE_END = b"\xff" * 9


class StoreError(Exception):
    """The message store failed; the data directory may need attention."""


class StoreFormatError(StoreError):
    """A key or record does not have a layout this version of Warren knows."""


class StoreFullError(StoreError):
    """A write failed because the data directory's filesystem is full; the
    write is kept and can be retried once there is space (`reopen()`, then
    `write()` the same batch again)."""


class StoreClosedError(StoreError):
    """The store was used after close()."""


class Record(NamedTuple):
    """One stored message: its bytes plus what the queue needs to keep about it.

    `flags` is a u8 owned by the queue implementation; the store keeps it
    round-trip exact and gives no bit a meaning. Times are ms since the epoch,
    supplied by the caller (the store has no clock). A NamedTuple rather than
    a frozen dataclass because it is built once per message: ~0.3 us vs ~1.6
    us. Use `record._replace(delivery_count=n)` for an update.
    """

    body: bytes
    enqueued_at: int = 0
    expires_at: int | None = None
    delivery_count: int = 0
    flags: int = 0

    def encode(self) -> bytes:
        body, enqueued_at, expires_at, delivery_count, flags = self
        try:
            # struct range-checks every field (all unsigned).
            header = _HEADER.pack(FORMAT_VERSION, flags, enqueued_at, expires_at or 0, delivery_count)
        except struct.error as e:
            raise ValueError(f"record field out of range in {self[1:]!r}: {e}") from None
        return header + body

    @classmethod
    def decode(cls, data: bytes) -> Record:
        if not data:
            raise StoreFormatError("empty record")
        if data[0] != FORMAT_VERSION:
            raise StoreFormatError(f"unknown record format version {data[0]}")
        if len(data) < _HEADER.size:
            raise StoreFormatError(f"record of {len(data)} bytes is shorter than its header")
        _, flags, enqueued_at, expires, delivery_count = _HEADER.unpack_from(data)
        return cls(
            body=data[_HEADER.size :],
            enqueued_at=enqueued_at,
            expires_at=expires or None,
            delivery_count=delivery_count,
            flags=flags,
        )


def _bound_memory(opts: Options) -> None:
    """Two 32 MiB memtables instead of RocksDB's 64 MiB: half the memory a
    deep queue's writes hold before they are flushed. (Index and filter
    blocks in a bounded block cache kept RSS flatter still, but made reads
    back at the head 8x slower in bench/deep.py: not worth it.)"""
    opts.set_write_buffer_size(_MEMTABLE_BYTES)
    opts.set_max_write_buffer_number(2)


def _queue_prefix(queue: str) -> bytes:
    name = queue.encode("utf-8")
    if len(name) > _MAX_QUEUE_NAME:
        raise ValueError(f"queue name of {len(name)} bytes is too long for the store")
    return _MSG + _QLEN.pack(len(name)) + name


def _index_prefix(message_prefix: bytes) -> bytes:
    return _INDEX + message_prefix[1:]


def _index_value(size: int, record: Record) -> bytes:
    try:
        return _INDEX_VALUE.pack(size, record.flags, record.expires_at or 0)
    except struct.error as e:
        raise ValueError(f"index field out of range (size {size}, {record[1:]!r}): {e}") from None


def _split_key(key: bytes) -> tuple[str, int]:
    """Inverse of prefix + seq: (queue, seq)."""
    if len(key) < 11 or key[:1] != _MSG:
        raise StoreFormatError(f"not a message key: {key!r}")
    (n,) = _QLEN.unpack_from(key, 1)
    if len(key) != 3 + n + 8:
        raise StoreFormatError(f"bad message key length: {key!r}")
    (seq,) = _SEQ.unpack_from(key, 3 + n)
    return key[3 : 3 + n].decode("utf-8"), seq


def queue_chunks(path: str, queue: str, chunk_bytes: int = 4 << 20) -> Iterator[list[tuple[bytes, bytes]]]:
    """The messages and index entries of `queue` in the store at `path`, which no process
    writes any longer (a lost worker's, issue 36), opened read-only, in lists of about
    `chunk_bytes` (a queue's whole backlog is never in memory at once). Its checkpoint is
    left behind: the copy is rebuilt from the index, as after a crash, since a checkpoint
    another process wrote may be older than that process's last writes."""
    db = Rdict(path, Options(raw_mode=True), access_type=AccessType.read_only())
    try:
        prefix = _queue_prefix(queue)
        chunk: list[tuple[bytes, bytes]] = []
        size = 0
        for start in (prefix, _index_prefix(prefix)):
            n = len(start)
            for key, value in db.items(from_key=start):
                if key[:n] != start:
                    break
                chunk.append((key, value))
                size += len(key) + len(value)
                if size >= chunk_bytes:
                    yield chunk
                    chunk, size = [], 0
        if chunk:
            yield chunk
    finally:
        db.close()


class MessageStore(BatchStore):
    """Classic-queue messages of one node in one RocksDB, with group commit.

    `path` is the database directory (`<data_dir>/messages`); it is created
    if missing. `sync=False` skips the fsync (tests and benchmarks only: a
    power loss then loses acknowledged messages). `size_of(record)` is the
    size the index keeps for a record when a format-1 store is upgraded
    (the queue's payload size; default the body's length).
    """

    def __init__(self, path: str | os.PathLike[str], *, sync: bool = True,
                 size_of: Callable[[Record], int] | None = None) -> None:  # fmt: skip
        batches = BatchWriter(
            path,
            label="message store",
            format_key=_FORMAT_KEY,
            format_version=_STORE_FORMAT,
            sync=sync,
            error=StoreError,
            closed_error=StoreClosedError,
            format_error=StoreFormatError,
            full_error=StoreFullError,
            older_versions=_OLDER_STORE_FORMATS,
            tune=_bound_memory,
        )
        super().__init__(batches)
        self._prefixes: dict[str, bytes] = {}
        self.body_reads = 0  # records read (get, read, iter_queue, recover): restart should read none
        if self._batches.found_version == 1:
            try:
                self._build_index(size_of or (lambda record: len(record.body)))
            except BaseException:
                self._batches.close()
                raise

    @property
    def commits(self) -> int:
        """Batches written so far."""
        return self._batches.writes

    # -- buffered writes ---------------------------------------------------

    def put(self, queue: str, seq: int, record: Record, size: int | None = None) -> Ticket:
        """Store a message at (queue, seq) with its index entry; overwrites any
        record there. `size` is what the index keeps as the message's size
        (default: the record body's length)."""
        key = self._key(queue, seq)
        index = _index_value(len(record.body) if size is None else size, record)
        return self._batches.put_all((key, record.encode()), (_INDEX + key[1:], index))

    def update(self, queue: str, seq: int, record: Record, size: int | None = None) -> Ticket:
        """Replace the record at (queue, seq), e.g. delivery_count after a requeue.

        RocksDB writes are blind: this is `put` under a name that says what the
        caller means. Updating a deleted message brings it back, so callers
        must not update what they have deleted.
        """
        return self.put(queue, seq, record, size)

    def delete(self, queue: str, seq: int) -> Ticket:
        """Remove the message at (queue, seq); a no-op if there is none."""
        key = self._key(queue, seq)
        return self._batches.delete_all(key, _INDEX + key[1:])

    def delete_seqs(self, queue: str, first: int, end: int) -> Ticket:
        """Remove the messages of `queue` with first <= seq < end (two range tombstones)."""
        start, stop = self._key(queue, first), self._key(queue, end)
        return self._batches.delete_ranges((start, stop), (_INDEX + start[1:], _INDEX + stop[1:]))

    def delete_queue(self, queue: str) -> Ticket:
        """Remove every message of `queue` with one range tombstone.

        Only writes buffered before this call are covered; a queue of the
        same name declared afterwards starts empty and keeps its new puts.
        """
        prefix = self._prefix(queue)
        self._prefixes.pop(queue, None)
        index = _index_prefix(prefix)
        positions = _POSITIONS + prefix[1:]
        return self._batches.delete_ranges(
            (prefix, prefix + _RANGE_END), (index, index + _RANGE_END), (positions, positions + b"\x00")
        )

    def put_positions(self, queue: str, snapshot: bytes) -> Ticket:
        """Replace the queue's positions snapshot (its checkpoint) for the next start."""
        return self._batches.put(_POSITIONS + self._prefix(queue)[1:], snapshot)

    def take_positions(self) -> dict[str, bytes]:
        """Every positions snapshot, by queue; all are deleted (buffered) as
        they are read, so each serves one start only."""
        db = self._batches.db
        out: dict[str, bytes] = {}
        for key, value in db.items(from_key=_POSITIONS):
            if key[:1] != _POSITIONS:
                break
            queue, _ = _split_key(_MSG + key[1:] + bytes(8))
            out[queue] = value
        if out:
            self._batches.delete_range(_POSITIONS, b"q")  # every key that starts with b"p"
        return out

    def copy_queue_from(self, other: MessageStore, queue: str, batch: int = _UPGRADE_BATCH) -> int:
        """Copy every committed key of `queue` in `other` (messages, index, positions) into this
        store, in synced batches of at most `batch` keys, in place of any this store had of
        it (a stale copy left by an earlier move); returns the messages copied. Copying again
        gives the same keys: a copy cut short by a crash is simply done once more. The caller
        deletes the queue from `other` once it no longer reads it there."""
        prefix = other._prefix(queue)
        self.delete_queue(queue)
        copied = 0
        pending = 0
        for start in (prefix, _index_prefix(prefix), _POSITIONS + prefix[1:]):
            n = len(start)
            for key, value in other._batches.db.items(from_key=start):
                if key[:n] != start:
                    break
                self._batches.put(key, value)
                copied += key[:1] == _MSG
                pending += 1
                if pending == batch:
                    self.commit()
                    pending = 0
        self.commit()
        return copied

    def put_copied(self, items: list[tuple[bytes, bytes]]) -> Ticket:
        """Buffer keys read by `queue_chunks` from another store, as they were there."""
        return self._batches.put_many(items)

    # -- commit ------------------------------------------------------------

    def commit(self) -> Ticket:
        """Write all pending writes with one synced write; return durable_seq().

        Not for use while a GroupCommitter drives the store: a batch sealed
        but not yet written (in flight, or lost to a failed write) makes this
        raise StoreError, since batches reach the disk in seal order.
        """
        if self._batches.has_unwritten():
            raise StoreError(f"{self._unwritten()} are sealed but not written; cannot commit past them")
        return self._write_pending()

    # -- reads -------------------------------------------------------------

    def get(self, queue: str, seq: int) -> Record | None:
        """The committed record at (queue, seq), or None (pending writes are not visible)."""
        value = self._batches.db.get(self._key(queue, seq))
        self.body_reads += 1
        return None if value is None else Record.decode(value)

    def read(self, queue: str, seqs: list[int]) -> list[Record | None]:
        """The committed records at `seqs` of one queue, in that order (None
        where there is none), with one multi-get. Holds the GIL throughout:
        callers keep `seqs` short."""
        if not seqs:
            return []
        key = self._key
        values = self._batches.db.get([key(queue, seq) for seq in seqs])
        self.body_reads += len(seqs)
        decode = Record.decode
        return [None if v is None else decode(v) for v in values]

    def iter_queue(self, queue: str, from_seq: int = 0) -> Iterator[tuple[int, Record]]:
        """Committed (seq, record) pairs of one queue with seq >= from_seq, in seq order."""
        db = self._batches.db
        prefix = self._prefix(queue)
        start = prefix + _SEQ.pack(from_seq)
        n = len(prefix)
        for key, value in db.items(from_key=start):
            if key[:n] != prefix or len(key) != n + 8:
                break
            self.body_reads += 1
            yield _SEQ.unpack_from(key, n)[0], Record.decode(value)

    def indexed_queues(self) -> list[str]:
        """The queues with at least one committed message, from the index:
        one seek per queue, no record read."""
        db = self._batches.db
        out: list[str] = []
        start = _INDEX
        while True:
            key = next(iter(db.keys(from_key=start)), None)
            if key is None or key[:1] != _INDEX:
                return out
            queue, _ = _split_key(_MSG + key[1:])
            out.append(queue)
            start = _index_prefix(self._prefix(queue)) + _RANGE_END

    def iter_index(self, queue: str, first: int = 0, end: int | None = None) -> Iterator[tuple[int, int, int, int]]:
        """(seq, size, flags, expires_at or 0) of each committed message of
        `queue` with first <= seq < end (None: no end), in seq order, from
        the index alone."""
        db = self._batches.db
        prefix = _index_prefix(self._prefix(queue))
        n = len(prefix)
        stop = prefix + (_RANGE_END if end is None else _SEQ.pack(end))
        unpack_seq, unpack_value = _SEQ.unpack_from, _INDEX_VALUE.unpack
        for key, value in db.items(from_key=prefix + _SEQ.pack(first)):
            if key >= stop or key[:n] != prefix or len(key) != n + 8:
                break
            size, flags, expires = unpack_value(value)
            yield unpack_seq(key, n)[0], size, flags, expires

    def recover(self) -> dict[str, list[tuple[int, Record]]]:
        """Every committed message: queue -> [(seq, record)] in seq order.

        Reads the whole store into memory (tools and tests; the broker
        recovers from the index); queues are in key order (by name length,
        then name), which callers should not rely on.
        """
        db = self._batches.db
        out: dict[str, list[tuple[int, Record]]] = {}
        for key, value in db.items(from_key=_MSG):
            if key[:1] != _MSG:
                break
            queue, seq = _split_key(key)
            messages = out.get(queue)
            if messages is None:
                messages = out[queue] = []
            messages.append((seq, Record.decode(value)))
        self.body_reads += sum(len(m) for m in out.values())
        return out

    def _write_before_close(self) -> None:
        self.commit()

    # -- internals ---------------------------------------------------------

    def _build_index(self, size_of: Callable[[Record], int]) -> None:
        """Upgrade a format-1 store: an index entry for every record, in synced
        batches of a bounded size, then the format-2 marker (idempotent if
        interrupted: the marker comes last)."""
        batches = self._batches
        for n, (key, value) in enumerate(batches.db.items(from_key=_MSG), 1):
            if key[:1] != _MSG:
                break
            _split_key(key)  # refuses a malformed key
            record = Record.decode(value)
            batches.put(_INDEX + key[1:], _index_value(size_of(record), record))
            if n % _UPGRADE_BATCH == 0:
                self.commit()
        batches.put(_FORMAT_KEY, bytes([_STORE_FORMAT]))
        self.commit()

    def _prefix(self, queue: str) -> bytes:
        prefix = self._prefixes.get(queue)
        if prefix is None:
            prefix = self._prefixes[queue] = _queue_prefix(queue)
        return prefix

    def _key(self, queue: str, seq: int) -> bytes:
        prefix = self._prefixes.get(queue) or self._prefix(queue)
        try:
            return prefix + _SEQ.pack(seq)
        except struct.error:
            raise ValueError(f"seq out of range: {seq}") from None
