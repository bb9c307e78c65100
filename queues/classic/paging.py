"""The ready messages of a classic queue that live on disk only.

A queue keeps the head of its backlog in memory (its window: so many
messages, so many bytes) and the rest in the message store. Behind the
window it holds positions, not bodies: `Positions` is the seq and payload
size of each such message, run-length encoded (a run is consecutive seqs of
one size), so a backlog published in order costs a few bytes per *run*, and
16 bytes per message at worst (every size different). `PagedTail` adds the
reads: as consumers take from the head, the queue loads the next batch of
bodies with one multi-get.

A message paged out before the fsync that covers its write is not readable
from the store yet; `PagedTail` keeps those bodies (`unflushed`, a deque in
seq order with their tickets) until their write is durable, so it holds at
most one group commit's worth of them.

Messages that are not stored for durability (transient messages, or any
message of a transient queue) are written out too when they fall behind the
window, as page copies (persistence.FLAG_PAGE_COPY): the copy is deleted
when its body is read back, and at restart.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections import deque
from collections.abc import Callable, Iterator

from queues.base import QueueMessage
from storage.message_store import Record, StoreFormatError, Ticket

__all__ = ["PagedTail", "Positions"]

_LITTLE = sys.byteorder == "little"
_COMPACT_AFTER = 4096  # consumed runs kept at the front before the arrays are shifted


_SNAPSHOT_VERSION = 2
_SNAPSHOT_HEADER = struct.Struct(">BI")  # version, runs


class Positions:
    """(seq, size) of messages in increasing seq order, run-length encoded.

    Appends go at the end, takes come from the front; `__len__` and `bytes`
    count what is left. Each run also says whether its messages are page
    copies (a run holds one kind), so a snapshot can leave them out.
    """

    __slots__ = ("_first", "_count", "_size", "_copy", "_head", "_taken", "_len", "bytes")

    def __init__(self) -> None:
        self._first = array("q")  # first seq of each run
        self._count = array("I")  # messages in the run
        self._size = array("I")  # payload size of every message of the run
        self._copy = array("B")  # 1: the run's messages are page copies
        self._head = 0  # first run not wholly taken
        self._taken = 0  # messages already taken from run _head
        self._len = 0
        self.bytes = 0

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    @property
    def runs(self) -> int:
        return len(self._first) - self._head

    def first_seq(self) -> int:
        return self._first[self._head] + self._taken

    def end_seq(self) -> int:
        """One past the last seq."""
        last = len(self._first) - 1
        return self._first[last] + self._count[last]

    def append(self, seq: int, size: int, copy: bool = False) -> None:
        first, count, sizes = self._first, self._count, self._size
        last = len(first) - 1
        if (self._len and sizes[last] == size and first[last] + count[last] == seq and count[last] < 0xFFFFFFFF
                and self._copy[last] == copy):  # fmt: skip
            count[last] += 1
        else:
            first.append(seq)
            count.append(1)
            sizes.append(size)
            self._copy.append(copy)
        self._len += 1
        self.bytes += size

    def append_run(self, first: int, count: int, size: int) -> None:
        """`count` messages of `size` bytes from seq `first` on (not page copies)."""
        if (self._len and self._size[-1] == size and self._first[-1] + self._count[-1] == first
                and not self._copy[-1] and self._count[-1] + count <= 0xFFFFFFFF):  # fmt: skip
            self._count[-1] += count
        else:
            self._first.append(first)
            self._count.append(count)
            self._size.append(size)
            self._copy.append(0)
        self._len += count
        self.bytes += count * size

    def take(self, n: int, max_bytes: int) -> list[tuple[int, int]]:
        """Up to `n` (seq, size) pairs from the front, stopping before
        `max_bytes` would be passed (at least one, if any is left)."""
        out: list[tuple[int, int]] = []
        first, count, sizes = self._first, self._count, self._size
        total = 0
        while self._len and len(out) < n:
            head = self._head
            size = sizes[head]
            if out and total + size > max_bytes:
                break
            out.append((first[head] + self._taken, size))
            total += size
            self._len -= 1
            self._taken += 1
            if self._taken == count[head]:
                self._head += 1
                self._taken = 0
        self.bytes -= total
        if self._head >= _COMPACT_AFTER and self._head * 2 >= len(first):
            del first[: self._head], count[: self._head], sizes[: self._head], self._copy[: self._head]
            self._head = 0
        return out

    def iter_runs(self) -> Iterator[tuple[int, int, int, bool]]:
        """(first seq, count, size, page copies) of each run left."""
        taken = self._taken
        for i in range(self._head, len(self._first)):
            yield self._first[i] + taken, self._count[i] - taken, self._size[i], bool(self._copy[i])
            taken = 0

    def clear(self) -> None:
        self._first, self._count, self._size, self._copy = array("q"), array("I"), array("I"), array("B")
        self._head = self._taken = self._len = self.bytes = 0

    def seq_after(self, k: int) -> int:
        """The seq of the message `k` places behind the front (0: the first),
        or end_seq() when fewer than k + 1 are left."""
        if k >= self._len:
            return self.end_seq() if self._len else 0
        k += self._taken
        count = self._count
        for i in range(self._head, len(count)):
            if k < count[i]:
                return self._first[i] + k
            k -= count[i]
        raise AssertionError("positions shorter than their length")

    # The runs as bytes, page copies flagged: what a checkpoint holds
    # (checkpoint.py). Version 1 (clean shutdowns before checkpoints) had no
    # copy flags and left the copies out; it is still read.

    def to_bytes(self) -> bytes:
        h = self._head
        first, count, size, copy = self._first[h:], self._count[h:], self._size[h:], self._copy[h:]
        if self._taken and first:
            first[0] += self._taken
            count[0] -= self._taken
        for a in (first, count, size):
            if _LITTLE:
                a.byteswap()  # stored big-endian, like every integer in the store
        header = _SNAPSHOT_HEADER.pack(_SNAPSHOT_VERSION, len(first))
        return header + first.tobytes() + count.tobytes() + size.tobytes() + copy.tobytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> Positions:
        if len(data) < _SNAPSHOT_HEADER.size:
            raise StoreFormatError("positions snapshot shorter than its header")
        version, runs = _SNAPSHOT_HEADER.unpack_from(data)
        if version not in (1, _SNAPSHOT_VERSION):
            raise StoreFormatError(f"unknown positions snapshot version {version}")
        first, count, size, copy = array("q"), array("I"), array("I"), array("B")
        at = _SNAPSHOT_HEADER.size
        for a in (first, count, size, copy) if version == _SNAPSHOT_VERSION else (first, count, size):
            end = at + runs * a.itemsize
            if end > len(data):
                raise StoreFormatError("positions snapshot truncated")
            a.frombytes(data[at:end])
            if _LITTLE and a.itemsize > 1:
                a.byteswap()
            at = end
        if version == 1:
            copy.frombytes(bytes(runs))
        p = cls()
        p._first, p._count, p._size, p._copy = first, count, size, copy
        p._len = sum(count)
        p.bytes = sum(c * s for c, s in zip(count, size, strict=True))
        return p


class PagedTail:
    """A queue's messages behind its window: positions, reads, and the bodies
    whose write is not yet durable.

    `persistence` is the queue's (persistence.Persistence); `load(seq,
    record)` turns a record read back into the queue's message (the queue
    knows whether it was recovered, and deletes page copies).
    """

    __slots__ = ("positions", "unflushed", "unflushed_bytes", "before_take", "_persistence", "_key", "_load")

    def __init__(self, persistence: object, key: str, load: Callable[[int, Record], QueueMessage]) -> None:
        self.positions = Positions()
        self.unflushed: deque[tuple[Ticket, QueueMessage, bool]] = deque()  # (ticket, msg, page copy)
        self.unflushed_bytes = 0
        # called with n before up to n messages are taken (the queue's checkpoints, checkpoint.py)
        self.before_take: Callable[[int], None] | None = None
        self._persistence = persistence
        self._key = key
        self._load = load

    def __len__(self) -> int:
        return len(self.positions)

    def __bool__(self) -> bool:
        return bool(self.positions)

    @property
    def runs(self) -> int:
        """Runs of consecutive positions: what the positions cost in memory."""
        return self.positions.runs

    @property
    def bytes(self) -> int:
        return self.positions.bytes

    def add(self, msg: QueueMessage, ticket: Ticket, copy: bool) -> None:
        """`msg` (newer than every message here) now lives on disk; `ticket`
        is its write, `copy` whether that write is a page copy."""
        self.positions.append(msg.seq, msg.size, copy)
        self.prune()
        if ticket > self._persistence.durable_seq():
            self.unflushed.append((ticket, msg, copy))
            self.unflushed_bytes += msg.size

    def add_position(self, seq: int, size: int) -> None:
        """A stored message known by its index entry only (recovery)."""
        self.positions.append(seq, size)

    def prune(self) -> None:
        """Forgets the kept bodies whose write has become durable."""
        unflushed = self.unflushed
        if unflushed:
            durable = self._persistence.durable_seq()
            while unflushed and unflushed[0][0] <= durable:
                self.unflushed_bytes -= unflushed.popleft()[1].size

    def take(self, n: int, max_bytes: int) -> list[QueueMessage]:
        """The next messages (up to `n`, about `max_bytes`), bodies read back."""
        if self.before_take is not None:
            self.before_take(n)
        wanted = self.positions.take(n, max_bytes)
        out: list[QueueMessage | None] = []
        missing: list[int] = []
        unflushed = self.unflushed
        persistence, key = self._persistence, self._key
        for seq, _ in wanted:
            if unflushed and unflushed[0][1].seq == seq:
                _, msg, copy = unflushed.popleft()
                self.unflushed_bytes -= msg.size
                if copy:
                    persistence.remove(key, seq)  # the body is back in memory
                out.append(msg)
            else:
                missing.append(len(out))
                out.append(None)
        if missing:
            records = persistence.read(key, [wanted[i][0] for i in missing])
            load = self._load
            for i, record in zip(missing, records, strict=True):
                seq = wanted[i][0]
                if record is None:
                    raise StoreFormatError(f"queue {key!r}: message {seq} is indexed but its record is missing")
                out[i] = load(seq, record)
        return out  # type: ignore[return-value]

    def drop(self) -> None:
        """Deletes every message here from the store (purge)."""
        positions = self.positions
        if positions:
            self._persistence.remove_range(self._key, positions.first_seq(), positions.end_seq())
        self.forget()

    def forget(self) -> None:
        """Lets go of everything here without touching the store (queue deleted)."""
        self.positions.clear()
        self.unflushed.clear()
        self.unflushed_bytes = 0
