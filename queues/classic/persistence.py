"""Where a durable classic queue keeps its durable messages.

`Persistence` is what the queue needs: writes that return a ticket, a
callback once a ticket is on disk, and the reads and page copies of paging
(paging.py). `StorePersistence` is the node's MessageStore made durable by
its GroupCommitter, each message in a versioned envelope (below);
`MemoryPersistence` keeps the records in a dict and every write is durable
at once (pure tests).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from amqp import serial
from amqp.codec import dumps, loads
from amqp.errors import DecodeError
from queues.base import QueueMessage
from storage.message_store import Record, StoreFormatError, Ticket

__all__ = [
    "MemoryPersistence",
    "Persistence",
    "StorePersistence",
    "decode_record",
    "encode_record",
    "payload_size",
    "queue_of_store_key",
    "store_key",
]

_MAX_U32 = serial.MASK


class Persistence(Protocol):
    """Where a queue writes its durable messages and its page copies. Writes
    return a ticket; `on_durable(ticket, cb)` calls cb once that write (and
    every earlier one) is on disk, `durable_seq()` is the last such ticket."""

    def put(self, queue: str, seq: int, message: QueueMessage) -> Ticket: ...

    def update(self, queue: str, seq: int, message: QueueMessage) -> Ticket: ...

    def remove(self, queue: str, seq: int) -> Ticket: ...

    def drop_queue(self, queue: str) -> Ticket: ...

    def on_durable(self, ticket: Ticket, callback: Callable[[], None]) -> None:
        """`callback` runs once `ticket` is on disk: on a full disk, once there is room."""

    def durable_seq(self) -> Ticket: ...

    def page_out(self, queue: str, seq: int, message: QueueMessage) -> Ticket:
        """Write a page copy of a message that is not stored (FLAG_PAGE_COPY)."""

    def read(self, queue: str, seqs: list[int]) -> list[Record | None]: ...

    def remove_range(self, queue: str, first: int, end: int) -> Ticket:
        """Remove the messages with first <= seq < end."""

    def put_positions(self, queue: str, snapshot: bytes) -> Ticket:
        """Replace the queue's checkpoint (checkpoint.py), in order with its writes."""

    def iter_index(self, queue: str, first: int = 0, end: int | None = None) -> Iterator[tuple[int, int, int, int]]:
        """(seq, size, flags, expires_at or 0) of the stored messages with
        first <= seq < end, in seq order, without reading a body."""


class MemoryPersistence:
    """Keeps the records in a dict; every write is "durable" at once, so
    confirms are immediate (pure tests)."""

    def __init__(self) -> None:
        self._ticket: Ticket = 0
        self.records: dict[tuple[str, int], Record] = {}
        self.positions: dict[str, bytes] = {}
        self.reads = 0

    def _next(self) -> Ticket:
        self._ticket += 1
        return self._ticket

    def put(self, queue: str, seq: int, message: QueueMessage) -> Ticket:
        self.records[queue, seq] = encode_record(message)
        return self._next()

    def update(self, queue: str, seq: int, message: QueueMessage) -> Ticket:
        return self.put(queue, seq, message)

    def page_out(self, queue: str, seq: int, message: QueueMessage) -> Ticket:
        self.records[queue, seq] = encode_record(message, page_copy=True)
        return self._next()

    def remove(self, queue: str, seq: int) -> Ticket:
        self.records.pop((queue, seq), None)
        return self._next()

    def remove_range(self, queue: str, first: int, end: int) -> Ticket:
        for seq in range(first, end):
            self.records.pop((queue, seq), None)
        return self._next()

    def drop_queue(self, queue: str) -> Ticket:
        for key in [k for k in self.records if k[0] == queue]:
            del self.records[key]
        self.positions.pop(queue, None)
        return self._next()

    def put_positions(self, queue: str, snapshot: bytes) -> Ticket:
        self.positions[queue] = snapshot
        return self._next()

    def iter_index(self, queue: str, first: int = 0, end: int | None = None) -> Iterator[tuple[int, int, int, int]]:
        seqs = sorted(s for q, s in self.records if q == queue and s >= first and (end is None or s < end))
        for seq in seqs:
            record = self.records[queue, seq]
            yield seq, payload_size(record), record.flags, record.expires_at or 0

    def read(self, queue: str, seqs: list[int]) -> list[Record | None]:
        self.reads += len(seqs)
        return [self.records.get((queue, seq)) for seq in seqs]

    def on_durable(self, ticket: Ticket, callback: Callable[[], None]) -> None:
        callback()

    def durable_seq(self) -> Ticket:
        return self._ticket


# Envelope inside Record.body, version 1 (the store's record header already
# holds expires_at and delivery_count):
#
#     offset size field
#     0      1    envelope version, 1
#     1      4    N: u32 length of the metadata
#     5      N    metadata: one AMQP-encoded list
#                   [exchange: string, routing-keys: list of string,
#                    annotations: map or null]
#     5+N    ...  the message payload, exactly as published
#
# Record.flags bit 0 is "acquired" (first-acquirer false on the next
# delivery); bit 1 "page copy": a message that is not stored for durability,
# written out only to leave memory (deleted when read back, and at restart);
# bit 2 "not durable": the message's header said durable=false (only page
# copies have it). The other bits are reserved and must be 0. A reader
# meeting another envelope version raises StoreFormatError; a new layout gets
# a new version and old versions stay decodable. enqueued_at is not used (0).
ENVELOPE_VERSION = 1
FLAG_ACQUIRED = 0x01
FLAG_PAGE_COPY = 0x02
FLAG_NOT_DURABLE = 0x04
_ENVELOPE = struct.Struct(">BI")
_META_CACHE_MAX = 1024
_meta_cache: dict[tuple[str, str], bytes] = {}


