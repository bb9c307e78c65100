"""One Raft group's log and hard state inside its node's DurableLog (raft/journal.py)."""

from __future__ import annotations

from array import array
from collections import deque
from typing import TYPE_CHECKING

from amqp import codec
from storage.batch import Ticket

from .journal_format import _COMMIT, _ENTRY, _HARD, _U64, JournalError

if TYPE_CHECKING:
    from .journal import DurableLog

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
