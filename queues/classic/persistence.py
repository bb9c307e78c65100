"""Where a durable classic queue keeps its durable messages.

`Persistence` is what the queue needs: writes that return a ticket, and a
callback once a ticket is on disk. `StorePersistence` is the node's
MessageStore made durable by its GroupCommitter, each message in a versioned
envelope (below); `MemoryPersistence` keeps nothing (transient queues, tests).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
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
    "store_key",
]

_MAX_U32 = serial.MASK


class Persistence(Protocol):
    """Where a durable queue writes its durable messages. Writes return a
    ticket; `on_durable(ticket, cb)` calls cb once that write (and every
    earlier one) is on disk."""

    def put(self, queue: str, seq: int, message: QueueMessage) -> Ticket: ...

    def update(self, queue: str, seq: int, message: QueueMessage) -> Ticket: ...

    def remove(self, queue: str, seq: int) -> Ticket: ...

    def drop_queue(self, queue: str) -> Ticket: ...

    def on_durable(self, ticket: Ticket, callback: Callable[[], None]) -> None: ...


class MemoryPersistence:
    """Keeps nothing; every write is "durable" at once, so confirms are
    immediate (transient queues, pure tests)."""

    def __init__(self) -> None:
        self._ticket: Ticket = 0

    def _next(self) -> Ticket:
        self._ticket += 1
        return self._ticket

    def put(self, queue: str, seq: int, message: QueueMessage) -> Ticket:
        return self._next()

    def update(self, queue: str, seq: int, message: QueueMessage) -> Ticket:
        return self._next()

    def remove(self, queue: str, seq: int) -> Ticket:
        return self._next()

    def drop_queue(self, queue: str) -> Ticket:
        return self._next()

    def on_durable(self, ticket: Ticket, callback: Callable[[], None]) -> None:
        callback()


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
# delivery); the other bits are reserved and must be 0. A reader meeting
# another envelope version raises StoreFormatError; a new layout gets a new
# version and old versions stay decodable. enqueued_at is not used (0).
ENVELOPE_VERSION = 1
FLAG_ACQUIRED = 0x01
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


def encode_record(message: QueueMessage) -> Record:
    meta = _meta(message)
    return Record(
        body=_ENVELOPE.pack(ENVELOPE_VERSION, len(meta)) + meta + message.payload,
        expires_at=message.expires_at,
        delivery_count=min(message.delivery_count, _MAX_U32),
        flags=FLAG_ACQUIRED if message.acquired else 0,
    )


def decode_record(seq: int, record: Record) -> QueueMessage:
    """The stored message at `seq` as a durable QueueMessage."""
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
        durable=True,
        expires_at=record.expires_at,
        delivery_count=record.delivery_count,
        # Any recovered message may have been delivered before the restart:
        # first-acquirer false is the safe answer [3.2.1], and it spares a
        # write per delivery to remember it.
        acquired=True,
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
        return self.store.put(queue, seq, encode_record(message))

    def update(self, queue: str, seq: int, message: QueueMessage) -> Ticket:
        return self.store.update(queue, seq, encode_record(message))

    def remove(self, queue: str, seq: int) -> Ticket:
        return self.store.delete(queue, seq)

    def drop_queue(self, queue: str) -> Ticket:
        return self.store.delete_queue(queue)

    def on_durable(self, ticket: Ticket, callback: Callable[[], None]) -> None:
        self.committer.on_durable(ticket, callback)


def store_key(vhost: str, name: str) -> str:
    """The queue's name in the message store: unique per (vhost, name); the
    length prefix keeps "a"+"b/c" apart from "a/b"+"c"."""
    return f"{len(vhost)}:{vhost}/{name}"
