"""The ready messages of a classic priority queue (x-max-priority).

One `ReadyMessages` per priority level in use (its returned heap, ready deque
and paged tail: messages.py, paging.py), so the order within a level is the
queue's usual FIFO by seq, and the head is the head of the highest level
holding a message. Levels are made on first use: a queue declared with 255
priorities that sees three of them holds three.

The memory window is the queue's, shared by its levels: a level pages out
when the messages all levels hold in memory fill it, and reads back within
what the others leave. So a message of a high priority that arrives behind
a window full of low ones is paged out and read back at once when it
becomes the head: correct, at the cost of one write and one read.

Every level writes under the queue's one store key with the queue's seqs,
so a level's paged positions are not one contiguous range of seqs: removal
goes run by run (`PriorityTails.drop`), never by the level's first..last.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from queues.base import QueueMessage
from queues.priority import header_priority
from storage.message_store import Ticket

from .messages import READ_BATCH, ReadyMessages
from .paging import PagedTail

__all__ = ["PriorityMessages", "PriorityTails", "message_level"]


def message_level(msg: QueueMessage, max_priority: int) -> int:
    """RabbitMQ's rule: the header priority, 0 when absent, `max_priority` when above it."""
    p = header_priority(msg.payload)
    if p is None:
        return 0
    return p if p < max_priority else max_priority


class _Level(ReadyMessages):
    """One priority's messages; its window is what the queue's others leave."""

    __slots__ = ("owner",)

    def _window_full(self, size: int) -> bool:
        return self.owner.window_full(size)

    def _read_ahead(self) -> None:
        owner = self.owner
        window, window_bytes = owner.window, owner.window_bytes
        n = READ_BATCH if window is None else max(1, min(READ_BATCH, window - owner.ready_count()))
        max_bytes = (1 << 62) if window_bytes is None else window_bytes - owner.held_bytes
        for msg in self.tail.take(n, max_bytes):
            self.ready.append(msg)
            self.held_bytes += msg.size


class PriorityTails:
    """The paged tails of every level, seen as one (what the queue's info,
    memory accounting, purge and delete ask of `ReadyMessages.tail`)."""

    __slots__ = ("_levels", "_remove_range", "_key")

    def __init__(self, levels: dict[int, _Level], remove_range: Callable[[str, int, int], Ticket], key: str) -> None:
        self._levels = levels
        self._remove_range = remove_range
        self._key = key

    def __len__(self) -> int:
        return sum(len(level.tail) for level in self._levels.values())

    def __bool__(self) -> bool:
        return any(level.tail for level in self._levels.values())

    @property
    def bytes(self) -> int:
        return sum(level.tail.bytes for level in self._levels.values())

    @property
    def unflushed_bytes(self) -> int:
        return sum(level.tail.unflushed_bytes for level in self._levels.values())

    @property
    def runs(self) -> int:
        return sum(level.tail.runs for level in self._levels.values())

    def prune(self) -> None:
        for level in self._levels.values():
            level.tail.prune()

    def drop(self) -> None:
        """Deletes every paged message from the store, run by run (purge)."""
        for level in self._levels.values():
            tail = level.tail
            for first, count, _, _ in tail.positions.iter_runs():
                self._remove_range(self._key, first, first + count)
            tail.forget()

    def forget(self) -> None:
        for level in self._levels.values():
            level.tail.forget()


class PriorityMessages:
    """`ReadyMessages`' interface over one level per priority (module docstring)."""

    def __init__(self, max_priority: int, new_tail: Callable[[], PagedTail], window: int | None,
                 window_bytes: int | None, page_out: object, remove_range: Callable[[str, int, int], Ticket],
                 key: str) -> None:  # fmt: skip
        self.max_priority = max_priority
        self.window = window
        self.window_bytes = window_bytes
        self.levels: dict[int, _Level] = {}
        self._order: list[_Level] = []  # the levels, highest priority first
        self._new_tail = new_tail
        self._page_out = page_out
        self.tail = PriorityTails(self.levels, remove_range, key)

    def level(self, priority: int) -> _Level:
        level = self.levels.get(priority)
        if level is None:
            level = _Level(self._new_tail(), self.window, self.window_bytes, self._page_out)
            level.owner = self
            self.levels[priority] = level
            self._order = [self.levels[p] for p in sorted(self.levels, reverse=True)]
        return level

    def level_of(self, msg: QueueMessage) -> _Level:
        return self.level(message_level(msg, self.max_priority))

    # -- totals

    def __len__(self) -> int:
        return sum(len(level) for level in self._order)

    def __bool__(self) -> bool:
        return any(self._order)

    @property
    def bytes(self) -> int:
        return sum(level.bytes for level in self._order)

    @property
    def held_bytes(self) -> int:
        return sum(level.held_bytes for level in self._order)

    def ready_count(self) -> int:
        """Messages held in memory in the ready deques of every level."""
        return sum(len(level.ready) for level in self._order)

    def window_full(self, size: int) -> bool:
        return (self.window is not None and self.ready_count() >= self.window) or (
            self.window_bytes is not None and self.held_bytes + size > self.window_bytes
        )

    # -- ReadyMessages' interface

    def in_memory(self) -> Iterator[QueueMessage]:
        for level in self._order:
            yield from level.in_memory()

    def _top(self) -> _Level | None:
        for level in self._order:
            if level:
                return level
        return None

    def head(self) -> QueueMessage | None:
        top = self._top()
        return None if top is None else top.head()

    def pop_head(self) -> QueueMessage:
        top = self._top()
        if top is None:
            raise IndexError("pop from an empty queue")
        return top.pop_head()

    def append(self, msg: QueueMessage, ticket: Ticket = 0, stored: bool = False) -> None:
        self.level_of(msg).append(msg, ticket, stored)

    def requeue(self, msg: QueueMessage) -> None:
        self.level_of(msg).requeue(msg)

    def clear(self) -> None:
        for level in self._order:
            level.clear()
