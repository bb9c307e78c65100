"""The bytes a consumer receives for a queued message (`delivery_payload`).

As RabbitMQ sends them: the header says first-acquirer (false on a
redelivery) and the delivery-count, and the message annotations carry
x-exchange and x-routing-key (clients such as rabbitmq-amqp-python-client
rely on annotations being there) merged with any the queue adds (a stream's
x-stream-offset, a modified outcome's). Delivery annotations are dropped.

First deliveries are the hot path, and the sections before the bare message
repeat from message to message (same header, same published annotations,
same exchange and key), so what they become is encoded once and cached:
- nothing added by the queue: the new header and annotations are one cached
  prefix;
- annotations added per message (a stream's offset): the cached part is the
  new header and the encoded entries of the annotations map, and only the
  added entries are encoded per delivery.
Everything else goes through amqp.message's general merge.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from amqp.encoder import dumps, encode
from amqp.message import HEADER, Message
from amqp.types import Symbol
from queues.base import QueueMessage
from queues.volatile import is_volatile

__all__ = ["delivery_payload"]

_SECTION = b"\x00\x53"  # a section descriptor, as smallulong
_HEADER = _SECTION + b"\x70"
_DELIVERY_ANNOTATIONS = _SECTION + b"\x71"
_MESSAGE_ANNOTATIONS = _SECTION + b"\x72"
_ANNOTATIONS_MAP32 = _MESSAGE_ANNOTATIONS + b"\xd1"  # then size and count, 4 bytes each
_size_count = struct.Struct(">II")
_X_EXCHANGE = Symbol("x-exchange")
_X_ROUTING_KEY = Symbol("x-routing-key")

_CACHE_MAX = 1024
# (header as published, exchange, routing key) -> header and annotations as delivered
_prefix_cache: dict[tuple[bytes, str, str], bytes] = {}
# (header and annotation sections as published, exchange, routing key) ->
#   (header as delivered, the annotation map's entries encoded, their count, their keys)
_entries_cache: dict[tuple[bytes, str, str], tuple[bytes, bytes, int, frozenset]] = {}
_encoded_keys: dict[Any, bytes] = {}  # the keys queues add (x-stream-offset): a handful


def delivery_payload(message: QueueMessage) -> bytes:
    payload = message.payload
    routing_key = message.routing_keys[0] if message.routing_keys else ""
    if not (message.acquired or message.delivery_count):
        if not message.annotations:
            end = _plain_header_end(payload)
            if end is not None:
                return _plain_prefix(payload[:end], message.exchange, routing_key) + payload[end:]
        else:
            out = _with_added_annotations(payload, message.exchange, routing_key, message.annotations)
            if out is not None:
                return out
    changes = {"first_acquirer": not message.acquired}
    if message.delivery_count:
        changes["delivery_count"] = message.delivery_count
    annotations = _routing_annotations(message.exchange, routing_key)
    if message.annotations:
        annotations.update(message.annotations)
    return Message.from_bytes(payload).to_delivery_bytes(changes, annotations)


def _remember(cache: dict, key: tuple, value: Any, routing_key: str) -> None:
    if is_volatile(routing_key):  # a reply address repeats rarely: it would only churn the cache
        return
    if len(cache) >= _CACHE_MAX:
        cache.clear()
    cache[key] = value


def _plain_prefix(header: bytes, exchange: str, routing_key: str) -> bytes:
    key = (header, exchange, routing_key)
    prefix = _prefix_cache.get(key)
    if prefix is None:
        prefix = Message.from_bytes(header).to_delivery_bytes(
            {"first_acquirer": True}, _routing_annotations(exchange, routing_key)
        )
        _remember(_prefix_cache, key, prefix, routing_key)
    return prefix


def _with_added_annotations(payload: bytes, exchange: str, routing_key: str,
                            added: Mapping[Any, Any]) -> bytes | None:  # fmt: skip
    """A first delivery with annotations the queue adds; None when an added key
    replaces a published one (the general merge decides that)."""
    end = _annotations_end(payload)
    if end is None:
        sizes = Message.from_bytes(payload).sizes
        end = sizes.header + sizes.delivery_annotations + sizes.message_annotations
    key = (payload[:end], exchange, routing_key)
    cached = _entries_cache.get(key)
    if cached is None:
        cached = _annotation_entries(Message.from_bytes(key[0]), exchange, routing_key)
        _remember(_entries_cache, key, cached, routing_key)
    header, entries, count, keys = cached
    buf = bytearray(entries)
    for k, v in added.items():
        if type(k) is str:
            k = Symbol(k)  # annotation keys are symbols [3.2.3]
        if k in keys:
            return None
        encoded = _encoded_keys.get(k)
        if encoded is None:
            encoded = dumps(k)
            if len(_encoded_keys) < _CACHE_MAX:
                _encoded_keys[k] = encoded
        buf += encoded
        encode(buf, v)
        count += 2
    return b"".join((header, _ANNOTATIONS_MAP32, _size_count.pack(len(buf) + 4, count), buf, payload[end:]))


def _annotation_entries(message: Message, exchange: str, routing_key: str) -> tuple[bytes, bytes, int, frozenset]:
    header = bytes(message.with_header(first_acquirer=True).section_bytes(HEADER))
    merged = dict(message.message_annotations or {})
    merged.update(_routing_annotations(exchange, routing_key))
    buf = bytearray()
    for k, v in merged.items():
        encode(buf, Symbol(k) if type(k) is str else k)
        encode(buf, v)
    return header, bytes(buf), 2 * len(merged), frozenset(merged)


def _routing_annotations(exchange: str, routing_key: str) -> dict:
    return {_X_EXCHANGE: exchange, _X_ROUTING_KEY: routing_key}


def _annotations_end(payload: bytes) -> int | None:
    """Where the header, delivery-annotations and message-annotations sections
    end, read from their sizes without decoding them; None for an encoding
    this shortcut does not read (the caller scans the message then)."""
    end = _header_end(payload)
    if end is None:
        return None
    for section in (_DELIVERY_ANNOTATIONS, _MESSAGE_ANNOTATIONS):
        if payload[end : end + 3] != section:
            continue
        code = payload[end + 3] if len(payload) > end + 3 else -1
        if code == 0xC1:  # map8
            end += 5 + payload[end + 4]
        elif code == 0xD1:  # map32
            end += 8 + int.from_bytes(payload[end + 4 : end + 8], "big")
        else:
            return None
    return end if end <= len(payload) else None


def _header_end(payload: bytes) -> int | None:
    """Where the header section ends (0 without one); None for an encoding not read here."""
    if payload[:3] != _HEADER:
        return 0
    code = payload[3] if len(payload) > 3 else -1
    if code == 0x45:  # list0
        return 4
    if code == 0xC0:  # list8
        return 5 + payload[4]
    if code == 0xD0:  # list32
        return 8 + int.from_bytes(payload[4:8], "big")
    return None


def _plain_header_end(payload: bytes) -> int | None:
    """Where the header section ends (0 without one), when nothing but the
    bare message follows it; None when annotations need merging."""
    end = _header_end(payload)
    if end is None:
        return None
    following = payload[end : end + 3]
    if following[:2] != _SECTION and following:
        return None
    if following in (_DELIVERY_ANNOTATIONS, _MESSAGE_ANNOTATIONS):
        return None
    return end
