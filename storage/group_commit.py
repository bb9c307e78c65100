"""Group commit for a store: fsync off the event loop, once per turn.

It drives any `storage.batch_store.GroupCommitStore`: the node's message
store is one, and so is its Raft log (raft/journal.py). The broker buffers
writes into the `MessageStore` from the event loop, then asks to hear when
they are durable, e.g. to send the AMQP `accepted` outcome only after the
fsync that covers the message [3.4.2]:

    ticket = store.put(queue, seq, record)
    committer.on_durable(ticket, lambda: settle(delivery))   # or
    await committer.durable(ticket)

How it runs: the first write into an empty pending batch schedules a commit
with `loop.call_soon`, so every write made in the rest of that loop turn joins
it. The commit seals the pending batch and hands it to one dedicated worker
thread, which applies the batch and fdatasyncs the RocksDB WAL with the GIL
released (storage/rocks.py says why it is not a synced RocksDB write), so the loop
keeps running during the fsync. Meanwhile new writes accumulate in the next
pending batch. (When the loop is busy, the worker waits up to
sys.getswitchinterval(), 5 ms by default, to get the GIL back after the
fsync; that wait adds to commit latency, not to loop time.)
When the write completes, the callbacks and futures of every covered ticket
run on the loop, in ticket order, and if writes piled up during the fsync the
next commit starts at once. Exactly one commit is in flight at any time, so
batches reach the disk in the order they were sealed.

Failure: a failed write leaves the store's on-disk state unknown (an fsync
error cannot be retried safely), so the committer becomes failed for good.
Pending `durable()` calls raise the StoreError, pending callbacks are dropped
and never run, later calls raise, and `on_error` (default: the loop's
exception handler) hears about it once; the broker should stop the node.

A full disk (StoreFullError) is waited out instead when `retry_full` (seconds)
is given: the batch that failed is kept, the committer is `out_of_space`, and
every `retry_full` seconds, once the filesystem has room for it, it reopens
the store (clearing RocksDB's sticky error) and writes the same batch again,
then goes on with what piled up meanwhile. Nothing buffered is dropped and
batches still reach the disk in seal order. While out of space, `durable()`
raises StoreFullError, while an `on_durable` callback waits and runs once its
write is durable (a publish is confirmed late, never refused: its message is
in the queue already and would be delivered all the same).
`on_full` hears (on the loop) when a write first fails so; a batch the store
wrote itself on the loop that failed so is handed over with `stall()` (the
Raft log's flush, raft/journal.py) and waited out the same way.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from storage.batch import SealedBatch, Ticket
from storage.batch_store import GroupCommitStore
from storage.message_store import StoreError, StoreFullError

__all__ = ["GroupCommitter"]

log = logging.getLogger("warren.store")
_RETRY_HEADROOM = 1 << 20  # free bytes wanted beyond the stalled batch's size before a retry


class GroupCommitter:
    """Drives `store`'s commits from `loop` (default: the running loop)."""

    def __init__(
        self,
        store: GroupCommitStore,
        loop: asyncio.AbstractEventLoop | None = None,
        *,
        on_error: Callable[[BaseException], None] | None = None,
        on_written: Callable[[], None] | None = None,
        retry_full: float | None = None,
        on_full: Callable[[], None] | None = None,
        name: str = "message store",
    ) -> None:
        self._store = store
        self._loop = loop if loop is not None else asyncio.get_running_loop()
        self._on_error = on_error
        # on the loop after each write, before this committer's own waiters: a store that
        # keeps waiters of its own (raft.journal.DurableLog.release_durable) runs them here
        self._on_written = on_written
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="warren-store-commit")
        # Invariant: at most one batch is being written, and while one is,
        # no commit is scheduled (its completion starts the next one).
        self._in_flight: SealedBatch | None = None
        self._scheduled = False
        self._closed = False
        self._failed: StoreError | None = None
        self._retry_full = retry_full
        self._on_full = on_full  # on the loop when a write first fails for want of space
        self._name = name  # in the log lines
        self._stalled: SealedBatch | None = None  # failed for want of space, to be written again
        self._stall_after: tuple[SealedBatch, StoreFullError] | None = None  # stall() during a write
        self._full_error: StoreFullError | None = None
        self._retry_handle: asyncio.TimerHandle | None = None
        # Min-heap of (ticket, registration order, callback or future).
        self._waiters: list[tuple[Ticket, int, Callable[[], None] | asyncio.Future[None]]] = []
        self._order = itertools.count()
        self.commits = 0
        store.on_pending = self._schedule
        if store.has_pending():
            self._schedule()

    # -- public ------------------------------------------------------------

    async def durable(self, ticket: Ticket) -> None:
        """Return once the write with this ticket (and all before it) is fsync'ed."""
        if ticket <= self._store.durable_seq():
            return
        self._check_waitable(ticket)
        if self._full_error is not None:
            raise self._full_error
        fut: asyncio.Future[None] = self._loop.create_future()
        heapq.heappush(self._waiters, (ticket, next(self._order), fut))
        await fut

    def on_durable(self, ticket: Ticket, callback: Callable[[], None]) -> None:
        """Call `callback()` on the loop once `ticket` is durable.

        Callbacks run in ticket order (registration order among equal
        tickets), never from inside this call: an already durable ticket's
        callback is scheduled with call_soon. Out of space, it waits for room.
        """
        if ticket <= self._store.durable_seq():
            self._loop.call_soon(callback)
            return
        self._check_waitable(ticket)
        heapq.heappush(self._waiters, (ticket, next(self._order), callback))

    async def flush(self) -> None:
        """Return once everything buffered so far is durable."""
        await self.durable(self._store.pending_seq())

    async def close(self) -> None:
        """Commit what is pending, wait for it, stop the worker thread.

        The store stays open (its owner closes it). Idempotent; after a
        failure it only stops the thread.
        """
        if self._closed:
            return
        try:
            if self._failed is None and self._stalled is None:
                await self.flush()
            elif self._stalled is not None:
                log.error("%s closed out of space: writes %d..%d were never written (none was confirmed)",
                          self._name, self._stalled.base + 1, self._store.pending_seq())  # fmt: skip
        finally:
            self._closed = True
            if self._retry_handle is not None:
                self._retry_handle.cancel()
            if self._store.on_pending == self._schedule:
                self._store.on_pending = None
            self._executor.shutdown(wait=False)

    @property
    def in_flight(self) -> bool:
        return self._in_flight is not None

    @property
    def failed(self) -> StoreError | None:
        return self._failed

    @property
    def out_of_space(self) -> bool:
        """A write failed for want of space and has not been written since."""
        return self._stalled is not None

    # -- machinery -----------------------------------------------------------

    def _check_waitable(self, ticket: Ticket) -> None:
        if self._failed is not None:
            raise self._failed
        if ticket > self._store.pending_seq():
            raise ValueError(f"ticket {ticket} is beyond the last write ({self._store.pending_seq()})")
        if self._closed:
            raise StoreError("group committer is closed")

    def _schedule(self) -> None:
        # Called by the store on the first write into an empty pending batch.
        if (self._scheduled or self._in_flight is not None or self._failed is not None or self._closed
                or self._stalled is not None):  # fmt: skip
            return
        self._scheduled = True
        self._loop.call_soon(self._kick)

    def _kick(self) -> None:
        self._scheduled = False
        if self._in_flight is not None or self._failed is not None or self._stalled is not None:
            return
        batch = self._store.seal()
        if batch is None:
            return
        self._in_flight = batch
        fut = self._loop.run_in_executor(self._executor, self._store.write, batch)
        fut.add_done_callback(self._written)

    def _written(self, fut: asyncio.Future[None]) -> None:
        batch, self._in_flight = self._in_flight, None
        exc = fut.exception() if not fut.cancelled() else asyncio.CancelledError()
        if isinstance(exc, StoreFullError) and self._retry_full is not None and batch is not None:
            self._stall(batch, exc)
            return
        if exc is not None:
            self._fail(exc)
            return
        if self._stalled is not None:
            log.warning("%s writes again: writes up to %d are durable", self._name, batch.ticket if batch else 0)
            self._stalled = self._full_error = None
        self.commits += 1
        if self._on_written is not None:
            self._on_written()
        self._release(self._store.durable_seq())
        if self._stall_after is not None:  # the store's own write after this one failed for want of space
            stalled, self._stall_after = self._stall_after, None
            self._stall(*stalled)
            return
        # Writes that accumulated during the fsync (and any made by the
        # callbacks just run) go out now, as the next group.
        # After close() such writes are the store owner's to commit.
        if self._store.has_pending() and not self._closed:
            self._kick()

    def _release(self, durable: Ticket) -> None:
        waiters = self._waiters
        while waiters and waiters[0][0] <= durable:
            _, _, waiter = heapq.heappop(waiters)
            if isinstance(waiter, asyncio.Future):
                if not waiter.done():
                    waiter.set_result(None)
                continue
            try:
                waiter()
            except Exception as e:  # one bad callback must not stall the others
                self._loop.call_exception_handler(
                    {"message": "exception in a durable callback", "exception": e, "callback": waiter}
                )

    def _fail(self, exc: BaseException) -> None:
        err = exc if isinstance(exc, StoreError) else StoreError(f"message store commit failed: {exc!r}")
        if err is not exc:
            err.__cause__ = exc
        self._failed = err
        waiters, self._waiters = self._waiters, []
        for _, _, waiter in waiters:
            if isinstance(waiter, asyncio.Future) and not waiter.done():
                waiter.set_exception(err)
        if self._on_error is not None:
            self._on_error(err)
        else:
            self._loop.call_exception_handler({"message": "message store commit failed", "exception": err})

    # -- out of space ----------------------------------------------------------

    def stall(self, batch: SealedBatch, err: StoreFullError) -> None:
        """The store wrote `batch` itself, on the loop, and it failed for want of space
        (raft.journal.DurableLog.flush): wait it out like one of this committer's own
        writes. With no write in flight; without `retry_full` the committer fails."""
        if self._retry_full is None:
            self._fail(err)
            return
        if self._in_flight is not None:
            # its write landed (the store's flush waits for that) but _written has not run yet
            self._stall_after = (batch, err)
            return
        self._stall(batch, err)

    def _stall(self, batch: SealedBatch, err: StoreFullError) -> None:
        first = self._stalled is None
        if first:
            log.error("%s; writes wait for space (retried every %ss), and so do their confirms",
                      err, self._retry_full)  # fmt: skip
        self._stalled, self._full_error = batch, err
        if self._retry_handle is not None:
            self._retry_handle.cancel()
            self._retry_handle = None
        if first and self._on_full is not None:
            self._on_full()
        # Futures waiting are told now; callbacks stay for the write that will come.
        kept = []
        for entry in self._waiters:
            waiter = entry[2]
            if isinstance(waiter, asyncio.Future):
                if not waiter.done():
                    waiter.set_exception(err)
            else:
                kept.append(entry)
        heapq.heapify(kept)
        self._waiters = kept
        if not self._closed:
            self._retry_handle = self._loop.call_later(self._retry_full, self._retry)

    def _retry(self) -> None:
        self._retry_handle = None
        batch = self._stalled
        if batch is None or self._closed or self._failed is not None:
            return
        try:
            room = shutil.disk_usage(self._store.path).free >= batch.size() + _RETRY_HEADROOM
            if room and self._store.needs_reopen:
                self._store.reopen()
        except (OSError, StoreError) as e:
            log.warning("%s still cannot write: %s", self._name, e)
            room = False
        if not room:
            self._retry_handle = self._loop.call_later(self._retry_full, self._retry)
            return
        self._in_flight = batch
        fut = self._loop.run_in_executor(self._executor, self._store.write, batch)
        fut.add_done_callback(self._written)
