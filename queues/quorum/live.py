"""How many live messages each raft index still has: the release cursor's source.

A message is live while it is ready, checked out or in dead-letter holding;
the log (and the bodies) below the smallest raft index with a live message
can be compacted (queries.release_cursor). Indexes arrive in increasing
order (one per Enqueue) and leave in any order, mostly near the head.

Two columns, raft index u64 and count u32, sorted by index, with a head
offset past the leading zeros: 12 B per index (a dict of ints cost ~100 B,
as much as the message itself when a publisher sends one message per
entry). An index whose count falls to zero stays as a zero until the head
passes it or zeros are the larger half, when the columns are rewritten
without them (amortised O(1)). Lookups bisect, after a check of the
position found last (settlements come in runs of one index).

Equality and snapshots see only the (index, count) pairs with count > 0.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator

__all__ = ["LiveIndexes"]

_CUT = 1024  # leading zeros kept before they are cut off (and only when they are the larger half)
_ZEROS = 64  # zeros behind the head kept before the columns are rewritten (and only past half)


class LiveIndexes:
    __slots__ = ("_idx", "_cnt", "_head", "_zeros", "_last")

    def __init__(self) -> None:
        self._idx = array("Q")
        self._cnt = array("I")
        self._head = 0  # first position with a non-zero count (== len when none)
        self._zeros = 0  # zero counts at positions >= _head
        self._last = 0  # the position found by the last lookup

    def add(self, index: int, n: int) -> None:
        """`n` (> 0) messages enqueued by `index`, above every index added before."""
        if self._idx and index <= self._idx[-1]:
            raise ValueError(f"raft index {index} is not after {self._idx[-1]}")
        self._idx.append(index)
        self._cnt.append(n)

    def release(self, index: int, n: int = 1) -> None:
        """`n` messages of `index` left the queue for good."""
        idx, cnt = self._idx, self._cnt
        p = self._last
        if p >= len(idx) or idx[p] != index:
            p = bisect_left(idx, index, self._head)
            if p == len(idx) or idx[p] != index:
                raise KeyError(index)
            self._last = p
        left = cnt[p] - n
        if left < 0:
            raise ValueError(f"raft index {index} has {cnt[p]} live messages, not {n}")
        cnt[p] = left
        if left:
            return
        if p != self._head:
            self._zeros += 1
            if self._zeros > _ZEROS and self._zeros * 2 > len(idx) - self._head:
                self._rewrite()
            return
        h = p + 1
        end = len(idx)
        while h < end and not cnt[h]:
            h += 1
            self._zeros -= 1
        self._head = h
        if h == end:
            self._idx, self._cnt = array("Q"), array("I")
            self._head = self._zeros = self._last = 0
        elif h > _CUT and h * 2 > end:
            del idx[:h], cnt[:h]
            self._last = max(0, self._last - h)
            self._head = 0

    def _rewrite(self) -> None:
        pairs = list(self.items())
        self._idx = array("Q", (i for i, _ in pairs))
        self._cnt = array("I", (n for _, n in pairs))
        self._head = self._zeros = self._last = 0

    def first(self) -> int | None:
        """The smallest index with a live message, or None."""
        return self._idx[self._head] if self._head < len(self._idx) else None

    def __len__(self) -> int:
        """Indexes with live messages."""
        return len(self._idx) - self._head - self._zeros

    def __bool__(self) -> bool:
        return self._head < len(self._idx)

    def items(self) -> Iterator[tuple[int, int]]:
        """(index, live count) with count > 0, by index."""
        cnt = self._cnt
        idx = self._idx
        for p in range(self._head, len(idx)):
            if cnt[p]:
                yield idx[p], cnt[p]

    def get(self, index: int, default: int = 0) -> int:
        p = bisect_left(self._idx, index, self._head)
        if p < len(self._idx) and self._idx[p] == index:
            return self._cnt[p] or default
        return default

    def __contains__(self, index: int) -> bool:
        return self.get(index) > 0

    def slots(self) -> int:
        """Entries the columns hold, zeros included: what they cost."""
        return len(self._idx)

    def key(self) -> list[tuple[int, int]]:
        return list(self.items())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LiveIndexes) and self.key() == other.key()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"LiveIndexes({len(self)} indexes, first {self.first()})"

    @classmethod
    def from_pairs(cls, indexes: Iterable[int], counts: Iterable[int]) -> LiveIndexes:
        """Restore: indexes strictly increasing, counts > 0 (checked)."""
        out = cls()
        out._idx = array("Q", indexes)
        out._cnt = array("I", counts)
        if len(out._idx) != len(out._cnt):
            raise ValueError("live index columns differ in length")
        if 0 in out._cnt:
            raise ValueError("a live index with no live message")
        if any(a >= b for a, b in zip(out._idx, out._idx[1:], strict=False)):
            raise ValueError("live indexes out of order")
        return out
