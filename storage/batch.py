"""One RocksDB written in ticketed batches, each made durable by one WAL fdatasync.

Both of Warren's stores, the message store (storage/message_store.py) and the
Raft log (raft/journal.py), write the same way, and this is that way:

- Buffered writes. `put`, `delete` and `delete_range` go into the *pending*
  WriteBatch and return a `Ticket`, a counter that grows by one per buffered
  write. `on_pending` (if set) is called when a write lands in an empty
  pending batch, which is how a caller schedules the commit of a loop turn.
- Seal, then write. `seal()` takes the pending writes as a `SealedBatch` and
  starts a fresh pending batch; `write(batch)` applies it with sync off and
  then fdatasyncs RocksDB's write-ahead log with `storage.rocks.WalSyncer`,
  which releases the GIL (rocksdict holds it through a synced `Rdict.write`;
  storage/rocks.py says why). Afterwards `durable_seq()` is the batch's
  ticket. Batches are written one at a time, in seal order, possibly on
  another thread than the one that buffers and seals (storage/group_commit.py
  runs `write` on its worker).
- A format marker. A new database gets `format_key -> format_version` with a
  synced put; an existing one must carry that marker (or one of the
  `older_versions` its owner knows how to upgrade, reported as
  `found_version`), so a directory of another kind or version is refused
  rather than misread.

What to do when a write fails (give up on the store, or also fail waiters
and refuse later writes) is the owner's: `on_failure` hears the error before
`write` raises it. The owner also chooses its exception classes, so callers
keep catching the store's own errors.

A full disk is the one failure that can be waited out. RocksDB's error is
sticky (measured with rocksdict 0.3.29 on a full tmpfs: after one ENOSPC
every later write fails the same way, even once space is freed, and close()
raises "Writer has previous error" though it does release the database), but
reopening the database recovers it: the batch that failed is not in it (its
torn WAL record is dropped by point-in-time recovery) and writes work again.
So for an owner that gives a `full_error` class (the message store; the
Raft log does not, and treats a full disk like any failure) a no-space
failure raises it instead (not heard by `on_failure`), the batch stays unwritten, and once there is space the owner
calls `reopen()` on the buffering thread and `write()`s the same batch again.
Writing a batch twice is harmless should its first write have landed after
all (an fsync that failed): puts and deletes are idempotent.

Threading contract: everything but `write()` runs on one thread; `write()` may
run on one other thread. The two share no mutable Python state except the
`durable_seq` integer, which only `write()` sets.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable

from rocksdict import Options, Rdict, WriteBatch, WriteOptions

from storage.faults import DiskFaults
from storage.rocks import WalSyncer

__all__ = ["BatchWriter", "SealedBatch", "Ticket", "is_no_space"]

Ticket = int
"""Position of a buffered write in a store's write order; 0 means "nothing"."""


def is_no_space(e: BaseException) -> bool:
    """A write failed because the filesystem is full (ENOSPC, or EDQUOT for a
    quota). rocksdict raises a plain Exception carrying RocksDB's status text;
    the WAL fdatasync raises OSError."""
    if isinstance(e, OSError):
        return e.errno in (errno.ENOSPC, errno.EDQUOT)
    text = str(e)
    return "No space left on device" in text or "Disk quota exceeded" in text


# One buffered RocksDB operation: (key, value) a put, (key, None) a delete,
# (start, end, None) a range delete. Each write goes into the pending
# WriteBatch and, as such a tuple (references, not copies), into a list beside
# it: writing a rocksdict WriteBatch consumes it even when the write fails, and
# a batch that failed for want of space must be written again, so it is then
# rebuilt from the list. (Buffering only the list and building the WriteBatch
# at write time cost ~1 us more per message in a put+delete microbenchmark.)
Op = tuple

# Not the memtables: bounded by the owner's settings (write_buffer_size x max_write_buffer_number), and
# freed only by a flush, whenever RocksDB decides on one, so an alarm counting them would not clear after
# a drain but at some later flush.
_MEMORY_PROPERTIES = ("rocksdb.estimate-table-readers-mem", "rocksdb.block-cache-usage")


class SealedBatch:
    """Writes sealed for one synced write; made by BatchWriter.seal().

    Invariant: `base` is the ticket of the last write in the batch sealed
    just before this one, so batches must be written in order and
    `base < ticket`.
    """

    __slots__ = ("base", "ticket", "wb", "ops", "writes")

    def __init__(self, wb: WriteBatch, ops: list[Op], base: Ticket, ticket: Ticket) -> None:
        self.wb: WriteBatch | None = wb  # None once a write consumed it
        self.ops = ops
        self.base = base
        self.ticket = ticket
        self.writes = ticket - base

    def take_write_batch(self) -> WriteBatch:
        """The WriteBatch to write, rebuilt from `ops` if a failed write consumed it."""
        wb, self.wb = self.wb, None
        return wb if wb is not None else self._rebuild()

    def _rebuild(self) -> WriteBatch:
        wb = WriteBatch(raw_mode=True)
        put, delete, delete_range = wb.put, wb.delete, wb.delete_range
        for op in self.ops:
            if len(op) == 3:
                delete_range(op[0], op[1])
            elif op[1] is None:
                delete(op[0])
            else:
                put(op[0], op[1])
        return wb

    def size(self) -> int:
        """Bytes of keys and values (about what the write appends to the WAL)."""
        return sum(len(op[0]) + len(op[1] or b"") for op in self.ops)

    def __repr__(self) -> str:
        return f"SealedBatch(base={self.base}, ticket={self.ticket})"


