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
during the fsync (storage/rocks.py says why). The log also speaks the store
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

Threading contract: everything but `write()` runs on the loop thread; `write()`
may run on one other thread, one batch at a time, in `seal()` order.
"""

from __future__ import annotations

import asyncio
import os
import struct
import threading
from array import array
from collections import deque
from collections.abc import Callable, Iterator

from amqp import codec
from storage.batch import BatchWriter, SealedBatch, Ticket

__all__ = ["DurableLog", "JournalError", "RaftJournal"]

_FORMAT_KEY = b"\x00format"
_FORMAT = 1
_U64 = struct.Struct(">Q")
_U16 = struct.Struct(">H")
_GROUP = b"g"
_BLOB = b"b"  # a group's side data (quorum queue bodies), outside its journal
_ENTRY = b"e"
_HARD = b"h"
_COMMIT = b"c"
_MAX_GROUP_NAME = (1 << 16) - 1
_IN_FLIGHT_WAIT = 30.0  # seconds flush() waits for a batch another thread is writing


class JournalError(Exception):
    """The Raft log store failed or holds something this Warren cannot read."""


def _blob_prefix(group: str) -> bytes:
    return _BLOB + _group_prefix(group)[1:]


def _group_prefix(group: str) -> bytes:
    name = group.encode("utf-8")
    if len(name) > _MAX_GROUP_NAME:
        raise ValueError(f"raft group name of {len(name)} bytes is too long")
    return _GROUP + _U16.pack(len(name)) + name


class DurableLog:
    """The Raft logs of one node in one RocksDB, with one group commit per turn.

    `sync=False` skips the fsync (tests and benchmarks only).
    """

    def __init__(self, path: str | os.PathLike[str], *, sync: bool = True) -> None:
        self._batches = BatchWriter(
            path,
            label="raft log",
            format_key=_FORMAT_KEY,
            format_version=_FORMAT,
            sync=sync,
            error=JournalError,
            on_failure=self._write_failed,
        )
        # Callbacks waiting for a flush, in submission order; tickets ascend.
        self._held: deque[tuple[Ticket, Callable[[], None], asyncio.Future[None] | None]] = deque()
        self._failed: JournalError | None = None
        # notified when a write lands (or fails): flush() on the loop waits on it for a batch
        # a GroupCommitter is writing on its thread, which must reach the disk first
        self._written = threading.Condition()
        self._flush_scheduled = False
        self._journals: dict[str, RaftJournal] = {}

    @property
    def on_pending(self) -> Callable[[], None] | None:
        """Called (no arguments) when a write lands in an empty pending batch."""
        return self._batches.on_pending

    @on_pending.setter
    def on_pending(self, callback: Callable[[], None] | None) -> None:
        self._batches.on_pending = callback

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
            self.flush()
        journal = RaftJournal(self, group, _group_prefix(group))
        self._journals[group] = journal
        return journal

    def drop_group(self, group: str) -> Ticket:
        """Delete every key of `group` (its journal must be closed): one range tombstone."""
        if group in self._journals:
            raise JournalError(f"raft group {group!r} still has an open journal")
        prefix = _group_prefix(group)
        return self._delete_range(prefix, prefix + b"\xff")

    # -- side data of a group, synced with its journal ------------------------------

    def put_blob(self, group: str, key: bytes, value: bytes) -> Ticket:
        """Store `value` under (`group`, `key`) in the next flush: durable with
        the journal writes of the same loop turn (one fsync for both)."""
        return self._put(_blob_prefix(group) + key, value)

    def get_blob(self, group: str, key: bytes) -> bytes | None:
        """A flushed blob (writes still pending are not visible)."""
        return self._get(_blob_prefix(group) + key)

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
                    lambda: not batches.has_unwritten() or self._failed is not None, _IN_FLIGHT_WAIT
                )
            self._check_ok()
            if not landed:
                raise JournalError(
                    f"writes {batches.durable_seq() + 1}..{batches.sealed_seq()} are sealed but not written after"
                    f" {_IN_FLIGHT_WAIT} s; cannot flush past them"
                )
        batch = batches.seal()
        if batch is not None:
            self.write(batch)
        self.release_durable()
        return batches.durable_seq()

    def pending_seq(self) -> Ticket:
        """Ticket of the most recent buffered write."""
        return self._batches.pending_seq()

    def durable_seq(self) -> Ticket:
        """Every write with a ticket <= this is on disk."""
        return self._batches.durable_seq()

    def has_pending(self) -> bool:
        return self._batches.has_pending()

    def seal(self) -> SealedBatch | None:
        """Take the pending writes as a batch; None if nothing is pending."""
        return self._batches.seal()

    def write(self, batch: SealedBatch) -> None:
        """Apply a sealed batch and fsync the WAL; may run off the loop thread."""
        self._batches.write(batch)  # a failure fail-stops the log first (_write_failed)
        with self._written:
            self._written.notify_all()

    def _write_failed(self, err: Exception) -> None:
        # The disk state is unknown (an fsync error cannot be retried
        # safely): fail-stop, and never release what waited for this.
        with self._written:
            self._fail(err)
            self._written.notify_all()

    # -- lifecycle ---------------------------------------------------------------

    def close(self) -> None:
        """Flush what is pending and close the database; idempotent."""
        if self._batches.closed:
            return
        try:
            if self._failed is None:
                self.flush()
        finally:
            self._batches.close()

    @property
    def closed(self) -> bool:
        return self._batches.closed

    def __enter__(self) -> DurableLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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


Entry = tuple[bytes, int, int]  # (command, index, term), as pysyncobj stores them

TAIL_BYTES = 2 << 20  # commands of durable entries a journal keeps in memory (the newest ones)


class RaftJournal:
    """One group's Raft log and hard state, as pysyncobj's `Journal` (duck-typed).

    pysyncobj addresses entries by list position (0 = first entry kept after
    compaction) and reads them as (command, index, term) tuples. Indexes are
    consecutive, so memory holds per entry only its term and its command's
    length (two arrays: 12 B), plus the commands of

    - the tail: every entry not yet durable (RocksDB cannot read it back
      before its batch is written) and the newest durable ones up to
      `tail_bytes`, which is what a commit, the apply of a fresh entry and the
      AppendEntries to an up-to-date follower read;
    - the first two entries, which pysyncobj reads all the time (they end the
      snapshot).

    Any other entry (a restart's apply, a lagging follower's AppendEntries)
    is read from RocksDB, a range at a time. So memory no longer follows the
    uncompacted log (a quorum queue's entries carry its bodies), and a restart
    loads indexes and terms only. Slices are lists, read when sliced: use
    `entries()` to read a bounded number of bytes.
    """

    def __init__(self, log: DurableLog, group: str, prefix: bytes, tail_bytes: int = TAIL_BYTES) -> None:
        self._log = log
        self.group = group
        self._entry_prefix = prefix + _ENTRY
        self._hard_key = prefix + _HARD
        self._commit_key = prefix + _COMMIT
        self.tail_bytes = tail_bytes
        self._first = 0  # index of the entry at position 0 (0 while the log is empty)
        self._terms = array("Q")  # term of each entry, by position
        self._lens = array("I")  # command length of each entry, by position
        self._head: list[Entry] = []  # the entries at positions 0 and 1
        self._tail: deque[bytes] = deque()  # commands of entries _tail_from .. last
        self._tail_from = 0
        self._tail_held = 0  # bytes in _tail
        self.command_bytes = 0  # of every entry: what a snapshot would free (raft.patches, patch 8)
        self._open = True
        n = len(self._entry_prefix)
        last_two: deque[bytes] = deque(maxlen=2)  # the tail starts with the last two (log[-1] is read often)
        for key, value in log._scan(self._entry_prefix):
            if len(key) != n + 8 or len(value) < 8:
                raise JournalError(f"raft group {group!r}: malformed log key or entry at {key!r}")
            (idx,) = _U64.unpack_from(key, n)
            (term,) = _U64.unpack_from(value, 0)
            if not self._terms:
                self._first = idx
            elif idx != self._first + len(self._terms):
                raise JournalError(f"raft group {group!r}: log jumps from {self._first + len(self._terms) - 1} to {idx}")
            self._terms.append(term)
            self._lens.append(len(value) - 8)
            self.command_bytes += len(value) - 8
            if len(self._head) < 2:
                self._head.append((bytes(value[8:]), idx, term))
            last_two.append(value)
        self._tail = deque(bytes(v[8:]) for v in last_two)
        self._tail_held = sum(len(c) for c in self._tail)
        self._tail_from = self._next_index() - len(self._tail)
        hard = log._get(self._hard_key)
        if hard is None:
            self._term, self._voted_for = 0, None
        else:
            term, voted_for = codec.loads(hard)
            self._term, self._voted_for = int(term), voted_for
        commit = log._get(self._commit_key)
        self._commit = _U64.unpack(commit)[0] if commit is not None else 1
        # Durability of appended entries, for the leader's self-count:
        # `_durable_idx` is the last index known on disk, `_unsynced` holds
        # (ticket, index) of the adds after it, in order.
        self._durable_idx = self._next_index() - 1 if self._terms else 0
        self._unsynced: deque[tuple[Ticket, int]] = deque()

    # -- pysyncobj's Journal interface ------------------------------------------

    def add(self, command: bytes, idx: int, term: int) -> None:
        if self._terms and idx != self._next_index():
            raise JournalError(f"raft group {self.group!r}: append of index {idx} after {self._next_index() - 1}")
        if not self._terms:
            self._first = self._tail_from = idx
        command = bytes(command)
        self._terms.append(term)
        self._lens.append(len(command))
        self.command_bytes += len(command)
        if len(self._head) < 2:
            self._head.append((command, idx, term))
        self._tail.append(command)
        self._tail_held += len(command)
        ticket = self._log._put(self._entry_key(idx), _U64.pack(term) + command)
        self._unsynced.append((ticket, idx))
        if self._tail_held > self.tail_bytes:
            self.durable_index()  # trims the tail of what is durable by now

    def clear(self) -> None:
        self._reset()
        self._unsynced.clear()
        self._durable_idx = 0
        self._log._delete_range(self._entry_prefix, self._entry_prefix + b"\xff" * 9)

    def deleteEntriesFrom(self, entryFrom: int) -> None:  # noqa: N802 (pysyncobj's name)
        """Drop entries at list positions >= entryFrom (a conflict, Raft §5.3)."""
        if entryFrom < 0:
            entryFrom = max(0, entryFrom + len(self._terms))
        if entryFrom >= len(self._terms):
            return
        first_gone = self._first + entryFrom
        self.command_bytes -= sum(self._lens[entryFrom:])
        del self._terms[entryFrom:], self._lens[entryFrom:], self._head[entryFrom:]
        tail = self._tail
        while tail and self._tail_from + len(tail) > first_gone:
            self._tail_held -= len(tail.pop())
        self._tail_from = min(self._tail_from, first_gone)
        if not self._terms:
            self._first = 0
        elif not tail:  # keep the last entry at hand (log[-1] is read often)
            last = first_gone - 1
            tail.append(self._entry(last)[0])
            self._tail_held = len(tail[0])
            self._tail_from = last
        unsynced = self._unsynced
        while unsynced and unsynced[-1][1] >= first_gone:
            unsynced.pop()
        self._durable_idx = min(self._durable_idx, first_gone - 1)
        self._log._delete_range(self._entry_key(first_gone), self._entry_prefix + b"\xff" * 9)

    def deleteEntriesTo(self, entryTo: int) -> None:  # noqa: N802 (pysyncobj's name)
        """Drop entries at list positions < entryTo (compaction after a snapshot)."""
        if entryTo <= 0:
            return
        if entryTo >= len(self._terms):
            end = self._entry_key(self._next_index()) if self._terms else self._entry_prefix + b"\xff" * 9
            self._reset()
        else:
            new_first = self._first + entryTo
            end = self._entry_key(new_first)
            self.command_bytes -= sum(self._lens[:entryTo])
            del self._terms[:entryTo], self._lens[:entryTo]
            self._first = new_first
            tail = self._tail
            while tail and self._tail_from < new_first:
                self._tail_held -= len(tail.popleft())
                self._tail_from += 1
            self._tail_from = max(self._tail_from, new_first)
            # the new first two entries: from the tail, or still on disk (the range delete is only pending)
            self._head = []
            self._head = [self._entry(new_first + i) for i in range(min(2, len(self._terms)))]
        self._log._delete_range(self._entry_prefix, end)

    def __getitem__(self, item):
        n = len(self._terms)
        if isinstance(item, slice):
            start, stop, step = item.indices(n)
            if step != 1:
                return [self._entry(self._first + i) for i in range(start, stop, step)]
            return self._read(self._first + start, self._first + max(start, stop))
        pos = item + n if item < 0 else item
        if not 0 <= pos < n:
            raise IndexError("journal index out of range")
        return self._entry(self._first + pos)

    def __len__(self) -> int:
        return len(self._terms)

    def _destroy(self) -> None:
        if self._open:
            self._open = False
            self._log._closed_journal(self.group)

    def setRaftCommitIndex(self, raftCommitIndex: int) -> None:  # noqa: N802
        if raftCommitIndex != self._commit:
            self._commit = raftCommitIndex
            self._log._put(self._commit_key, _U64.pack(raftCommitIndex))

    def getRaftCommitIndex(self) -> int:  # noqa: N802
        return self._commit

    def setCurrentTerm(self, term: int, votedForNodeId) -> None:  # noqa: N802
        # Raft §5.1/§5.2: term and vote must be durable before any message
        # that reflects them leaves; the transport holds messages until the
        # flush that covers this write (DurableLog.after_durable).
        if term == self._term and votedForNodeId == self._voted_for:
            return
        if votedForNodeId is not None and not isinstance(votedForNodeId, str):
            raise JournalError(f"node ids must be strings to be stored, not {type(votedForNodeId).__name__}")
        self._term, self._voted_for = term, votedForNodeId
        self._log._put(self._hard_key, codec.dumps([term, votedForNodeId]))

    def getCurrentTerm(self) -> int:  # noqa: N802
        return self._term

    def getVotedForNodeId(self):  # noqa: N802
        return self._voted_for

    def onOneSecondTimer(self) -> None:  # noqa: N802
        pass

    # -- Warren's additions --------------------------------------------------------

    def durable_index(self) -> int:
        """Highest index such that this log's entries up to it are on disk."""
        durable_seq = self._log.durable_seq()
        unsynced = self._unsynced
        while unsynced and unsynced[0][0] <= durable_seq:
            self._durable_idx = unsynced.popleft()[1]
        if self._tail_held > self.tail_bytes:
            self._trim_tail()
        return self._durable_idx

    def first_index(self) -> int:
        """Index of the first entry (0 when the log is empty)."""
        return self._first

    def last_index(self) -> int:
        """Index of the last entry (0 when the log is empty)."""
        return self._next_index() - 1 if self._terms else 0

    def term_at(self, idx: int) -> int:
        """The term of entry `idx`, without reading its command."""
        pos = idx - self._first
        if not self._terms or not 0 <= pos < len(self._terms):
            raise IndexError(f"raft group {self.group!r}: no entry {idx}")
        return self._terms[pos]

    def entries(self, from_idx: int | None, count: int | None = None, max_bytes: int | None = None) -> list[Entry]:
        """pysyncobj's `__getEntries`: the entries from `from_idx` on ([] when
        it is compacted away), at most `count`, and with `max_bytes` only up
        to the first whose commands reach that many bytes. Sized from the
        lengths held in memory, so only what is returned is read."""
        if from_idx is None or not self._terms or from_idx < self._first:
            return []
        start = from_idx - self._first
        stop = len(self._terms) if count is None else min(len(self._terms), start + count)
        if start >= stop:
            return []
        if max_bytes is not None:
            total = 0
            lens = self._lens
            for pos in range(start, stop):
                total += lens[pos]
                if total >= max_bytes:
                    stop = pos + 1
                    break
        return self._read(self._first + start, self._first + stop)

    def span_end(self, from_idx: int, to_idx: int, max_bytes: int) -> int:
        """The last index of from_idx .. to_idx (entries of this log) whose
        commands, counted from `from_idx`, stay within `max_bytes`; at least
        `from_idx`."""
        lens = self._lens
        pos = from_idx - self._first
        end = to_idx - self._first
        total = lens[pos]
        while pos < end:
            total += lens[pos + 1]
            if total > max_bytes:
                break
            pos += 1
        return self._first + pos

    def held_bytes(self) -> int:
        """Command bytes this journal holds in memory (the tail and the first two entries)."""
        return self._tail_held + sum(len(e[0]) for e in self._head)

    def _next_index(self) -> int:
        return self._first + len(self._terms)

    def _reset(self) -> None:
        self._first = self._tail_from = 0
        self._terms = array("Q")
        self._lens = array("I")
        self._head = []
        self._tail = deque()
        self._tail_held = 0
        self.command_bytes = 0

    def _trim_tail(self) -> None:
        """Forget the oldest commands of the tail past `tail_bytes`, only
        durable ones (RocksDB reads them back), never the last two."""
        tail = self._tail
        durable = self._durable_idx
        while self._tail_held > self.tail_bytes and len(tail) > 2 and self._tail_from <= durable:
            self._tail_held -= len(tail.popleft())
            self._tail_from += 1

    def _entry(self, idx: int) -> Entry:
        pos = idx - self._first
        if pos < len(self._head):
            return self._head[pos]
        if idx >= self._tail_from:
            return (self._tail[idx - self._tail_from], idx, self._terms[pos])
        value = self._log._get(self._entry_key(idx))
        if value is None or len(value) < 8:
            raise JournalError(f"raft group {self.group!r}: entry {idx} is missing from the store")
        return (value[8:], idx, self._terms[pos])

    def _read(self, start: int, stop: int) -> list[Entry]:
        """Entries start .. stop - 1 (all in the log): the first two and the
        tail from memory, the rest with one scan of the store."""
        out: list[Entry] = []
        idx = start
        head_end = self._first + len(self._head)
        while idx < stop and idx < head_end:
            out.append(self._head[idx - self._first])
            idx += 1
        disk_end = min(stop, self._tail_from)
        if idx < disk_end:
            terms, first = self._terms, self._first
            want = idx
            for key, value in self._log._items_from(self._entry_key(idx)):
                if want >= disk_end:
                    break
                if key != self._entry_key(want):
                    raise JournalError(f"raft group {self.group!r}: entry {want} is missing from the store")
                out.append((value[8:], want, terms[want - first]))
                want += 1
            if want < disk_end:
                raise JournalError(f"raft group {self.group!r}: entry {want} is missing from the store")
            idx = disk_end
        tail, tail_from, terms, first = self._tail, self._tail_from, self._terms, self._first
        while idx < stop:
            out.append((tail[idx - tail_from], idx, terms[idx - first]))
            idx += 1
        return out

    @property
    def log(self) -> DurableLog:
        return self._log

    def _entry_key(self, idx: int) -> bytes:
        return self._entry_prefix + _U64.pack(idx)
