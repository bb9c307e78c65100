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
so the fsync never blocks the loop; this module has no asyncio in it.

How the fsync happens: rocksdict 0.3.29 holds the GIL for the whole of
`Rdict.write`, fsync included (measured: a synced 20 MB write in a thread
stops the main thread for its full ~150 ms), so a synced RocksDB write in a
worker thread would still freeze the event loop. Batches are therefore
written with sync=False, which leaves them appended to the write-ahead log
with write(2) (RocksDB flushes its WAL buffer on every write unless
manual_wal_flush is set), and `WalSyncer` then fdatasyncs that WAL file with
os.fdatasync, which releases the GIL. It is the sequence RocksDB documents as
Write() followed by SyncWAL(), except that readers of this process may see a
batch before its fsync ends; nothing here relies on that visibility (the
broker serves messages from memory, and acts on durability only through
tickets).

Nothing in here reads a clock: timestamps come in the records.

Key layout (all integers big-endian, so byte order is numeric order):

    b"\\x00format"                          -> u8 store format version (1)
    b"m" | u16 len(Q) | Q | u64 seq         -> message record

where Q is the queue name in UTF-8 (at most 65,535 bytes). The length prefix
keeps one queue's keys from interleaving with another's whose name extends it
("a" vs "ab"), so b"m" | u16 | Q is a prefix that holds exactly queue Q's
messages, in seq order, and [prefix, prefix | b"\\xff" * 9) spans all of them.

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

from rocksdict import Options, Rdict, WriteBatch, WriteOptions

from storage.rocks import WalSyncer

__all__ = [
    "FORMAT_VERSION",
    "Batch",
    "MessageStore",
    "Record",
    "StoreClosedError",
    "StoreError",
    "StoreFormatError",
    "Ticket",
]

Ticket = int
"""Position of a buffered write in the store's write order; 0 means "nothing"."""

FORMAT_VERSION = 1
_STORE_FORMAT = 1

_HEADER = struct.Struct(">BBQQI")
_SEQ = struct.Struct(">Q")
_QLEN = struct.Struct(">H")

_MSG = b"m"
_FORMAT_KEY = b"\x00format"
_MAX_QUEUE_NAME = (1 << 16) - 1
# After a queue prefix every key has exactly 8 more bytes, all <= 0xff.
_RANGE_END = b"\xff" * 9


class StoreError(Exception):
    """The message store failed; the data directory may need attention."""


class StoreFormatError(StoreError):
    """A key or record does not have a layout this version of Warren knows."""


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


def _queue_prefix(queue: str) -> bytes:
    name = queue.encode("utf-8")
    if len(name) > _MAX_QUEUE_NAME:
        raise ValueError(f"queue name of {len(name)} bytes is too long for the store")
    return _MSG + _QLEN.pack(len(name)) + name


def _split_key(key: bytes) -> tuple[str, int]:
    """Inverse of prefix + seq: (queue, seq)."""
    if len(key) < 11 or key[:1] != _MSG:
        raise StoreFormatError(f"not a message key: {key!r}")
    (n,) = _QLEN.unpack_from(key, 1)
    if len(key) != 3 + n + 8:
        raise StoreFormatError(f"bad message key length: {key!r}")
    (seq,) = _SEQ.unpack_from(key, 3 + n)
    return key[3 : 3 + n].decode("utf-8"), seq


class Batch:
    """Writes sealed for one synced commit; made by MessageStore.seal().

    Invariant: `base` is the ticket of the last write in the batch sealed
    just before this one, so batches must be written in order and
    `base < ticket`.
    """

    __slots__ = ("_wb", "base", "ticket", "writes")

    def __init__(self, wb: WriteBatch, base: Ticket, ticket: Ticket) -> None:
        self._wb = wb
        self.base = base
        self.ticket = ticket
        self.writes = ticket - base

    def __repr__(self) -> str:
        return f"Batch(base={self.base}, ticket={self.ticket})"


