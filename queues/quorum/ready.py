"""The ready messages of a quorum queue, in columns: the deep part of the state.

A message that was never handed out is fully described by its id, its size
and its expiry (delivery count 0, never acquired, no annotations), and the
ids of one Enqueue batch are consecutive (raft index << POS_BITS | position).
So instead of a tuple per message (~128 B with its ints) the list keeps

    runs   first id u64 | message count u32 | expiry i64 (-1: none)
           one per stretch of consecutive ids with the same expiry: one per
           Enqueue batch in the common case (a batch shares `now`, so its
           x-message-ttl expiry too)
    sizes  u32 per message

in `array`s: ~4 B per message plus 20 B per run. The head is taken by
advancing offsets, and the consumed prefix is cut off once it is the larger
half (amortised O(1) per message).

Runs are kept maximal (a run that continues the last one, same expiry, is
merged into it), so the runs are a function of the messages alone: equal
lists have equal runs, whatever their history, and snapshots of equal states
are equal bytes (snapshot.py writes the runs).

Messages come out as the state's message tuple, `(id, size, expiry, 0, 0,
None)` (state.M_*), or a stretch of the head run at a time (`peek`, then
`drop`) on the dispatch path.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator

__all__ = ["NO_EXPIRY", "ReadyList"]

NO_EXPIRY = -1  # the expiry column's "no TTL"
_CUT = 4096  # consumed runs / sizes kept before the prefix is cut off (and only when it is the larger half)


class ReadyList:
    """FIFO of ready messages in id order (see the module docstring)."""

    __slots__ = ("_first", "_count", "_expiry", "_sizes", "_run", "_off", "_pos", "_len")

    def __init__(self) -> None:
        self._first = array("Q")  # first id of each run
        self._count = array("I")  # messages in each run (the head run's count includes those taken)
        self._expiry = array("q")  # expiry of each run, NO_EXPIRY for none
        self._sizes = array("I")  # body size of each message
        self._run = 0  # the head run
        self._off = 0  # messages already taken from the head run
        self._pos = 0  # the head message in _sizes
        self._len = 0

    # -- adding at the tail

    def add_run(self, first: int, sizes: list[int] | array, expiry: int | None) -> None:
        """Messages `first`, `first + 1`, ... with these sizes and one expiry."""
        n = len(sizes)
        if not n:
            return
        e = NO_EXPIRY if expiry is None else expiry
        if self._len and self._expiry[-1] == e and self._first[-1] + self._count[-1] == first:
            self._count[-1] += n
        else:
            self._first.append(first)
            self._count.append(n)
            self._expiry.append(e)
        self._sizes.extend(sizes)
        self._len += n

    def append(self, mid: int, size: int, expiry: int | None) -> None:
        self.add_run(mid, (size,), expiry)

    def extend(self, msgs: Iterable[tuple]) -> None:
        """Message tuples in id order, each never handed out."""
        for m in msgs:
            self.add_run(m[0], (m[1],), m[2])

    # -- the head

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    def head(self) -> tuple | None:
        """The head message's tuple, or None."""
        if not self._len:
            return None
        r = self._run
        e = self._expiry[r]
        return (self._first[r] + self._off, self._sizes[self._pos], None if e == NO_EXPIRY else e, 0, 0, None)

    def head_expiry(self) -> int | None:
        if not self._len:
            return None
        e = self._expiry[self._run]
        return None if e == NO_EXPIRY else e

    def popleft(self) -> tuple:
        """Takes the head message (IndexError when empty)."""
        if not self._len:
            raise IndexError("pop from an empty ReadyList")
        r = self._run
        off = self._off
        e = self._expiry[r]
        msg = (self._first[r] + off, self._sizes[self._pos], None if e == NO_EXPIRY else e, 0, 0, None)
        self._len -= 1
        if not self._len:
            self.clear()
        elif off + 1 < self._count[r] and self._pos < _CUT:  # the common case, nothing to cut
            self._off = off + 1
            self._pos += 1
        else:
            self._len += 1
            self._advance(1)
        return msg

    def peek(self, limit: int, below: int) -> tuple[int, int, int | None, array]:
        """The head stretch, left in place: up to `limit` (>= 1) messages of
        the head run, only ids below `below` or, when the head id is not
        below it, only ids from `below` on: (first id, count, expiry, sizes).
        The list must not be empty; `drop` takes them."""
        r = self._run
        off = self._off
        first = self._first[r] + off
        n = self._count[r] - off
        if n > limit:
            n = limit
        if first < below < first + n:
            n = below - first
        e = self._expiry[r]
        pos = self._pos
        return first, n, None if e == NO_EXPIRY else e, self._sizes[pos : pos + n]

    def drop(self, n: int) -> None:
        """Takes `n` messages, no more than the head run holds."""
        self._advance(n)

    def _advance(self, n: int) -> None:
        """Drops `n` messages, all from the head run."""
        self._len -= n
        if not self._len:
            self.clear()
            return
        self._pos += n
        self._off += n
        if self._off == self._count[self._run]:
            self._run += 1
            self._off = 0
            if self._run > _CUT and self._run * 2 > len(self._first):
                r = self._run
                del self._first[:r], self._count[:r], self._expiry[:r]
                self._run = 0
        if self._pos > _CUT and self._pos * 2 > len(self._sizes):
            del self._sizes[: self._pos]
            self._pos = 0

    def clear(self) -> None:
        self._first = array("Q")
        self._count = array("I")
        self._expiry = array("q")
        self._sizes = array("I")
        self._run = self._off = self._pos = self._len = 0

    # -- reading it all (snapshots, purge, tests)

    def runs(self) -> Iterator[tuple[int, int, int]]:
        """(first id, count, expiry or NO_EXPIRY) of each live run, head first."""
        first, count, expiry = self._first, self._count, self._expiry
        for r in range(self._run, len(first)):
            off = self._off if r == self._run else 0
            yield first[r] + off, count[r] - off, expiry[r]

    def sizes(self) -> array:
        """The sizes of the live messages, head first (a copy)."""
        return self._sizes[self._pos :]

    def __iter__(self) -> Iterator[tuple]:
        sizes = iter(self.sizes())
        for first, n, e in self.runs():
            exp = None if e == NO_EXPIRY else e
            for mid in range(first, first + n):
                yield (mid, next(sizes), exp, 0, 0, None)

    def __getitem__(self, i: int) -> tuple:
        """The i-th message's tuple (O(runs); tests and tools)."""
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError("ReadyList index out of range")
        size = self._sizes[self._pos + i]
        for first, n, e in self.runs():
            if i < n:
                return (first + i, size, None if e == NO_EXPIRY else e, 0, 0, None)
            i -= n
        raise AssertionError("runs and sizes disagree")  # pragma: no cover

    def key(self) -> tuple:
        """Equal for equal contents (runs are maximal, so this is canonical)."""
        return (tuple(self.runs()), self.sizes().tobytes())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ReadyList) and self.key() == other.key()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def memory_slots(self) -> tuple[int, int]:
        """(runs, sizes) entries held, consumed prefix included: what the arrays cost."""
        return len(self._first), len(self._sizes)

    def __repr__(self) -> str:
        return f"ReadyList({self._len} messages in {len(self._first) - self._run} runs)"

    # -- restore

    @classmethod
    def from_columns(cls, firsts: array, counts: array, expiries: array, sizes: array) -> ReadyList:
        """The list snapshot.py wrote (runs already maximal; checked by the caller)."""
        out = cls()
        out._first, out._count, out._expiry, out._sizes = firsts, counts, expiries, sizes
        out._len = len(sizes)
        return out
