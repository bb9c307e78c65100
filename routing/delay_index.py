"""The delayed messages one scheduler holds, ordered by due time: a pure state
machine (no I/O, no clock: time comes in commands), in the style of the quorum
queues' machine, that node/vhosts/delayed_messages.py drives.

Each message is known by a reference (`ref`: the quorum queue's message id under
which its body stays stored and replicated) and its due time (ms). Bodies are never
here: an entry is one integer, the due time and the reference packed together
(due << 65 | ref), in a heap, so that a window of pending delays costs megabytes, not
their bodies, and the earliest due is found in O(1) and taken in
O(log n).

- Delay(ref, due): a message to hold until `due`.
- Take(now, limit): the messages due by `now` (at most `limit`, earliest first) leave
  the index; `apply` returns their refs, for the host to route.
- Keep(count): only the `count` earliest stay; `apply` returns the refs of the others
  (the host gives them back to the queue: its window of held messages is full), and
  `last_due()` is then the due time of the latest kept, the scheduler's horizon.

A ref is at most 65 bits: the scheduler tags the quorum queue's 64-bit message id
with the queue it came from (node/vhosts/delayed_messages.py).

A scheduler whose consumer loses its messages (timed out, detached) is dropped
whole with its index: no entry is ever removed but by Take.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

__all__ = ["Delay", "DelayIndex", "Keep", "Take", "entry"]

_REF_BITS = 65
_REF_MASK = (1 << _REF_BITS) - 1


def entry(ref: int, due: int) -> int:
    """An entry's integer: ordered by due time, then by ref (so ties have an order too)."""
    return due << _REF_BITS | ref


@dataclass(frozen=True, slots=True)
class Delay:
    ref: int
    due: int


@dataclass(frozen=True, slots=True)
class Take:
    now: int
    limit: int


@dataclass(frozen=True, slots=True)
class Keep:
    count: int


Command = Delay | Take | Keep


class DelayIndex:
    def __init__(self) -> None:
        self._heap: list[int] = []  # due << 65 | ref

    def __len__(self) -> int:
        return len(self._heap)

    def next_due(self) -> int | None:
        """When the earliest held message is due, or None."""
        return self._heap[0] >> _REF_BITS if self._heap else None

    def last_due(self) -> int | None:
        """When the latest held message is due (O(n): after a Keep, not per message), or None."""
        last = self.last_entry()
        return None if last is None else last >> _REF_BITS

    def last_entry(self) -> int | None:
        """The latest entry (`entry(ref, due)`), O(n), or None: after a Keep, what is past it
        was given back, even a message due at the same ms as the last kept."""
        return max(self._heap) if self._heap else None

    def entries(self) -> list[tuple[int, int]]:
        """(due, ref) of every held message, earliest first (tests, diagnostics)."""
        return sorted((e >> _REF_BITS, e & _REF_MASK) for e in self._heap)

    def apply(self, command: Command) -> tuple[int, ...]:
        if isinstance(command, Delay):
            if not 0 <= command.ref <= _REF_MASK or command.due < 0:
                raise ValueError(f"a delay needs a ref of at most {_REF_BITS} bits and a due time >= 0: {command!r}")
            heapq.heappush(self._heap, entry(command.ref, command.due))
            return ()
        if isinstance(command, Take):
            taken = []
            bound = (command.now + 1) << _REF_BITS  # every entry due by `now` is below it
            heap = self._heap
            while heap and heap[0] < bound and len(taken) < command.limit:
                taken.append(heapq.heappop(heap) & _REF_MASK)
            return tuple(taken)
        if isinstance(command, Keep):
            if command.count < 0:
                raise ValueError(f"keep needs a count >= 0: {command!r}")
            if len(self._heap) <= command.count:
                return ()
            ordered = sorted(self._heap)  # O(n log n), once per window filled (n is the window)
            self._heap = ordered[: command.count]  # a sorted list is a heap
            return tuple(e & _REF_MASK for e in ordered[command.count :])
        raise TypeError(f"not a delay index command: {command!r}")