class MessageStore:
    """Classic-queue messages of one node in one RocksDB, with group commit.

    `path` is the database directory (`<data_dir>/messages`); it is created
    if missing. `sync=False` skips the fsync (tests and benchmarks only: a
    power loss then loses acknowledged messages).
    """

    def __init__(self, path: str | os.PathLike[str], *, sync: bool = True) -> None:
        self._path = os.fspath(path)
        opts = Options(raw_mode=True)
        opts.create_if_missing(True)
        try:
            self._db: Rdict | None = Rdict(self._path, opts)
        except Exception as e:  # rocksdict raises plain Exception
            raise StoreError(f"cannot open message store at {self._path}: {e}") from e
        # Batches are written unsynced and the WAL is fsync'ed outside the GIL
        # (see the module docstring); sync=False skips that fsync.
        self._write_opt = WriteOptions()
        self._write_opt.sync = False
        self._wal: WalSyncer | None = None
        self._prefixes: dict[str, bytes] = {}
        self._pending = WriteBatch(raw_mode=True)
        self._pending_seq: Ticket = 0
        self._sealed_seq: Ticket = 0
        self._durable_seq: Ticket = 0
        self.commits = 0
        # Called (with no arguments) when a write lands in an empty pending
        # batch: the GroupCommitter uses it to schedule a commit.
        self.on_pending: Callable[[], None] | None = None
        try:
            self._check_format()
            if sync:
                self._wal = WalSyncer(self._db, self._path)
        except BaseException:
            self._db.close()
            self._db = None
            raise

    # -- buffered writes ---------------------------------------------------

    def put(self, queue: str, seq: int, record: Record) -> Ticket:
        """Store a message at (queue, seq); overwrites any record there."""
        self._pending.put(self._key(queue, seq), record.encode())
        return self._buffered()

    def update(self, queue: str, seq: int, record: Record) -> Ticket:
        """Replace the record at (queue, seq), e.g. delivery_count after a requeue.

        RocksDB writes are blind: this is `put` under a name that says what the
        caller means. Updating a deleted message brings it back, so callers
        must not update what they have deleted.
        """
        return self.put(queue, seq, record)

    def delete(self, queue: str, seq: int) -> Ticket:
        """Remove the message at (queue, seq); a no-op if there is none."""
        self._pending.delete(self._key(queue, seq))
        return self._buffered()

    def delete_queue(self, queue: str) -> Ticket:
        """Remove every message of `queue` with one range tombstone.

        Only writes buffered before this call are covered; a queue of the
        same name declared afterwards starts empty and keeps its new puts.
        """
        prefix = self._prefix(queue)
        self._pending.delete_range(prefix, prefix + _RANGE_END)
        self._prefixes.pop(queue, None)
        return self._buffered()

    # -- tickets -----------------------------------------------------------

    def pending_seq(self) -> Ticket:
        """Ticket of the most recent buffered write (durable or not)."""
        return self._pending_seq

    def durable_seq(self) -> Ticket:
        """Every write with a ticket <= this is on disk (fsync completed)."""
        return self._durable_seq

    def has_pending(self) -> bool:
        """True if writes are buffered that no batch has taken yet."""
        return self._pending_seq > self._sealed_seq

    # -- commit ------------------------------------------------------------

    def commit(self) -> Ticket:
        """Write all pending writes with one synced write; return durable_seq().

        Not for use while a GroupCommitter drives the store: a batch sealed
        but not yet written (in flight, or lost to a failed write) makes this
        raise StoreError, since batches reach the disk in seal order.
        """
        if self._sealed_seq != self._durable_seq:
            raise StoreError(
                f"writes {self._durable_seq + 1}..{self._sealed_seq} are sealed but not written;"
                " cannot commit past them"
            )
        batch = self.seal()
        if batch is not None:
            self.write(batch)
        return self._durable_seq

    def seal(self) -> Batch | None:
        """Take the pending writes as a Batch and start a fresh pending batch.

        Returns None when nothing is pending. Writes buffered after this call
        go into the next batch.
        """
        self._check_open()
        if not self.has_pending():
            return None
        batch = Batch(self._pending, self._sealed_seq, self._pending_seq)
        self._pending = WriteBatch(raw_mode=True)
        self._sealed_seq = self._pending_seq
        return batch

    def write(self, batch: Batch) -> None:
        """Write a sealed batch and fsync it; may run off the loop thread.

        Batches must be written one at a time, in the order seal() made them.
        The GIL is held while RocksDB applies the batch (µs to a few ms, by
        size) and released for the fsync.
        """
        db = self._check_open()
        if batch.base != self._durable_seq:
            raise StoreError(f"{batch!r} written out of order: durable_seq is {self._durable_seq}")
        try:
            db.write(batch._wb, self._write_opt)
            if self._wal is not None:
                self._wal.sync()
        except Exception as e:
            raise StoreError(f"message store write failed: {e}") from e
        self.commits += 1
        self._durable_seq = batch.ticket

    # -- reads -------------------------------------------------------------

    def get(self, queue: str, seq: int) -> Record | None:
        """The committed record at (queue, seq), or None (pending writes are not visible)."""
        value = self._check_open().get(self._key(queue, seq))
        return None if value is None else Record.decode(value)

    def iter_queue(self, queue: str, from_seq: int = 0) -> Iterator[tuple[int, Record]]:
        """Committed (seq, record) pairs of one queue with seq >= from_seq, in seq order."""
        db = self._check_open()
        prefix = self._prefix(queue)
        start = prefix + _SEQ.pack(from_seq)
        n = len(prefix)
        for key, value in db.items(from_key=start):
            if key[:n] != prefix or len(key) != n + 8:
                break
            yield _SEQ.unpack_from(key, n)[0], Record.decode(value)

    def recover(self) -> dict[str, list[tuple[int, Record]]]:
        """Every committed message after a restart: queue -> [(seq, record)] in seq order.

        Reads the whole store into memory; queues are in key order (by name
        length, then name), which callers should not rely on.
        """
        db = self._check_open()
        out: dict[str, list[tuple[int, Record]]] = {}
        for key, value in db.items(from_key=_MSG):
            if key[:1] != _MSG:
                break
            queue, seq = _split_key(key)
            messages = out.get(queue)
            if messages is None:
                messages = out[queue] = []
            messages.append((seq, Record.decode(value)))
        return out

    # -- lifecycle ---------------------------------------------------------

    def close(self) -> None:
        """Commit what is pending and close the database; idempotent.

        Must not run while another thread is inside write() (close the
        GroupCommitter first).
        """
        if self._db is None:
            return
        try:
            self.commit()
        finally:
            db, self._db = self._db, None
            if self._wal is not None:
                self._wal.close()
            db.close()

    @property
    def closed(self) -> bool:
        return self._db is None

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------

    def _buffered(self) -> Ticket:
        self._pending_seq += 1
        if self._pending_seq == self._sealed_seq + 1 and self.on_pending is not None:
            self.on_pending()
        return self._pending_seq

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

    def _check_open(self) -> Rdict:
        if self._db is None:
            raise StoreClosedError("message store is closed")
        return self._db

    def _check_format(self) -> None:
        db = self._check_open()
        found = db.get(_FORMAT_KEY)
        if found is None:
            if next(iter(db.keys()), None) is not None:
                raise StoreFormatError(f"{self._path} holds data but no store format marker")
            synced = WriteOptions()
            synced.sync = True
            db.put(_FORMAT_KEY, bytes([_STORE_FORMAT]), synced)
        elif found != bytes([_STORE_FORMAT]):
            raise StoreFormatError(f"{self._path}: store format {found!r}, this Warren reads {_STORE_FORMAT}")
