"""What a group committer drives, and the store base that both of Warren's stores share.

`GroupCommitStore` is the protocol `storage.group_commit.GroupCommitter`
calls: it hears of the first write of a loop turn through `on_pending`,
`seal()`s the pending writes on the loop and `write()`s them on its worker
thread, and reads `durable_seq()` to release the waiters a write covered
(storage/batch.py has the threading contract).

`BatchStore` speaks that protocol for a store kept in one `BatchWriter`: the
message store (storage/message_store.py) and the Raft log (raft/journal.py)
both extend it with their key layouts and differ only where their failure
rules do, in how they write everything pending on their own thread (the
message store refuses to pass a batch in flight, the Raft log waits for it)
and in what they write before closing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Protocol, Self

from storage.batch import BatchWriter, SealedBatch, Ticket
from storage.faults import DiskFaults

__all__ = ["BatchStore", "GroupCommitStore"]


class GroupCommitStore(Protocol):
    """A store whose writes a GroupCommitter makes durable, one batch at a time."""

    # called (no arguments) when a write lands in an empty pending batch:
    # the committer schedules the turn's commit from it
    on_pending: Callable[[], None] | None

    def has_pending(self) -> bool: ...

    def pending_seq(self) -> Ticket: ...

    def durable_seq(self) -> Ticket: ...

    def seal(self) -> SealedBatch | None: ...

    def write(self, batch: SealedBatch) -> None: ...

    # A full disk, waited out (the committer's retry_full): only a store that
    # raises StoreFullError ever needs reopening.
    @property
    def path(self) -> str: ...

    @property
    def needs_reopen(self) -> bool: ...

    def reopen(self) -> None: ...


class BatchStore(ABC):
    """A GroupCommitStore on `batches`, which it owns and closes."""

    def __init__(self, batches: BatchWriter) -> None:
        self._batches = batches

    @property
    def on_pending(self) -> Callable[[], None] | None:
        """Called (no arguments) when a write lands in an empty pending batch."""
        return self._batches.on_pending

    @on_pending.setter
    def on_pending(self, callback: Callable[[], None] | None) -> None:
        self._batches.on_pending = callback

    # -- tickets ---------------------------------------------------------------

    def pending_seq(self) -> Ticket:
        """Ticket of the most recent buffered write (durable or not)."""
        return self._batches.pending_seq()

    def durable_seq(self) -> Ticket:
        """Every write with a ticket <= this is on disk (fsync completed)."""
        return self._batches.durable_seq()

    def has_pending(self) -> bool:
        """True if writes are buffered that no batch has taken yet."""
        return self._batches.has_pending()

    # -- seal and write --------------------------------------------------------

    def seal(self) -> SealedBatch | None:
        """Take the pending writes as a batch and start a fresh pending batch.

        Returns None when nothing is pending. Writes buffered after this call
        go into the next batch.
        """
        return self._batches.seal()

    def write(self, batch: SealedBatch) -> None:
        """Write a sealed batch and fsync it; may run off the loop thread.

        Batches must be written one at a time, in the order seal() made them.
        """
        self._batches.write(batch)

    def _write_pending(self) -> Ticket:
        """Seal what is pending and write it here, on the buffering thread; returns durable_seq()."""
        batch = self._batches.seal()
        if batch is not None:
            self.write(batch)
        return self._batches.durable_seq()

    def _unwritten(self) -> str:
        """The sealed writes not written yet (in flight, or lost to a failed write), for an error."""
        return f"writes {self._batches.durable_seq() + 1}..{self._batches.sealed_seq()}"

    # -- out of space ------------------------------------------------------------

    @property
    def needs_reopen(self) -> bool:
        """A write failed for want of space: reopen() before writing again."""
        return self._batches.needs_reopen

    def reopen(self) -> None:
        """Clear RocksDB's sticky no-space error (storage/batch.py says how);
        on the loop thread, with no write in flight. Raises the store's full
        error if the database cannot be opened yet."""
        self._batches.reopen()

    @property
    def path(self) -> str:
        return self._batches.path

    def inject_faults(self, faults: DiskFaults | None, store: str) -> None:
        """Tests: ask `faults` before each write and fsync, as `store` (storage/faults.py)."""
        self._batches.faults, self._batches.fault_store = faults, store

    # -- lifecycle ---------------------------------------------------------------

    def memory_bytes(self) -> int:
        """RocksDB's table readers and block cache (the memory alarm counts them)."""
        return self._batches.memory_bytes()

    def close(self) -> None:
        """Write what is pending and close the database; idempotent.

        Must not run while another thread is inside write() (close the
        GroupCommitter first).
        """
        if self._batches.closed:
            return
        try:
            self._write_before_close()
        finally:
            self._batches.close()

    @abstractmethod
    def _write_before_close(self) -> None:
        """What close() writes first: the store's commit of everything pending."""

    @property
    def closed(self) -> bool:
        return self._batches.closed

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
