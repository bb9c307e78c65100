"""A session's unsettled deliveries, by delivery id, with range look-ups in
O(log n + k) for the k deliveries a DISPOSITION range names.

A peer may send DISPOSITION frames whose ranges span far more ids than it
has unsettled (or none of them); scanning the whole map per range let 500
frames over 100k unsettled deliveries freeze the node for seconds.

Delivery ids wrap at 2^32 (RFC 1982, amqp/serial.py). Each id gets a linear
key, its serial distance from the last id inserted plus that id's key, so
keys keep their order across the wrap; the keys live in a list of short
sorted blocks (insertion at the end, deletion anywhere, both cheap).
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
        # free of method calls in the usual case (the next id, room in the last block)
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
        self._remove(self._keys.pop(delivery_id))

    def pop(self, delivery_id: int, *default: Any) -> Any:
        value = dict.pop(self, delivery_id, _MISSING)  # one look-up: a settle per message comes here
        if value is not _MISSING:
            self._remove(self._keys.pop(delivery_id))
            return value
        if default:
            return default[0]
        raise KeyError(delivery_id)

    def clear(self) -> None:
        super().clear()
        self._keys.clear()
        self._blocks, self._maxes = [], []

    def _unsupported(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("UnsettledMap changes only by item")

    update = setdefault = popitem = __ior__ = _unsupported  # type: ignore[assignment]

    def in_range(self, first: int, last: int) -> Iterator[tuple[int, Any]]:
        """(id, delivery) for the ids in [first, last] (serial order, at most
        2^31 apart), in ascending serial order. Do not change the map while
        iterating."""
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
