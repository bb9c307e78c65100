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

Threading contract: everything but `write()` runs on one thread; `write()` may
run on one other thread. The two share no mutable Python state except the
`durable_seq` integer, which only `write()` sets.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from rocksdict import Options, Rdict, WriteBatch, WriteOptions

from storage.rocks import WalSyncer

__all__ = ["BatchWriter", "SealedBatch", "Ticket"]

Ticket = int
"""Position of a buffered write in a store's write order; 0 means "nothing"."""


class SealedBatch:
    """Writes sealed for one synced write; made by BatchWriter.seal().

    Invariant: `base` is the ticket of the last write in the batch sealed
    just before this one, so batches must be written in order and
    `base < ticket`.
    """

    __slots__ = ("base", "ticket", "wb", "writes")

    def __init__(self, wb: WriteBatch, base: Ticket, ticket: Ticket) -> None:
        self.wb = wb
        self.base = base
        self.ticket = ticket
        self.writes = ticket - base

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
        older_versions: tuple[int, ...] = (),
        tune: Callable[[Options], None] | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self._label = label
        self._error = error
        self._closed_error = closed_error or error
        self._format_error = format_error or error
        self._on_failure = on_failure
        opts = Options(raw_mode=True)
        opts.create_if_missing(True)
        if tune is not None:
            tune(opts)  # the owner's RocksDB settings (memory bounds)
        try:
            self._db: Rdict | None = Rdict(self.path, opts)
        except Exception as e:  # rocksdict raises plain Exception
            raise error(f"cannot open {label} at {self.path}: {e}") from e
        self._write_opt = WriteOptions()
        self._write_opt.sync = False  # the WAL is fdatasync'ed by WalSyncer, outside the GIL
        self._wal: WalSyncer | None = None
        self._pending = WriteBatch(raw_mode=True)
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
        return self._buffered()

    def delete(self, key: bytes) -> Ticket:
        self._pending.delete(key)
        return self._buffered()

    def delete_range(self, start: bytes, end: bytes) -> Ticket:
        """Delete the keys in [start, end) with one range tombstone."""
        self._pending.delete_range(start, end)
        return self._buffered()

    # One ticket for several keys that must change together (a record and its
    # index entry): they land in the same batch, so on disk they agree.

    def put_all(self, *items: tuple[bytes, bytes]) -> Ticket:
        pending = self._pending
        for key, value in items:
            pending.put(key, value)
        return self._buffered()

    def delete_all(self, *keys: bytes) -> Ticket:
        pending = self._pending
        for key in keys:
            pending.delete(key)
        return self._buffered()

    def delete_ranges(self, *ranges: tuple[bytes, bytes]) -> Ticket:
        pending = self._pending
        for start, end in ranges:
            pending.delete_range(start, end)
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
        batch = SealedBatch(self._pending, self._sealed_seq, self._pending_seq)
        self._pending = WriteBatch(raw_mode=True)
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
        try:
            db.write(batch.wb, self._write_opt)
            if self._wal is not None:
                self._wal.sync()
        except Exception as e:
            err = self._error(f"{self._label} write failed: {e}")
            err.__cause__ = e
            if self._on_failure is not None:
                self._on_failure(err)
            raise err from e
        self.writes += 1
        self._durable_seq = batch.ticket

    # -- reads and lifecycle -------------------------------------------------

    @property
    def db(self) -> Rdict:
        """The open database, for reads (pending writes are not visible)."""
        return self._open_db()

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
        db.close()

    # -- internals -----------------------------------------------------------

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
