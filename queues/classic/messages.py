"""The messages a classic queue holds ready for delivery, in seq order.

    returned  heap of (seq, msg): messages that went back to the queue
              (released, modified, their consumer detached)
    ready     deque of messages in seq order, never yet taken from the queue

Every message taken from the queue is its head (the smallest seq), so each
returned seq is below every seq still in `ready`: the head is `returned[0]`
if there is one, else `ready[0]`. Requeues are O(log n), the rest O(1).
`bytes` is the payload size of them all (x-max-length-bytes counts it).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator

from queues.base import QueueMessage

__all__ = ["ReadyMessages"]


class ReadyMessages:
    __slots__ = ("ready", "returned", "bytes")

    def __init__(self) -> None:
        self.ready: deque[QueueMessage] = deque()
        self.returned: list[tuple[int, QueueMessage]] = []
        self.bytes = 0

    def __len__(self) -> int:
        return len(self.ready) + len(self.returned)

    def __bool__(self) -> bool:
        return bool(self.returned or self.ready)

    def __iter__(self) -> Iterator[QueueMessage]:
        """Every message, returned ones first (not in seq order among them)."""
        for _, msg in self.returned:
            yield msg
        yield from self.ready

    def head(self) -> QueueMessage | None:
        if self.returned:
            return self.returned[0][1]
        return self.ready[0] if self.ready else None

    def pop_head(self) -> QueueMessage:
        msg = heapq.heappop(self.returned)[1] if self.returned else self.ready.popleft()
        self.bytes -= msg.size
        return msg

    def append(self, msg: QueueMessage) -> None:
        """A message newer than every other."""
        self.ready.append(msg)
        self.bytes += msg.size

    def requeue(self, msg: QueueMessage) -> None:
        """Back to its place (by seq)."""
        heapq.heappush(self.returned, (msg.seq, msg))
        self.bytes += msg.size

    def clear(self) -> None:
        self.returned.clear()
        self.ready.clear()
        self.bytes = 0
