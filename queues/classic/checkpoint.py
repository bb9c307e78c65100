"""Crash-safe checkpoints of a durable classic queue's paged positions.

Rebuilding a deep queue by reading its whole index costs about a second per
million messages. Instead the queue writes, now and then, a checkpoint of
its tail (the positions behind the memory window, run-length encoded: a
backlog published in order is a few runs) through its `Persistence`, in the
same ordered write stream as its messages. A restart reads the newest
checkpoint that reached the disk and only a bounded part of the index.

Why a checkpoint C plus that part is exactly what the store holds, after a
crash at any point: writes reach the disk in the order they were made, so
every write the restart sees after C was made before the next checkpoint
C'. Between C and C' the queue

- published fewer than `limit` messages (a checkpoint is written once that
  many seqs were handed out), all at seqs >= C's next seq: the index from
  there on is read;
- took fewer than `limit` messages from its tail (a checkpoint is written
  before a read that would pass it), and the tail is only ever taken from its
  front, so of C's runs at most the first `limit` positions can have left the
  tail, been delivered and deleted: the index is read up to the seq of
  position `limit` (`reconcile_end`), which also covers every message that
  was in memory or unacked at C (their seqs are below the tail's);
- did not purge: a purge writes a checkpoint in the same loop turn, so in
  the same atomic batch.

C's runs from `reconcile_end` to its next seq are therefore all still
stored, and are taken as they are (page copies among them are deleted).
`limit` is max(`every` (CHECKPOINT_EVERY, the node's
classic_queue_checkpoint_every), the tail's runs), so a checkpoint costs at
most about one run per message published or taken, and a restart reads at
most about 2 x limit index entries plus the runs, whatever the depth.

Blob layout: `paging.Positions.to_bytes()` (version 2: runs with page-copy
flags) followed by the trailer below. A version-1 blob (positions without
page copies + next seq and has-TTL) is a clean shutdown's from before
checkpoints existed: exact, no index read needed.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import NamedTuple

from storage.message_store import StoreFormatError

from .paging import Positions

__all__ = ["CHECKPOINT_EVERY", "Checkpoint", "Checkpointer"]

CHECKPOINT_EVERY = 100_000  # publishes or tail reads between two checkpoints, at least
_TRAILER = struct.Struct(">QQB")  # reconcile_end, next seq, has TTL
_TRAILER_V1 = struct.Struct(">QB")  # next seq, has TTL


class Checkpoint(NamedTuple):
    positions: Positions  # the tail at the checkpoint, page copies flagged
    reconcile_end: int  # the index is read below this seq (and from next_seq on)
    next_seq: int
    has_ttl: bool
    exact: bool  # a version-1 clean-shutdown snapshot: positions are the whole queue

    def to_bytes(self) -> bytes:
        return self.positions.to_bytes() + _TRAILER.pack(self.reconcile_end, self.next_seq, self.has_ttl)

    @classmethod
    def from_bytes(cls, data: bytes) -> Checkpoint:
        if not data:
            raise StoreFormatError("empty positions snapshot")
        exact = data[0] == 1
        trailer = _TRAILER_V1 if exact else _TRAILER
        if len(data) < trailer.size:
            raise StoreFormatError("positions snapshot shorter than its trailer")
        positions = Positions.from_bytes(data[: -trailer.size])
        if exact:
            next_seq, has_ttl = trailer.unpack(data[-trailer.size :])
            return cls(positions, 0, next_seq, bool(has_ttl), True)
        reconcile_end, next_seq, has_ttl = trailer.unpack(data[-trailer.size :])
        return cls(positions, reconcile_end, next_seq, bool(has_ttl), False)


class Checkpointer:
    """Decides when a durable queue writes its checkpoint: `make(limit)`
    builds it from the queue, `put(blob)` writes it, `tail_runs()` sizes the
    next limit."""

    __slots__ = ("limit", "writes", "_every", "_make", "_put", "_tail_runs", "_taken", "_checkpoint_seq")

    def __init__(self, make: Callable[[int], Checkpoint], put: Callable[[bytes], object],
                 tail_runs: Callable[[], int], every: int = CHECKPOINT_EVERY) -> None:  # fmt: skip
        if every < 1:
            raise ValueError(f"checkpoint_every must be at least 1, not {every}")
        self._make, self._put, self._tail_runs = make, put, tail_runs
        self._every = every
        self.limit = every
        self.writes = 0
        self._taken = 0  # tail messages taken since the last checkpoint (at most)
        self._checkpoint_seq = 0  # the queue's next seq at the last checkpoint

    def published(self, next_seq: int) -> None:
        """A seq was handed out; `next_seq` is the one after it."""
        if next_seq - self._checkpoint_seq >= self.limit:
            self.write()

    def before_take(self, n: int) -> None:
        """Up to `n` messages are about to leave the tail."""
        if self._taken + n > self.limit:
            self.write()
        self._taken += n

    def write(self) -> None:
        self.limit = max(self._every, self._tail_runs())
        checkpoint = self._make(self.limit)
        self._put(checkpoint.to_bytes())
        self._taken = 0
        self._checkpoint_seq = checkpoint.next_seq
        self.writes += 1
