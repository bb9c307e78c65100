"""Group commit for the message store: fsync off the event loop, once per turn.

The broker buffers writes into a `MessageStore` from the event loop, then asks
to hear when they are durable, e.g. to send the AMQP `accepted` outcome only
after the fsync that covers the message [3.4.2]:

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
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from storage.batch import SealedBatch, Ticket
from storage.message_store import MessageStore, StoreError

__all__ = ["GroupCommitter"]


class GroupCommitter:
    """Drives `store`'s commits from `loop` (default: the running loop)."""

    def __init__(
        self,
        store: MessageStore,
        loop: asyncio.AbstractEventLoop | None = None,
        *,
        on_error: Callable[[BaseException], None] | None = None,
        on_written: Callable[[], None] | None = None,
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
        fut: asyncio.Future[None] = self._loop.create_future()
        heapq.heappush(self._waiters, (ticket, next(self._order), fut))
        await fut

    def on_durable(self, ticket: Ticket, callback: Callable[[], None]) -> None:
        """Call `callback()` on the loop once `ticket` is durable.

        Callbacks run in ticket order (registration order among equal
        tickets), never from inside this call: an already durable ticket's
        callback is scheduled with call_soon.
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
            if self._failed is None:
                await self.flush()
        finally:
            self._closed = True
            if self._store.on_pending == self._schedule:
                self._store.on_pending = None
            self._executor.shutdown(wait=False)

    @property
    def in_flight(self) -> bool:
        return self._in_flight is not None

    @property
    def failed(self) -> StoreError | None:
        return self._failed

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
        if self._scheduled or self._in_flight is not None or self._failed is not None or self._closed:
            return
        self._scheduled = True
        self._loop.call_soon(self._kick)

    def _kick(self) -> None:
        self._scheduled = False
        if self._in_flight is not None or self._failed is not None:
            return
        batch = self._store.seal()
        if batch is None:
            return
        self._in_flight = batch
        fut = self._loop.run_in_executor(self._executor, self._store.write, batch)
        fut.add_done_callback(self._written)

    def _written(self, fut: asyncio.Future[None]) -> None:
        self._in_flight = None
        exc = fut.exception() if not fut.cancelled() else asyncio.CancelledError()
        if exc is not None:
            self._fail(exc)
            return
        self.commits += 1
        if self._on_written is not None:
            self._on_written()
        self._release(self._store.durable_seq())
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
