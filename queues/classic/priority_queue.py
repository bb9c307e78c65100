"""A classic queue with x-max-priority: `ClassicQueue` over one level of
ready messages per priority (priority_messages.py), and the recovery that
puts each message back in its level.

The store's index does not know a message's priority, so rebuilding from it
(`recover_index`) reads the bodies at start, a batch at a time, and keeps
only their positions per level. A clean shutdown's positions snapshot keeps
the levels apart, so the next start reads no body.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable

from storage.message_store import StoreFormatError

from .paging import PagedTail, Positions
from .persistence import FLAG_PAGE_COPY, decode_record
from .priority_messages import PriorityMessages, message_level
from .queue import ClassicQueue

log = logging.getLogger(__name__)

__all__ = ["PriorityClassicQueue"]

_SNAPSHOT_MAGIC = b"WPRI"  # not a plain positions snapshot (that starts with its version byte, 1)
_LEVEL = struct.Struct(">BI")  # priority, byte length of its positions
_TRAILER = struct.Struct(">QB")  # next seq, has TTL
_INDEX_BATCH = 256  # bodies read per multi-get while sorting the index into levels


class PriorityClassicQueue(ClassicQueue):
    type_name = "classic"

    def _ready_messages(self, memory_window: int | None, memory_bytes: int | None) -> PriorityMessages:  # type: ignore[override]
        persistence, key = self._persistence, self.store_key
        return PriorityMessages(self.config.max_priority, lambda: PagedTail(persistence, key, self._load_paged),
                                memory_window, memory_bytes, self._page_out, persistence.remove_range, key)  # fmt: skip

    # -- recovery: the levels' positions are saved at a clean stop only, and
    # the store deletes them as the next start reads them, so a crash later
    # rebuilds from the index (no checkpoints while running: they cover one tail)

    def _checkpointer(self, every: int) -> None:
        return None

    def write_checkpoint(self) -> None:
        snapshot = self.positions_snapshot()
        if snapshot is not None:
            self._persistence.put_positions(self.store_key, snapshot)

    def recover_stored(self, snapshot: bytes | None) -> None:
        if snapshot is not None:
            try:
                self.recover_positions(snapshot)
                return
            except StoreFormatError as e:
                log.warning("queue %s: positions snapshot unusable (%s); reading its whole index", self.store_key, e)
        self.recover_index(self._persistence.iter_index(self.store_key))

    def recover_index(self, entries: Iterable[tuple[int, int, int, int]]) -> None:
        """As ClassicQueue's, but each body is read once to learn its priority."""
        if self.message_count or self._unacked_count or self._next_seq:
            raise RuntimeError("recover_index() must come before the queue is used")
        end = 0
        batch: list[tuple[int, int]] = []
        for seq, size, flags, expires_at in entries:
            end = seq + 1
            if flags & FLAG_PAGE_COPY:
                self._persistence.remove(self.store_key, seq)
                continue
            if expires_at:
                self._has_ttl = True
            batch.append((seq, size))
            if len(batch) >= _INDEX_BATCH:
                self._sort_into_levels(batch)
                batch = []
        self._sort_into_levels(batch)
        self._next_seq = self._recovered_below = end
        self._dispatch()

    def _sort_into_levels(self, batch: list[tuple[int, int]]) -> None:
        if not batch:
            return
        messages: PriorityMessages = self._messages  # type: ignore[assignment]
        records = self._persistence.read(self.store_key, [seq for seq, _ in batch])
        for (seq, size), record in zip(batch, records, strict=True):
            if record is None:
                raise StoreFormatError(f"queue {self.store_key!r}: message {seq} is indexed but its record is missing")
            level = messages.level(message_level(decode_record(seq, record), self.config.max_priority))
            level.tail.add_position(seq, size)
            level.bytes += size

    def positions_snapshot(self) -> bytes | None:
        """The stored messages' positions, level by level (see ClassicQueue's)."""
        if not self.durable or self.deleted or self._unacked_count:
            return None
        messages: PriorityMessages = self._messages  # type: ignore[assignment]
        out = [_SNAPSHOT_MAGIC]
        stored = False
        for priority, level in sorted(messages.levels.items()):
            snapshot = Positions()
            for msg in sorted((m for m in level.in_memory() if m.durable), key=lambda m: m.seq):
                snapshot.append(msg.seq, msg.size)
            for first, count, size, copy in level.tail.positions.iter_runs():
                if copy:
                    self._persistence.remove_range(self.store_key, first, first + count)
                else:
                    snapshot.append_run(first, count, size)
            if snapshot:
                data = snapshot.to_bytes()
                out.append(_LEVEL.pack(priority, len(data)) + data)
                stored = True
        if not stored:
            return None
        return b"".join(out) + _TRAILER.pack(self._next_seq, self._has_ttl)

    def recover_positions(self, snapshot: bytes) -> None:
        if self.message_count or self._unacked_count or self._next_seq:
            raise RuntimeError("recover_positions() must come before the queue is used")
        if not snapshot.startswith(_SNAPSHOT_MAGIC) or len(snapshot) < len(_SNAPSHOT_MAGIC) + _TRAILER.size:
            raise StoreFormatError("not a priority queue's positions snapshot")
        messages: PriorityMessages = self._messages  # type: ignore[assignment]
        at, end = len(_SNAPSHOT_MAGIC), len(snapshot) - _TRAILER.size
        levels = []
        while at < end:
            if at + _LEVEL.size > end:
                raise StoreFormatError("priority positions snapshot truncated")
            priority, size = _LEVEL.unpack_from(snapshot, at)
            at += _LEVEL.size
            if at + size > end:
                raise StoreFormatError("priority positions snapshot truncated")
            levels.append((priority, Positions.from_bytes(snapshot[at : at + size])))
            at += size
        next_seq, has_ttl = _TRAILER.unpack_from(snapshot, end)
        for priority, positions in levels:  # all parsed: nothing is half applied
            level = messages.level(priority)
            level.tail.positions = positions
            level.bytes = positions.bytes
        self._has_ttl = bool(has_ttl)
        self._next_seq = self._recovered_below = next_seq
        self._dispatch()
