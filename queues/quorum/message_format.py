"""The binary layouts of a quorum queue's messages: in a publish batch (the
Raft entry of `commands.PublishBatch`) and in the body store.

A message is written once, by the node that takes the publish, as a
*stored message*, and that same run of bytes is what the Raft entry carries
and what every replica puts in RocksDB and reads back for a delivery: the
AMQP message bytes in it are those the publisher sent, never re-encoded.

Stored message, format 1 (big-endian):

    0x01                       the format
    flags: u8                  1 durable, 2 a ttl follows, 4 a correlation follows,
                               8 annotations follow
    [ttl: u64]                 ms, the message's own TTL at the publish
    [correlation: u32]         the publisher's confirm token in its batch
    len: u16, exchange         UTF-8
    count: u16, count x (len: u16, routing key)
    [len: u32, annotations]    AMQP-encoded map (rare: dead-lettered or modified messages)
    payload                    the message as published, to the end

The bodies stored before format 1 are AMQP lists `[payload, durable,
exchange, routing_keys, annotations]` (an AMQP list starts with 0x45, 0xc0
or 0xd0, never 0x01): `read_stored` reads both.

Publish batch (the layout of record `quorum.publish` version 3, after the
record header of raft/records.py):

    now_ms: u64, len: u16, publisher (UTF-8), seq: u64, count: u32,
    count x (len: u32, stored message)
"""

from __future__ import annotations

import struct
from typing import Any

from amqp import codec

__all__ = ["FORMAT", "PublishBatchCodec", "pack_message", "read_stored", "unpack_message"]

FORMAT = 1
_HEAD = struct.Struct(">BB")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_BATCH = struct.Struct(">QH")  # now_ms, len(publisher)
_BATCH_TAIL = struct.Struct(">QI")  # seq, count
_DURABLE, _TTL, _CORRELATION, _ANNOTATIONS = 1, 2, 4, 8


def pack_message(payload: bytes, durable: bool, ttl: int | None, exchange: str, routing_keys: list[str] | tuple,
                 correlation: int | None, annotations: dict | None) -> bytes:  # fmt: skip
    """One stored message (format 1)."""
    flags = _DURABLE if durable else 0
    parts = [b""]
    if ttl is not None:
        flags |= _TTL
        parts.append(_U64.pack(ttl))
    if correlation is not None:
        flags |= _CORRELATION
        parts.append(_U32.pack(correlation))
    ex = exchange.encode()
    parts.append(_U16.pack(len(ex)))
    parts.append(ex)
    parts.append(_U16.pack(len(routing_keys)))
    for key in routing_keys:
        k = key.encode()
        parts.append(_U16.pack(len(k)))
        parts.append(k)
    if annotations:
        flags |= _ANNOTATIONS
        ann = codec.dumps(annotations)
        parts.append(_U32.pack(len(ann)))
        parts.append(ann)
    parts[0] = _HEAD.pack(FORMAT, flags)
    parts.append(payload)
    return b"".join(parts)


def unpack_message(data: bytes) -> tuple:
    """A stored message (format 1) as the 7 fields of a publish:
    (payload, durable, ttl, exchange, routing_keys, correlation, annotations)."""
    fmt, flags = _HEAD.unpack_from(data, 0)
    if fmt != FORMAT:
        raise ValueError(f"stored message format {fmt}, expected {FORMAT}")
    pos = 2
    ttl = correlation = annotations = None
    if flags & _TTL:
        (ttl,) = _U64.unpack_from(data, pos)
        pos += 8
    if flags & _CORRELATION:
        (correlation,) = _U32.unpack_from(data, pos)
        pos += 4
    (n,) = _U16.unpack_from(data, pos)
    pos += 2
    exchange = data[pos : pos + n].decode()
    pos += n
    (count,) = _U16.unpack_from(data, pos)
    pos += 2
    keys = []
    for _ in range(count):
        (n,) = _U16.unpack_from(data, pos)
        pos += 2
        keys.append(data[pos : pos + n].decode())
        pos += n
    if flags & _ANNOTATIONS:
        (n,) = _U32.unpack_from(data, pos)
        pos += 4
        annotations = dict(codec.loads(data[pos : pos + n]))
        pos += n
    if pos > len(data):
        raise ValueError("truncated stored message")
    return data[pos:], bool(flags & _DURABLE), ttl, exchange, tuple(keys), correlation, annotations


def read_stored(value: bytes) -> tuple[bytes, bool, str, list[str], dict | None]:
    """(payload, durable, exchange, routing_keys, annotations) of a stored body, either format."""
    if value[:1] == b"\x01":
        payload, durable, _ttl, exchange, keys, _corr, annotations = unpack_message(value)
        return payload, durable, exchange, list(keys), annotations
    payload, durable, exchange, keys, annotations = codec.loads(value)  # before format 1
    return bytes(payload), bool(durable), exchange, list(keys), annotations


class PublishBatchCodec:
    """raft/records.py's binary codec of `commands.PublishBatch`."""

    def __init__(self, cls: Any = None) -> None:
        self.cls = cls  # set once the record class exists

    def encode(self, record: Any) -> list[bytes]:
        publisher = record.publisher.encode()
        parts = [_BATCH.pack(record.now_ms, len(publisher)), publisher,
                 _BATCH_TAIL.pack(record.seq, len(record.stored))]  # fmt: skip
        for stored in record.stored:
            parts.append(_U32.pack(len(stored)))
            parts.append(stored)
        return parts

    def decode(self, data: bytes, pos: int) -> Any:
        now_ms, n = _BATCH.unpack_from(data, pos)
        pos += _BATCH.size
        publisher = data[pos : pos + n].decode()
        pos += n
        seq, count = _BATCH_TAIL.unpack_from(data, pos)
        pos += _BATCH_TAIL.size
        stored = []
        size = len(data)
        for _ in range(count):
            (n,) = _U32.unpack_from(data, pos)
            pos += 4
            if pos + n > size:
                raise ValueError("truncated publish batch")
            stored.append(data[pos : pos + n])
            pos += n
        if pos != size:
            raise ValueError(f"{size - pos} trailing bytes after a publish batch")
        stored = tuple(stored)
        return self.cls(tuple(unpack_message(s) for s in stored), now_ms, publisher, seq, stored)
