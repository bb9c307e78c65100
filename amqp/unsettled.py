"""A session's unsettled deliveries, by delivery id, with range look-ups in
O(log n + k) for the k deliveries a DISPOSITION range names.

A peer may send DISPOSITION frames whose ranges span far more ids than it
has unsettled (or none of them); scanning the whole map per range let 500
frames over 100k unsettled deliveries freeze the node for seconds.

Delivery ids wrap at 2^32 (RFC 1982, amqp/serial.py). Each id gets a linear
key, its serial distance from the last id inserted plus that id's key, so
keys keep their order across the wrap; the keys live in a list of short
sorted blocks (insertion at the end, deletion anywhere, both cheap).

Usually the ids held are one run, `first` .. `first + count - 1`: a session
numbers its deliveries in order, and a publisher's are settled in order.
While they are, the map keeps just the run (no keys, no blocks: a publisher's
every message is added and removed here), and a range is the run's overlap.
The first id added out of order, or removed from inside the run, spreads the
run into keys and blocks (once: O(run)); the map keeps them until it is
empty again.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator
from typing import Any

from . import serial

_MISSING: Any = object()
BLOCK = 512  # keys per block; a block is split at twice this


class UnsettledMap(dict):
    """A dict of delivery id -> delivery that also answers `in_range`."""

    def __init__(self) -> None:
        super().__init__()
        self._spread = False  # False: the ids are the run below; True: keys and blocks
        self._first = 0  # the run: its first id and its length
        self._count = 0
        self._blocks: list[list[int]] = []  # sorted keys, cut into blocks
        self._maxes: list[int] = []  # the last key of each block
        self._anchor = (0, 0)  # (delivery id, key) of the last insertion
        # Every key is congruent to its id plus one constant (mod 2^32), so a
        # key gives back its id. The key of an id is kept, not recomputed: a
        # peer may jump its ids around, moving the anchor far from old entries.
        self._keys: dict[int, int] = {}

    def _linear(self, delivery_id: int) -> int:
        anchor_id, anchor_key = self._anchor
        return anchor_key + serial.diff(delivery_id, anchor_id)

    def __setitem__(self, delivery_id: int, delivery: Any) -> None:
        # a publisher's every message comes here and goes through pop(): both stay
        # free of method calls in the usual case (the next id)
        if not self._spread:
            count = self._count
            if delivery_id == (self._first + count) & serial.MASK or not count:
                if not count:
                    self._first = delivery_id
                self._count = count + 1
                dict.__setitem__(self, delivery_id, delivery)
                return
            if delivery_id in self:
                dict.__setitem__(self, delivery_id, delivery)
                return
            self._spread_out()
        if delivery_id not in self:
            anchor_id, anchor_key = self._anchor
            step = (delivery_id - anchor_id) & serial.MASK
            key = anchor_key + (step - serial.MOD if step > serial.HALF else step)  # _linear, inlined
            self._anchor = (delivery_id, key)
            self._keys[delivery_id] = key
            maxes = self._maxes
            if maxes and key > maxes[-1] and len(last := self._blocks[-1]) < 2 * BLOCK:
                last.append(key)
                maxes[-1] = key
            else:
                self._insert(key)
        dict.__setitem__(self, delivery_id, delivery)

    def __delitem__(self, delivery_id: int) -> None:
        dict.__delitem__(self, delivery_id)
        self._removed(delivery_id)

    def pop(self, delivery_id: int, *default: Any) -> Any:
        value = dict.pop(self, delivery_id, _MISSING)  # one look-up: a settle per message comes here
        if value is not _MISSING:
            if not self._spread and delivery_id == self._first:  # the usual case: the oldest
                self._first = (delivery_id + 1) & serial.MASK
                self._count -= 1
                return value
            self._removed(delivery_id)
            return value
        if default:
            return default[0]
        raise KeyError(delivery_id)

    def _removed(self, delivery_id: int) -> None:
        """`delivery_id` has just left the dict."""
        if not self._spread:
            count = self._count - 1
            if delivery_id == self._first:
                self._first = (delivery_id + 1) & serial.MASK
            elif delivery_id != (self._first + count) & serial.MASK:  # from inside the run
                self._spread_out()  # keys for the whole run, this id's among them
                self._removed(delivery_id)
                return
            self._count = count
            return
        self._remove(self._keys.pop(delivery_id))
        if not self._keys:  # empty: a run again
            self._spread, self._count, self._blocks, self._maxes = False, 0, [], []

    def _spread_out(self) -> None:
        """The run becomes keys 0 .. count - 1 in blocks."""
        first, count = self._first, self._count
        keys = list(range(count))
        self._keys = {(first + k) & serial.MASK: k for k in keys}
        self._blocks = [keys[i : i + BLOCK] for i in range(0, count, BLOCK)]
        self._maxes = [block[-1] for block in self._blocks]
        self._anchor = ((first + count - 1) & serial.MASK, count - 1) if count else (0, 0)
        self._spread = True

    def clear(self) -> None:
        super().clear()
        self._keys.clear()
        self._blocks, self._maxes = [], []
        self._spread, self._count = False, 0

    def _unsupported(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("UnsettledMap changes only by item")

    update = setdefault = popitem = __ior__ = _unsupported  # type: ignore[assignment]

    def in_range(self, first: int, last: int) -> Iterator[tuple[int, Any]]:
        """(id, delivery) for the ids in [first, last] (serial order, at most
        2^31 apart), in ascending serial order. Do not change the map while
        iterating."""
        if not self._spread:
            yield from self._run_in_range(first, last)
            return
        if not self._maxes:
            return
        low = self._linear(first)
        high = low + ((last - first) & serial.MASK)
        anchor_id, anchor_key = self._anchor
        b = bisect_left(self._maxes, low)
        blocks = self._blocks
        while b < len(blocks):
            block = blocks[b]
            i = bisect_left(block, low) if block[0] < low else 0
            for key in block[i:] if block[-1] <= high else block[i : bisect_right(block, high)]:
                delivery_id = (anchor_id + key - anchor_key) & serial.MASK
                yield delivery_id, dict.__getitem__(self, delivery_id)
            if block[-1] > high:
                return
            b += 1

    def dispose(self, first: int, last: int, state: Any, settled: bool) -> list:
        """A DISPOSITION's range: sets `state` on the deliveries in [first,
        last] and, if `settled`, marks them settled by the peer and removes
        them. Returns them, in serial order."""
        changed = []
        for delivery_id, delivery in list(self.in_range(first, last)):  # O(log n + hits), however wide the range
            delivery.state = state
            if settled:
                delivery.remote_settled = True
                del self[delivery_id]
            changed.append(delivery)
        return changed

    def _run_in_range(self, first: int, last: int) -> Iterator[tuple[int, Any]]:
        """in_range over the run: offsets from the run's first id."""
        count, start = self._count, self._first
        low = (first - start) & serial.MASK
        span = (last - first) & serial.MASK
        if low < count:
            high = min(count - 1, low + span)
        elif low + span >= serial.MOD:  # the range starts before the run and reaches into it
            low, high = 0, min(count - 1, low + span - serial.MOD)
        else:
            return
        for offset in range(low, high + 1):
            delivery_id = (start + offset) & serial.MASK
            yield delivery_id, dict.__getitem__(self, delivery_id)

    # -- the blocks ---------------------------------------------------------------

    def _insert(self, key: int) -> None:
        blocks, maxes = self._blocks, self._maxes
        if not blocks:
            blocks.append([key])
            maxes.append(key)
            return
        if key > maxes[-1]:  # the usual case: ids are given in order
            b = len(blocks) - 1
            blocks[b].append(key)
            maxes[b] = key
        else:
            b = min(bisect_left(maxes, key), len(blocks) - 1)
            insort(blocks[b], key)
            maxes[b] = blocks[b][-1]
        if len(blocks[b]) > 2 * BLOCK:
            block = blocks[b]
            blocks[b : b + 1] = [block[:BLOCK], block[BLOCK:]]
            maxes[b : b + 1] = [block[BLOCK - 1], block[-1]]

    def _remove(self, key: int) -> None:
        blocks, maxes = self._blocks, self._maxes
        block = blocks[0]
        if block[0] == key:  # the usual case: settled in the order they came
            del block[0]
            if not block:
                del blocks[0]
                del maxes[0]
            return  # the block's last key, its max, stays
        b = bisect_left(maxes, key)
        block = blocks[b]
        del block[bisect_left(block, key)]
        if not block:
            del blocks[b]
            del maxes[b]
        else:
            maxes[b] = block[-1]
