"""The messages a classic queue holds ready for delivery, in seq order.

    returned  heap of (seq, msg): messages that went back to the queue
              (released, modified, their consumer detached)
    ready     deque of messages in seq order, never yet taken from the queue,
              in memory: the queue's window
    tail      paging.PagedTail: the ready messages behind the window, on disk,
              every seq above those in `ready`

Every message taken from the queue is its head (the smallest seq), so each
returned seq is below every seq still in `ready` or `tail`: the head is
`returned[0]` if there is one, else `ready[0]`, loading the next batch from
`tail` when `ready` is empty. A new message goes to `ready` while the window
has room and nothing is paged (order is kept: once one message is on disk,
the ones after it follow it there until the tail is read back). Requeues
are O(log n), the rest O(1) amortised.

`bytes` is the payload size of them all (x-max-length-bytes counts it);
`held_bytes` the part in memory (returned + ready), the queue's own memory
accounting beside the tail's not-yet-durable bodies.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator

from queues.base import QueueMessage
from storage.message_store import Ticket

from .paging import PagedTail

__all__ = ["READ_BATCH", "ReadyMessages"]

READ_BATCH = 256  # bodies read back per multi-get: bounded, since a read holds the GIL


class ReadyMessages:
    __slots__ = ("ready", "returned", "tail", "bytes", "held_bytes", "window", "window_bytes", "_page_out")

    def __init__(self, tail: PagedTail, window: int | None = None, window_bytes: int | None = None,
                 page_out: object = None) -> None:  # fmt: skip
        """`window`/`window_bytes`: the most messages/payload bytes kept in
        `ready` (None: no limit). `page_out(msg) -> Ticket` writes a page copy
        of a message that is not stored."""
        self.ready: deque[QueueMessage] = deque()
        self.returned: list[tuple[int, QueueMessage]] = []
        self.tail = tail
        self.bytes = 0
        self.held_bytes = 0
        self.window = window
        self.window_bytes = window_bytes
        self._page_out = page_out

    def __len__(self) -> int:
        return len(self.ready) + len(self.returned) + len(self.tail)

    def __bool__(self) -> bool:
        return bool(self.returned or self.ready or self.tail)

    def in_memory(self) -> Iterator[QueueMessage]:
        """Every message held in memory, returned ones first (not in seq order among them)."""
        for _, msg in self.returned:
            yield msg
        yield from self.ready

    def head(self) -> QueueMessage | None:
        if self.returned:
            return self.returned[0][1]
        if not self.ready and self.tail:
            self._read_ahead()
        return self.ready[0] if self.ready else None

    def pop_head(self) -> QueueMessage:
        if self.returned:
            msg = heapq.heappop(self.returned)[1]
        else:
            if not self.ready:
                self._read_ahead()
            msg = self.ready.popleft()
        self.bytes -= msg.size
        self.held_bytes -= msg.size
        return msg

    def append(self, msg: QueueMessage, ticket: Ticket = 0, stored: bool = False) -> None:
        """A message newer than every other; `stored`: its durable write is
        `ticket` (else it is written out only if it is paged)."""
        size = msg.size
        self.bytes += size
        if self.tail or self._window_full(size):
            if not stored:
                ticket = self._page_out(msg)  # type: ignore[operator]
            self.tail.add(msg, ticket, not stored)
        else:
            self.ready.append(msg)
            self.held_bytes += size

    def requeue(self, msg: QueueMessage) -> None:
        """Back to its place (by seq)."""
        heapq.heappush(self.returned, (msg.seq, msg))
        self.bytes += msg.size
        self.held_bytes += msg.size

    def clear(self) -> None:
        """Forgets every message (the caller deletes what the store holds)."""
        self.returned.clear()
        self.ready.clear()
        self.tail.forget()
        self.bytes = 0
        self.held_bytes = 0

    def _window_full(self, size: int) -> bool:
        return (self.window is not None and len(self.ready) >= self.window) or (
            self.window_bytes is not None and self.held_bytes + size > self.window_bytes
        )

    def _read_ahead(self) -> None:
        """`ready` is empty: the next batch from the tail, within the window."""
        window, window_bytes = self.window, self.window_bytes
        n = READ_BATCH if window is None else max(1, min(READ_BATCH, window))
        max_bytes = (1 << 62) if window_bytes is None else window_bytes - self.held_bytes
        for msg in self.tail.take(n, max_bytes):
            self.ready.append(msg)
            self.held_bytes += msg.size
