"""A classic queue coming back: messages restored from a peer or the store at
start, the compact index or a clean shutdown's positions snapshot (no body read
until delivery), and the paging of bodies in and out of the store."""

from __future__ import annotations

import struct
from collections.abc import Iterable

from queues.base import QueueMessage
from storage.message_store import Record

from .paging import Positions
from .persistence import FLAG_PAGE_COPY, decode_record

_SNAPSHOT_TRAILER = struct.Struct(">QB")  # next seq, has TTL


class QueueRecovery:
    """The recovery and paging half of `ClassicQueue` (queues/classic/queue.py)."""

    def restore(self, messages: Iterable[QueueMessage]) -> None:
        """Puts back messages recovered after a restart (any order), before
        anything is published."""
        if self.message_count or self._unacked_count or self._next_seq:
            raise RuntimeError("restore() must come before the queue is used")
        last = None
        for msg in sorted(messages, key=lambda m: m.seq):
            self._messages.append(msg, stored=msg.durable and self.durable)
            last = msg
            if msg.expires_at is not None:
                self._has_ttl = True
        if last is not None:
            self._next_seq = self._recovered_below = last.seq + 1
        self._dispatch()

    def recover(self, records: Iterable[tuple[int, Record]]) -> None:
        """restore() from this queue's entry in MessageStore.recover()."""
        self.restore(decode_record(seq, record) for seq, record in records)

    def recover_index(self, entries: Iterable[tuple[int, int, int, int]]) -> None:
        """Rebuilds the queue after a restart from its index entries
        (MessageStore.iter_index: seq, size, flags, expires_at or 0), in seq
        order, without reading a body: every message starts paged out and is
        read back when it reaches the head. Page copies (transient messages
        written out to save memory) are deleted: transient messages do not
        survive a restart."""
        if self.message_count or self._unacked_count or self._next_seq:
            raise RuntimeError("recover_index() must come before the queue is used")
        add, messages = self._messages.tail.add_position, self._messages
        remove, key = self._persistence.remove, self.store_key
        end = 0
        for seq, size, flags, expires_at in entries:
            end = seq + 1
            if flags & FLAG_PAGE_COPY:
                remove(key, seq)
                continue
            add(seq, size)
            messages.bytes += size
            if expires_at:
                self._has_ttl = True
        self._next_seq = self._recovered_below = end
        self._dispatch()

    def positions_snapshot(self) -> bytes | None:
        """At a clean shutdown, with no consumer left: the stored messages'
        positions for `recover_positions` at the next start (None: nothing is
        stored). Page copies are deleted: they would not outlive the restart."""
        if not self.durable or self.deleted or self._unacked_count:
            return None
        messages, tail = self._messages, self._messages.tail
        snapshot = Positions()
        for msg in sorted((m for m in messages.in_memory() if m.durable), key=lambda m: m.seq):
            snapshot.append(msg.seq, msg.size)
        for first, count, size, copy in tail.positions.iter_runs():
            if copy:
                self._persistence.remove_range(self.store_key, first, first + count)
            else:
                snapshot.append_run(first, count, size)
        if not snapshot:
            return None
        return snapshot.to_bytes() + _SNAPSHOT_TRAILER.pack(self._next_seq, self._has_ttl)

    def recover_positions(self, snapshot: bytes) -> None:
        """Rebuilds the queue after a clean restart from its positions
        snapshot (positions_snapshot): O(runs), no index scan, no body read."""
        if self.message_count or self._unacked_count or self._next_seq:
            raise RuntimeError("recover_positions() must come before the queue is used")
        n = _SNAPSHOT_TRAILER.size
        positions = Positions.from_bytes(snapshot[:-n])
        next_seq, has_ttl = _SNAPSHOT_TRAILER.unpack(snapshot[-n:])
        self._messages.tail.positions = positions
        self._messages.bytes = positions.bytes
        self._has_ttl = bool(has_ttl)
        self._next_seq = self._recovered_below = next_seq
        self._dispatch()

    def _load_paged(self, seq: int, record: Record) -> QueueMessage:
        """A paged message read back (paging.PagedTail): page copies are
        deleted now that the body is in memory again."""
        msg = decode_record(seq, record, recovered=seq < self._recovered_below)
        if record.flags & FLAG_PAGE_COPY:
            self._persistence.remove(self.store_key, seq)
        if msg.expires_at is not None:
            self._has_ttl = True
        return msg

    def _page_out(self, msg: QueueMessage) -> int:
        """Writes a message that is not stored to the store, to leave memory."""
        return self._persistence.page_out(self.store_key, msg.seq, msg)