class BatchWriter:
    """Owns one RocksDB at `path`, its pending WriteBatch, its tickets and its WAL syncer.

    `label` names the store in error messages ("message store", "raft log").
    `sync=False` skips the fsync (tests and benchmarks only: a power loss then
    loses acknowledged writes). `error` is raised for failures, `closed_error`
    after close(), `format_error` for a database without the right marker
    (both default to `error`).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        label: str,
        format_key: bytes,
        format_version: int,
        sync: bool = True,
        error: type[Exception],
        closed_error: type[Exception] | None = None,
        format_error: type[Exception] | None = None,
        on_failure: Callable[[Exception], None] | None = None,
        full_error: type[Exception] | None = None,
        older_versions: tuple[int, ...] = (),
        tune: Callable[[Options], None] | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self._label = label
        self._error = error
        self._closed_error = closed_error or error
        self._format_error = format_error or error
        self._on_failure = on_failure
        self._full_error = full_error  # None: the owner treats a full disk like any failure
        self._sync = sync
        # injected faults (storage/faults.py), for tests: set by the owner with the store's name
        self.faults: DiskFaults | None = None
        self.fault_store = ""
        opts = self._opts = Options(raw_mode=True)
        opts.create_if_missing(True)
        if tune is not None:
            tune(opts)  # the owner's RocksDB settings (memory bounds)
        self._db: Rdict | None = self._open(error)
        self.needs_reopen = False  # a write failed for want of space: RocksDB refuses writes until reopened
        self._write_opt = WriteOptions()
        self._write_opt.sync = False  # the WAL is fdatasync'ed by WalSyncer, outside the GIL
        self._wal: WalSyncer | None = None
        self._pending = WriteBatch(raw_mode=True)
        self._ops: list[Op] = []  # the pending batch's writes again: Op says why
        self._pending_seq: Ticket = 0
        self._sealed_seq: Ticket = 0
        self._durable_seq: Ticket = 0
        self.writes = 0  # batches written
        # Called (no arguments) when a write lands in an empty pending batch.
        self.on_pending: Callable[[], None] | None = None
        # The format the database was found in: format_version, or one of
        # older_versions that the owner must upgrade (then rewrite the marker).
        self.found_version = format_version
        try:
            self._check_format(format_key, format_version, older_versions)
            if sync:
                self._wal = WalSyncer(self._db, self.path)
        except BaseException:
            self._db.close()
            self._db = None
            raise

    # -- buffered writes -----------------------------------------------------

    def put(self, key: bytes, value: bytes) -> Ticket:
        self._pending.put(key, value)
        self._ops.append((key, value))
        return self._buffered()

    def put_many(self, items: list[tuple[bytes, bytes]]) -> Ticket:
        """`put` of each (key, value) in order, under one ticket (a quorum queue's batch of bodies)."""
        put = self._pending.put
        for key, value in items:
            put(key, value)
        self._ops.extend(items)
        return self._buffered()

    def delete(self, key: bytes) -> Ticket:
        self._pending.delete(key)
        self._ops.append((key, None))
        return self._buffered()

    def delete_range(self, start: bytes, end: bytes) -> Ticket:
        """Delete the keys in [start, end) with one range tombstone."""
        self._pending.delete_range(start, end)
        self._ops.append((start, end, None))
        return self._buffered()

    # One ticket for several keys that must change together (a record and its
    # index entry): they land in the same batch, so on disk they agree.

    def put_all(self, *items: tuple[bytes, bytes]) -> Ticket:
        pending = self._pending
        for key, value in items:
            pending.put(key, value)
        self._ops.extend(items)
        return self._buffered()

    def delete_all(self, *keys: bytes) -> Ticket:
        pending, ops = self._pending, self._ops
        for key in keys:
            pending.delete(key)
            ops.append((key, None))
        return self._buffered()

    def delete_ranges(self, *ranges: tuple[bytes, bytes]) -> Ticket:
        pending, ops = self._pending, self._ops
        for start, end in ranges:
            pending.delete_range(start, end)
            ops.append((start, end, None))
        return self._buffered()

    # -- tickets -------------------------------------------------------------

    def pending_seq(self) -> Ticket:
        """Ticket of the most recent buffered write (durable or not)."""
        return self._pending_seq

    def sealed_seq(self) -> Ticket:
        """Ticket of the last write taken by seal()."""
        return self._sealed_seq

    def durable_seq(self) -> Ticket:
        """Every write with a ticket <= this is on disk (fsync completed)."""
        return self._durable_seq

    def has_pending(self) -> bool:
        """True if writes are buffered that no batch has taken yet."""
        return self._pending_seq > self._sealed_seq

    def has_unwritten(self) -> bool:
        """True if a sealed batch is not written yet (in flight, or lost to a failed write)."""
        return self._sealed_seq != self._durable_seq

    # -- seal and write ------------------------------------------------------

    def seal(self) -> SealedBatch | None:
        """Take the pending writes as a batch; None if nothing is pending.

        Writes buffered after this call go into the next batch.
        """
        self._open_db()
        if not self.has_pending():
            return None
        batch = SealedBatch(self._pending, self._ops, self._sealed_seq, self._pending_seq)
        self._pending = WriteBatch(raw_mode=True)
        self._ops = []
        self._sealed_seq = self._pending_seq
        return batch

    def write(self, batch: SealedBatch) -> None:
        """Apply a sealed batch and fdatasync the WAL; may run off the buffering thread.

        The GIL is held while RocksDB applies the batch (µs to a few ms, by
        size) and released for the fsync. A failure leaves the disk state
        unknown (an fsync error cannot be retried safely): `on_failure` hears
        it, then it is raised, and durable_seq() does not move.
        """
        db = self._open_db()
        if batch.base != self._durable_seq:
            raise self._error(f"{batch!r} written out of order: durable_seq is {self._durable_seq}")
        if self.needs_reopen:
            raise self._full_error(f"{self._label} is out of space: reopen() it before writing again")
        try:
            if self.faults is not None:
                self.faults.check(self.fault_store, "write")
            db.write(batch.take_write_batch(), self._write_opt)
            if self.faults is not None:
                self.faults.check(self.fault_store, "fsync")
            if self._wal is not None:
                self._wal.sync()
        except Exception as e:
            if self._full_error is not None and is_no_space(e):
                self.needs_reopen = True
                raise self._full_error(f"{self._label} write failed, no space left on device: {e}") from e
            err = self._error(f"{self._label} write failed: {e}")
            err.__cause__ = e
            if self._on_failure is not None:
                self._on_failure(err)
            raise err from e
        self.writes += 1
        batch.ops = []  # written: let the bodies go
        self._durable_seq = batch.ticket

    def reopen(self) -> None:
        """Close and open the database again, clearing RocksDB's sticky error
        after a write failed for want of space (the module docstring says
        why). Runs on the buffering thread, with no write in flight; pending
        and sealed writes are kept. If opening fails (still no room for the
        recovery's flush) the store stays closed and needs_reopen stays set:
        call again later."""
        db, self._db = self._db, None
        if self._wal is not None:
            self._wal.close()
            self._wal = None
        if db is not None:
            try:
                db.close()
            except Exception:  # "Writer has previous error": it closes all the same
                pass
        self._db = self._open(self._full_error or self._error)
        if self._sync:
            try:
                self._wal = WalSyncer(self._db, self.path)
            except BaseException:
                self._db.close()
                self._db = None
                raise
        self.needs_reopen = False

    # -- reads and lifecycle -------------------------------------------------

    @property
    def db(self) -> Rdict:
        """The open database, for reads (pending writes are not visible)."""
        return self._open_db()

    def memory_bytes(self) -> int:
        """What RocksDB holds in memory for this database that grows with its
        contents: table readers and the block cache (memtables: see _MEMORY_PROPERTIES)."""
        db = self._db
        if db is None:
            return 0
        return sum(db.property_int_value(p) or 0 for p in _MEMORY_PROPERTIES)

    @property
    def closed(self) -> bool:
        return self._db is None

    def close(self) -> None:
        """Close the WAL syncer and the database (pending writes are dropped); idempotent."""
        if self._db is None:
            return
        db, self._db = self._db, None
        if self._wal is not None:
            self._wal.close()
        try:
            db.close()
        except Exception:
            if not self.needs_reopen:
                raise  # after ENOSPC close() raises "Writer has previous error" but does close

    # -- internals -----------------------------------------------------------

    def _open(self, error: type[Exception]) -> Rdict:
        try:
            return Rdict(self.path, self._opts)
        except Exception as e:  # rocksdict raises plain Exception
            raise error(f"cannot open {self._label} at {self.path}: {e}") from e

    def _open_db(self) -> Rdict:
        if self._db is None:
            raise self._closed_error(f"{self._label} is closed")
        return self._db

    def _buffered(self) -> Ticket:
        self._pending_seq += 1
        if self._pending_seq == self._sealed_seq + 1 and self.on_pending is not None:
            self.on_pending()
        return self._pending_seq

    def _check_format(self, key: bytes, version: int, older: tuple[int, ...]) -> None:
        db = self._open_db()
        marker = bytes([version])
        found = db.get(key)
        if found is None:
            if next(iter(db.keys()), None) is not None:
                raise self._format_error(f"{self.path} holds data but no {self._label} format marker")
            synced = WriteOptions()
            synced.sync = True
            db.put(key, marker, synced)
        elif len(found) == 1 and found[0] in older:
            self.found_version = found[0]
        elif found != marker:
            raise self._format_error(f"{self.path}: {self._label} format {found!r}, this Warren reads {version}")
