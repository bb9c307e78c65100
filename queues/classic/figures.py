"""What a classic queue reports of itself: its counts, its info, and the
memory it holds as the memory alarm counts it (node/ops/memory.py)."""

from __future__ import annotations

from .messages import ReadyMessages

# held_bytes: bodies in memory (window, page copies not yet durable,
# unsettled deliveries), plus the Python objects around each such message (a
# QueueMessage with a one-key routing list, its bytes header and deque slot
# come to ~210 B by tracemalloc over 20k messages, an unacked dict entry ~30 B
# more; rounded up), plus 17 B per run of the paged tail's positions (four
# array entries, paging.Positions).
MESSAGE_OVERHEAD = 256


class QueueFigures:
    """Read-only figures of ClassicQueue, from the state it keeps."""

    _messages: ReadyMessages
    _unacked_count: int
    _unacked_bytes: int

    @property
    def message_count(self) -> int:
        """Ready messages (not those delivered and unsettled), as RabbitMQ reports."""
        return len(self._messages)

    @property
    def unacked_count(self) -> int:
        return self._unacked_count

    @property
    def ready_bytes(self) -> int:
        return self._messages.bytes

    @property
    def memory_bytes(self) -> int:
        """Payload bytes of ready messages this queue holds in memory: its
        window, plus paged bodies whose write is not yet durable."""
        tail = self._messages.tail
        tail.prune()
        return self._messages.held_bytes + tail.unflushed_bytes

    @property
    def held_bytes(self) -> int:
        """Memory held, as the memory alarm counts it (node/ops/memory.py)."""
        tail = self._messages.tail
        in_memory = len(self._messages) - len(tail) + self._unacked_count
        return self.memory_bytes + self._unacked_bytes + in_memory * MESSAGE_OVERHEAD + tail.runs * 17

    def info(self) -> dict:
        info = super().info()
        messages, tail = self._messages, self._messages.tail
        info["messages_unacknowledged"] = self._unacked_count
        info["message_bytes_ready"] = messages.bytes
        # as RabbitMQ names them: in memory, and on disk only
        info["messages_ram"] = len(messages) - len(tail)
        info["message_bytes_ram"] = self.memory_bytes
        info["messages_paged_out"] = len(tail)
        info["message_bytes_paged_out"] = tail.bytes
        return info