def _meta(message: QueueMessage) -> bytes:
    keys = message.routing_keys
    if message.annotations or len(keys) != 1:
        return dumps([message.exchange, list(keys), message.annotations or None])
    # The common case (one key, no annotations) repeats: encode it once.
    cache_key = (message.exchange, keys[0])
    meta = _meta_cache.get(cache_key)
    if meta is None:
        if len(_meta_cache) >= _META_CACHE_MAX:
            _meta_cache.clear()
        meta = _meta_cache[cache_key] = dumps([message.exchange, [keys[0]], None])
    return meta


def encode_record(message: QueueMessage, page_copy: bool = False) -> Record:
    meta = _meta(message)
    flags = FLAG_ACQUIRED if message.acquired else 0
    if page_copy:
        flags |= FLAG_PAGE_COPY if message.durable else FLAG_PAGE_COPY | FLAG_NOT_DURABLE
    return Record(
        body=_ENVELOPE.pack(ENVELOPE_VERSION, len(meta)) + meta + message.payload,
        expires_at=message.expires_at,
        delivery_count=min(message.delivery_count, _MAX_U32),
        flags=flags,
    )


def payload_size(record: Record) -> int:
    """The payload size of a stored message (its record body less the envelope)."""
    body = record.body
    if len(body) < _ENVELOPE.size:
        return len(body)
    return max(0, len(body) - _ENVELOPE.size - _ENVELOPE.unpack_from(body)[1])


def decode_record(seq: int, record: Record, recovered: bool = True) -> QueueMessage:
    """The stored message at `seq`. `recovered`: read back after a restart
    (counts as acquired); else read back from a page, as it was written."""
    body = record.body
    if len(body) < _ENVELOPE.size:
        raise StoreFormatError(f"message {seq}: record body of {len(body)} bytes has no envelope")
    version, n = _ENVELOPE.unpack_from(body)
    if version != ENVELOPE_VERSION:
        raise StoreFormatError(f"message {seq}: unknown envelope version {version}")
    end = _ENVELOPE.size + n
    if end > len(body):
        raise StoreFormatError(f"message {seq}: envelope metadata runs past the record")
    try:
        meta = loads(body[_ENVELOPE.size : end])
    except DecodeError as e:
        raise StoreFormatError(f"message {seq}: bad envelope metadata: {e}") from None
    if not isinstance(meta, list) or len(meta) != 3:
        raise StoreFormatError(f"message {seq}: envelope metadata is not [exchange, keys, annotations]")
    exchange, keys, annotations = meta
    return QueueMessage(
        seq=seq,
        payload=body[end:],
        durable=not record.flags & FLAG_NOT_DURABLE,
        expires_at=record.expires_at,
        delivery_count=record.delivery_count,
        # Any recovered message may have been delivered before the restart:
        # first-acquirer false is the safe answer [3.2.1], and it spares a
        # write per delivery to remember it.
        acquired=recovered or bool(record.flags & FLAG_ACQUIRED),
        exchange=exchange,
        routing_keys=list(keys),
        annotations=annotations,
    )


class StorePersistence:
    """Persistence on the node's MessageStore, made durable by its GroupCommitter."""

    def __init__(self, store: Any, committer: Any) -> None:
        self.store = store  # storage.message_store.MessageStore
        self.committer = committer  # storage.group_commit.GroupCommitter

    def put(self, queue: str, seq: int, message: QueueMessage) -> Ticket:
        return self.store.put(queue, seq, encode_record(message), len(message.payload))

    def update(self, queue: str, seq: int, message: QueueMessage) -> Ticket:
        return self.store.update(queue, seq, encode_record(message), len(message.payload))

    def page_out(self, queue: str, seq: int, message: QueueMessage) -> Ticket:
        return self.store.put(queue, seq, encode_record(message, page_copy=True), len(message.payload))

    def remove(self, queue: str, seq: int) -> Ticket:
        return self.store.delete(queue, seq)

    def remove_range(self, queue: str, first: int, end: int) -> Ticket:
        return self.store.delete_seqs(queue, first, end)

    def read(self, queue: str, seqs: list[int]) -> list[Record | None]:
        return self.store.read(queue, seqs)

    def durable_seq(self) -> Ticket:
        return self.store.durable_seq()

    def drop_queue(self, queue: str) -> Ticket:
        return self.store.delete_queue(queue)

    def put_positions(self, queue: str, snapshot: bytes) -> Ticket:
        return self.store.put_positions(queue, snapshot)

    def iter_index(self, queue: str, first: int = 0, end: int | None = None) -> Iterator[tuple[int, int, int, int]]:
        return self.store.iter_index(queue, first, end)

    def on_durable(self, ticket: Ticket, callback: Callable[[], None]) -> None:
        self.committer.on_durable(ticket, callback)


def store_key(vhost: str, name: str) -> str:
    """The queue's name in the message store: unique per (vhost, name); the
    length prefix keeps "a"+"b/c" apart from "a/b"+"c"."""
    return f"{len(vhost)}:{vhost}/{name}"


def queue_of_store_key(key: str) -> tuple[str, str]:
    """(vhost, name) of a `store_key`."""
    length, _, rest = key.partition(":")
    return rest[: int(length)], rest[int(length) + 1 :]
