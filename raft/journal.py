"""Durable Raft logs for every replication group of a node, on RocksDB (rocksdict).

pysyncobj's own file journal is an mmap that is never fsynced, its followers
ack an entry (and its leader counts itself) as soon as the entry is in that
mmap, and its compaction rewrites the whole file in place, so a kill -9 in the
middle loses entries the node had acknowledged. This module replaces it.

Layout. One RocksDB per node (`<data_dir>/raft`) holds the log of every group
(the metadata group, and later one group per quorum queue). `DurableLog` owns
the database and one pending WriteBatch; `DurableLog.journal(group)` hands out
a `RaftJournal`, which implements the interface pysyncobj's `SyncObj` calls on
its journal (pysyncobj/journal.py: add, clear, deleteEntriesFrom,
deleteEntriesTo, __getitem__, __len__, _destroy, set/getRaftCommitIndex,
setCurrentTerm, getCurrentTerm, getVotedForNodeId, onOneSecondTimer). The
journal keeps each entry's term and length in memory, and the commands of
only the newest entries (see RaftJournal); pysyncobj's reads of older ones
(raft.patches routes its `__getEntries` to `RaftJournal.entries`) come from
RocksDB. Every change is a write in the node's pending batch:

    b"\\x00format"                         -> u8 journal format version (1)
    b"g" | u16 len(G) | G | b"e" | u64 idx -> u64 term | command bytes
    b"g" | u16 len(G) | G | b"h"           -> hard state: AMQP list [term, voted_for]
    b"g" | u16 len(G) | G | b"c"           -> u64 commit index (a hint; see below)

(integers big-endian, so keys sort by index). Dropping entries from the front
(compaction after a snapshot) and from the back (a Raft §5.3 conflict) are each
one `delete_range`; a batch is applied atomically, so no crash leaves a
half-compacted log. The commit index is stored only as pysyncobj's restart
hint: it never exceeds what a majority stored, and pysyncobj clamps it to the
log end on load.

Durability: etcd's Ready discipline, one fsync for every group's writes of a
loop turn (the node runs it on a GroupCommitter's thread, see below).
Nothing is written to disk while pysyncobj runs: its ticks only buffer. The
node's loop turn is

    for group in groups: group.doTick(0)   # buffers writes, queues messages
    log.flush()                            # ONE synced write for every group,
                                           # then releases the held messages

(or `log.flush_every_turn(loop)`, which schedules that flush with call_soon
after the first write of a turn), and two rules make "persist before send,
persist before confirm" hold:

1. Hold outgoing messages. Every message pysyncobj sends waits until the
   writes buffered before it are durable: `log.after_durable(deliver)` runs
   `deliver` at once if they already are, else right after the flush that
   covers them, in submission order; `log.sync_point()` is the same gate as
   an awaitable, in the shape of raft/transport.py's `before_flush` hook
   (`transport.before_flush.append(log.sync_point)`). So a follower's
   `next_node_idx` ack (sent from pysyncobj's 'append_entries' handler right
   after `journal.add`), a vote grant (sent right after `setCurrentTerm`) and
   a leader's AppendEntries never leave before the writes they reflect. (A
   leader could send its entries before its own fsync, as etcd does; holding
   them costs one loop turn of latency and keeps the rule to one line.)
2. The leader counts itself only for durable entries. pysyncobj's commit
   rule starts every count at 1 for the leader itself;
   `RaftJournal.durable_index()` tells `raft.patches.SafeSyncObj` how far
   that is true. (With rule 1 a follower cannot hold an entry the leader has
   not synced, so this matters for a one-member group, or if rule 1 is ever
   relaxed for the leader's own AppendEntries.)

The database, the pending batch, the tickets and the fsync are a
`storage.batch.BatchWriter` (shared with the message store): a flush writes
the batch unsynced and then fdatasyncs RocksDB's WAL, releasing the GIL
during the fsync (storage/rocks.py says why). Like the message store, the
log is a `storage.batch_store.BatchStore`: it speaks `GroupCommitStore`, the
protocol of `storage.group_commit.GroupCommitter` (`on_pending`,
`has_pending`, `pending_seq`, `durable_seq`, `seal`, `write`), so a node moves
the fsync off the loop thread (node/cluster/cluster.py does):
`GroupCommitter(log, loop, on_written=...)` with a callback that calls
`log.release_durable()`. A `flush()` on the loop while the committer's batch
is being written waits for that batch to land first (the order of batches is
the order of the log).

Failure is fail-stop: a write or fsync error leaves the disk state unknown,
so the log refuses every later write, drops the held messages (they are
never sent) and fails the pending `sync_point()` futures; the node must stop.

Except a full disk (ENOSPC, EDQUOT), which is waited out: the write raises
`JournalFullError` (a storage StoreFullError), RocksDB's sticky error is
cleared by reopening it, and the same batch is written again once there is
room (the node's GroupCommitter does both, `retry_full`; a batch that
`flush()` itself wrote on the loop is handed to it through `on_stall`).
Meanwhile, `out_of_space` is set and nothing it did not write counts as
written: `durable_seq()` does not move, so no leader counts itself for the
entries (`durable_index()`), `after_durable` callbacks wait, and the
`sync_point()` futures of the turns waiting for those writes fail with
`NotDurable`, as do new ones until a write lands: the transport drops those
turns' messages (acks, votes), as a lossy network would, and sends on.
pysyncobj goes on in memory (a follower takes entries, applies what its
leader says is committed: a majority elsewhere stored it); it is never told
of a write that failed, which is what keeps its assumption that an appended
entry is persisted true for every message it sends. `flush()` raises
`JournalFullError` at once while out of space (a snapshot waits: pysyncobj
retries it). The node raises its disk alarm meanwhile (node/ops/alarms.py).

Threading contract: everything but `write()` runs on the loop thread; `write()`
may run on one other thread, one batch at a time, in `seal()` order.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator

from rocksdict import Options

from storage.batch import BatchWriter, SealedBatch, Ticket
from storage.batch_store import BatchStore
from storage.message_store import StoreFullError

__all__ = ["DurableLog", "JournalError", "JournalFullError", "NotDurable", "RaftJournal"]

from .journal_format import (
    _BLOB,
    _FORMAT,
    _FORMAT_KEY,
    _GROUP,
    _IN_FLIGHT_WAIT,
    _MAX_GROUP_NAME,
    _U16,
    JournalError,
    NotDurable,
)


class JournalFullError(JournalError, StoreFullError):
    """A Raft log write failed for want of space; the batch is kept and written again."""


def _blob_prefix(group: str) -> bytes:
    return _BLOB + _group_prefix(group)[1:]


def _group_prefix(group: str) -> bytes:
    name = group.encode("utf-8")
    if len(name) > _MAX_GROUP_NAME:
        raise ValueError(f"raft group name of {len(name)} bytes is too long")
    return _GROUP + _U16.pack(len(name)) + name


_MEMTABLE_BYTES = 16 * 1024 * 1024


def _bound_memory(opts: Options) -> None:
    """Two 16 MiB memtables instead of RocksDB's 2 x 64 MiB: a deep quorum
    queue writes each body twice here (its log entry, then its blob), and
    RocksDB's default let the memtables alone grow each replica by up to
    128 MiB (docs/benchmarks.md, "Deep quorum queue ... per replica")."""
    opts.set_write_buffer_size(_MEMTABLE_BYTES)
    opts.set_max_write_buffer_number(2)


class DurableLog(BatchStore):
    """The Raft logs of one node in one RocksDB, with one group commit per turn.

    `sync=False` skips the fsync (tests and benchmarks only).
    """

    def __init__(self, path: str | os.PathLike[str], *, sync: bool = True) -> None:
        batches = BatchWriter(
            path,
            label="raft log",
            format_key=_FORMAT_KEY,
            format_version=_FORMAT,
            sync=sync,
            error=JournalError,
            on_failure=self._write_failed,
            full_error=JournalFullError,
            tune=_bound_memory,
        )
        super().__init__(batches)
        # Callbacks waiting for a flush, in submission order; tickets ascend.
        self._held: deque[tuple[Ticket, Callable[[], None], asyncio.Future[None] | None]] = deque()
        self._failed: JournalError | None = None
        # set (by write(), on the committer's thread) while a write failed for want of space
        # and none has landed since; cleared by the next write that lands
        self._full: JournalFullError | None = None
        # a batch flush() wrote on the loop that failed for want of space goes here, with
        # the error: the GroupCommitter writes it again (else the log fail-stops)
        self.on_stall: Callable[[SealedBatch, JournalFullError], None] | None = None
        # groups whose journal was closed or dropped, with the ticket of their last write:
        # one reopened while out of space may be loaded from disk only if that write is durable
        self._touched: dict[str, Ticket] = {}
        # notified when a write lands (or fails): flush() on the loop waits on it for a batch
        # a GroupCommitter is writing on its thread, which must reach the disk first
        self._written = threading.Condition()
        self._flush_scheduled = False
        self._journals: dict[str, RaftJournal] = {}

    @property
    def flushes(self) -> int:
        """Batches written so far."""
        return self._batches.writes

    # -- groups --------------------------------------------------------------

    def journal(self, group: str) -> RaftJournal:
        """The journal of `group`, loaded from disk; one open journal per group.

        Flushes first if writes are pending, so the load sees them.
        """
        if group in self._journals:
            raise JournalError(f"raft group {group!r} already has an open journal")
        if self.has_pending() or self._batches.has_unwritten():
            try:
                self.flush()
            except JournalFullError:
                # out of space: what is on disk is the whole journal unless this group wrote since
                if self._touched.get(group, 0) > self._batches.durable_seq():
                    raise
        journal = RaftJournal(self, group, _group_prefix(group))
        self._journals[group] = journal
        return journal

    def drop_group(self, group: str) -> Ticket:
        """Delete every key of `group` (its journal must be closed): one range tombstone."""
        if group in self._journals:
            raise JournalError(f"raft group {group!r} still has an open journal")
        prefix = _group_prefix(group)
        ticket = self._touched[group] = self._delete_range(prefix, prefix + b"\xff")
        return ticket

    # -- side data of a group, synced with its journal ------------------------------

    def put_blob(self, group: str, key: bytes, value: bytes) -> Ticket:
        """Store `value` under (`group`, `key`) in the next flush: durable with
        the journal writes of the same loop turn (one fsync for both)."""
        return self._put(_blob_prefix(group) + key, value)

    def put_blobs(self, group: str, items: list[tuple[bytes, bytes]]) -> Ticket:
        """`put_blob` of each (key, value) in order: the group's prefix made once, one ticket."""
        self._check_ok()
        prefix = _blob_prefix(group)
        return self._batches.put_many([(prefix + key, value) for key, value in items])

    def get_blob(self, group: str, key: bytes) -> bytes | None:
        """A flushed blob (writes still pending are not visible)."""
        return self._get(_blob_prefix(group) + key)

    def blobs_from(self, group: str, key: bytes, count: int, key_len: int) -> list[tuple[bytes, bytes]]:
        """Up to `count` flushed blobs of `group` from `key` on, in key order, as
        (key, value), stopping at the first key not `key_len` bytes long: one
        iterator instead of a get per key (a consumer's read-ahead)."""
        prefix = _blob_prefix(group)
        n = len(prefix)
        out: list[tuple[bytes, bytes]] = []
        for k, value in self._items_from(prefix + key):
            if len(out) >= count or k[:n] != prefix or len(k) != n + key_len:
                break
            out.append((k[n:], value))
        return out

    def delete_blobs(self, group: str, below: bytes | None = None) -> Ticket:
        """Delete `group`'s blobs with a key below `below` (all when None): one range tombstone."""
        prefix = _blob_prefix(group)
        return self._delete_range(prefix, prefix + below if below is not None else prefix + b"\xff" * 9)

    def groups(self) -> list[str]:
        """Names of the groups that have anything stored (durable writes only)."""
        db = self._batches.db
        out: list[str] = []
        key = _GROUP
        while True:
            nxt = next(iter(db.keys(from_key=key)), None)
            if nxt is None or nxt[:1] != _GROUP:
                return out
            (n,) = _U16.unpack_from(nxt, 1)
            prefix = nxt[: 3 + n]
            out.append(prefix[3:].decode("utf-8"))
            key = prefix + b"\xff"

    # -- the hold-until-durable gate -----------------------------------------

    def after_durable(self, deliver: Callable[[], None]) -> None:
        """Run `deliver()` once every write buffered so far is durable.

        At once if it already is; otherwise from the `release_durable()` after
        the write that covers them (flush() calls it), in submission order.
        """
        self._check_ok()
        ticket = self._batches.pending_seq()
        if ticket <= self._batches.durable_seq() and not self._held:
            deliver()
        else:
            self._held.append((ticket, deliver, None))

    def sync_point(self) -> asyncio.Future[None] | None:
        """None if every write buffered so far is durable, else a future for that.

        The shape of raft/transport.py's `before_flush` hook: the transport
        holds the messages it sealed until the future completes; the future
        fails if the flush does. Something must flush: `flush()` each loop
        turn, or `flush_every_turn(loop)`.
        """
        self._check_ok()
        ticket = self._batches.pending_seq()
        if ticket <= self._batches.durable_seq() and not self._held:
            return None
        fut = asyncio.get_running_loop().create_future()
        if self._full is not None:
            fut.set_exception(NotDurable(str(self._full)))  # not written for now: the turn is dropped
            return fut

        def done() -> None:
            if not fut.done():
                fut.set_result(None)

        self._held.append((ticket, done, fut))
        return fut

    def groups_made_durable(self) -> list[str]:
        """The groups whose durable_index() moved since the last call: after a write
        lands, their leaders may count themselves for more entries."""
        moved = []
        for name, journal in self._journals.items():
            if journal._unsynced:
                before = journal._durable_idx
                if journal.durable_index() != before:
                    moved.append(name)
        return moved

    def release_durable(self) -> int:
        """Run the held callbacks whose writes are durable; returns how many ran."""
        held = self._held
        durable = self._batches.durable_seq()
        n = 0
        while held and held[0][0] <= durable:
            deliver = held.popleft()[1]
            deliver()
            n += 1
        return n

    def drop_unwritten_turns(self) -> int:
        """Out of space: fail the `sync_point()` futures still waiting with NotDurable (the
        transport drops their turns); `after_durable` callbacks stay for the write to come.
        On the loop; returns how many failed."""
        kept: deque = deque()
        dropped = 0
        err = NotDurable(str(self._full) if self._full is not None else "the raft log is out of space")
        for entry in self._held:
            fut = entry[2]
            if fut is None:
                kept.append(entry)
            else:
                dropped += 1
                if not fut.done():
                    fut.set_exception(err)
        self._held = kept
        return dropped

    @property
    def out_of_space(self) -> JournalFullError | None:
        """The error of a write that failed for want of space, while no write has landed since."""
        return self._full

    def held(self) -> int:
        """Number of callbacks waiting for a flush."""
        return len(self._held)

    def flush_every_turn(self, loop: asyncio.AbstractEventLoop) -> None:
        """Flush with `loop.call_soon` after the first write into an empty batch.

        Every write made before that callback runs, by any group, joins the
        same fsync: one per loop turn. Not together with a GroupCommitter.
        """

        def flush_soon() -> None:
            if not self._flush_scheduled:
                self._flush_scheduled = True
                loop.call_soon(self._scheduled_flush)

        self.on_pending = flush_soon
        if self.has_pending():
            flush_soon()

    def _scheduled_flush(self) -> None:
        self._flush_scheduled = False
        if not self._batches.closed and self._failed is None:
            self.flush()

    # -- group commit ----------------------------------------------------------

    def flush(self) -> Ticket:
        """Write and fsync everything pending (one synced write), then release held messages.

        Returns durable_seq(). On the loop thread; not while a GroupCommitter
        has a batch in flight.
        """
        self._check_ok()
        batches = self._batches
        if batches.has_unwritten():
            with self._written:
                landed = self._written.wait_for(
                    lambda: not batches.has_unwritten() or self._failed is not None or self._full is not None,
                    _IN_FLIGHT_WAIT,
                )
            self._check_ok()
            if self._full is not None:
                raise self._full  # a batch waits for space: nothing can be written past it
            if not landed:
                raise JournalError(
                    f"{self._unwritten()} are sealed but not written after {_IN_FLIGHT_WAIT} s; cannot flush past them"
                )
        batch = batches.seal()
        if batch is not None:
            try:
                self.write(batch)
            except JournalFullError as e:
                if self.on_stall is None:
                    self._fail(e)  # nobody to write it again
                else:
                    self.on_stall(batch, e)
                raise
        self.release_durable()
        return batches.durable_seq()

    def write(self, batch: SealedBatch) -> None:
        """Apply a sealed batch and fsync the WAL; may run off the loop thread."""
        try:
            super().write(batch)  # a failure fail-stops the log first (_write_failed)
        except JournalFullError as e:
            with self._written:
                self._full = e  # waited out: the same batch is written again (module docstring)
                self._written.notify_all()
            raise
        with self._written:
            self._full = None
            self._written.notify_all()

    def _write_failed(self, err: Exception) -> None:
        # The disk state is unknown (an fsync error cannot be retried
        # safely): fail-stop, and never release what waited for this.
        with self._written:
            self._fail(err)
            self._written.notify_all()

    # -- lifecycle ---------------------------------------------------------------

    def _write_before_close(self) -> None:
        if self._failed is None and self._full is None:  # after a failure nothing more is written
            self.flush()

    # -- used by RaftJournal -------------------------------------------------------

    def _put(self, key: bytes, value: bytes) -> Ticket:
        self._check_ok()
        return self._batches.put(key, value)

    def _delete_range(self, start: bytes, end: bytes) -> Ticket:
        self._check_ok()
        return self._batches.delete_range(start, end)

    def _scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        n = len(prefix)
        for key, value in self._batches.db.items(from_key=prefix):
            if key[:n] != prefix:
                break
            yield key, value

    def _get(self, key: bytes) -> bytes | None:
        return self._batches.db.get(key)

    def _items_from(self, key: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Stored (key, value) pairs from `key` on, in key order (writes still pending are not seen)."""
        return self._batches.db.items(from_key=key)

    def _closed_journal(self, group: str) -> None:
        self._journals.pop(group, None)
        self._touched[group] = self._batches.pending_seq()
        durable = self._batches.durable_seq()
        if len(self._touched) > 64:  # forget the groups whose writes are all on disk
            self._touched = {g: t for g, t in self._touched.items() if t > durable}

    def _fail(self, err: JournalError) -> None:
        self._failed = err
        held, self._held = self._held, deque()
        for _, _, fut in held:
            if fut is not None and not fut.done():
                fut.get_loop().call_soon_threadsafe(_set_exception, fut, err)

    def _check_ok(self) -> None:
        if self._failed is not None:
            raise self._failed

    @property
    def failed(self) -> JournalError | None:
        return self._failed


def _set_exception(fut: asyncio.Future[None], err: BaseException) -> None:
    if not fut.done():
        fut.set_exception(err)


from .group_journal import TAIL_BYTES, Entry, RaftJournal  # noqa: E402, F401 - a group's journal, made by DurableLog.journal()
