"""A classic queue coming back: messages restored from a peer or the store at
start, from its checkpoint and a bounded part of its index or from the whole
index (no body read until delivery), and the paging of bodies in and out of
the store."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from queues.base import QueueMessage
from storage.message_store import Record, StoreFormatError

from .checkpoint import Checkpoint
from .persistence import FLAG_PAGE_COPY, decode_record

log = logging.getLogger(__name__)


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

    def recover_stored(self, snapshot: bytes | None) -> None:
        """Rebuilds the queue after a restart from the store without reading a
        body: from its checkpoint (`snapshot`, checkpoint.py) and a bounded
        part of its index, or, with none (or one this version cannot read),
        from its whole index."""
        checkpoint = None
        if snapshot is not None:
            try:
                checkpoint = Checkpoint.from_bytes(snapshot)
            except StoreFormatError as e:
                log.warning("queue %s: checkpoint unusable (%s); reading its whole index", self.store_key, e)
        if checkpoint is None:
            self.recover_index(self._persistence.iter_index(self.store_key))
        else:
            self.recover_checkpoint(checkpoint)

    def recover_index(self, entries: Iterable[tuple[int, int, int, int]]) -> None:
        """Rebuilds the queue after a restart from its index entries
        (Persistence.iter_index: seq, size, flags, expires_at or 0), in seq
        order, without reading a body: every message starts paged out and is
        read back when it reaches the head. Page copies (transient messages
        written out to save memory) are deleted: transient messages do not
        survive a restart."""
        self._check_unused()
        self._next_seq = self._recovered_below = self._add_indexed(entries)
        self._recovered()

    def recover_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Rebuilds the queue from its checkpoint: the index below the seq the
        checkpoint names and after its next seq, its runs in between (why
        that is exact after a crash: checkpoint.py)."""
        self._check_unused()
        persistence, key, messages = self._persistence, self.store_key, self._messages
        next_seq = checkpoint.next_seq
        reconciled = next_seq if checkpoint.exact else min(checkpoint.reconcile_end, next_seq)
        if not checkpoint.exact:
            self._add_indexed(persistence.iter_index(key, 0, reconciled))
        tail = messages.tail.positions
        for first, count, size, copy in checkpoint.positions.iter_runs():
            end = first + count
            if not checkpoint.exact:
                first, end = max(first, reconciled), min(end, next_seq)
            if first >= end:
                continue
            if copy:
                persistence.remove_range(key, first, end)  # transient: gone with the restart
            else:
                tail.append_run(first, end - first, size)
                messages.bytes += (end - first) * size
        end = next_seq if checkpoint.exact else self._add_indexed(persistence.iter_index(key, next_seq))
        self._has_ttl = self._has_ttl or checkpoint.has_ttl
        self._next_seq = self._recovered_below = max(next_seq, end)
        self._recovered()

    def write_checkpoint(self) -> None:
        """Writes the queue's checkpoint now (a clean shutdown; a durable queue
        also writes one on its own as it runs)."""
        if self._checkpoints is not None and not self.deleted:
            self._checkpoints.write()

    def _make_checkpoint(self, limit: int) -> Checkpoint:
        """The tail as it is, and the seq below which a restart must read the
        index if at most `limit` messages leave the tail before the next one."""
        tail = self._messages.tail.positions
        reconcile_end = tail.seq_after(limit) if len(tail) > limit else self._next_seq
        return Checkpoint(tail, reconcile_end, self._next_seq, self._has_ttl, exact=False)

    def _check_unused(self) -> None:
        if self.message_count or self._unacked_count or self._next_seq:
            raise RuntimeError("a queue recovers before it is used")

    def _add_indexed(self, entries: Iterable[tuple[int, int, int, int]]) -> int:
        """Appends index entries to the tail as positions (page copies are
        deleted instead); returns one past the last seq seen, 0 if none."""
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
        return end

    def _recovered(self) -> None:
        """A fresh checkpoint first: the bound on what leaves the tail counts
        from here, not from the checkpoint read."""
        self.write_checkpoint()
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
