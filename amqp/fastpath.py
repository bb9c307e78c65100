"""Hand-written codec paths for the frames on every message's path: the
TRANSFER a publisher sends and the TRANSFER the broker sends to a consumer.

The generic codec (codec.py + composite.py) handles every composite through
tables; that generality costs several microseconds per frame. These functions
produce and accept exactly the same bytes for TRANSFER, and fall back to the
generic path for anything unusual (a field in a wide or odd encoding, a
delivery state), so strictness is unchanged: tests/amqp/test_fastpath.py
checks both paths agree.
"""

from __future__ import annotations

import struct

from .definitions import Transfer
from .types import UInt

_u32 = struct.Struct(">I")
_frame_header = struct.Struct(">IBBH")
_TRANSFER_PREFIX = b"\x00\x53\x14"


def _uint(v: int) -> bytes:
    if v == 0:
        return b"\x43"
    if v < 256:
        return bytes((0x52, v))
    return b"\x70" + _u32.pack(v)


def encode_transfer_frame(
    channel: int, handle: int, delivery_id: int, tag: bytes, settled: bool, payload: bytes, message_format: int = 0
) -> bytes:
    """A whole frame holding TRANSFER(handle, delivery-id, delivery-tag,
    message-format, settled) and the payload; identical to
    `encode_frame(channel, Transfer(...), payload)`."""
    if len(tag) > 32:
        raise ValueError("delivery-tag longer than 32 bytes")  # [2.8.7]
    fields = b"".join(
        (
            _uint(handle),
            _uint(delivery_id),
            b"\xa0" + bytes((len(tag),)) + tag,
            _uint(message_format),
            b"\x41" if settled else b"\x42",
        )
    )
    # fields stay well below 255 bytes: 5 + 5 + 34 + 5 + 1
    body = _TRANSFER_PREFIX + bytes((0xC0, len(fields) + 1, 5)) + fields
    return _frame_header.pack(8 + len(body) + len(payload), 2, 0, channel) + body + payload


def decode_transfer(body: bytes) -> tuple[Transfer, int] | None:
    """Decodes a TRANSFER at the start of a frame body encoded the way
    clients commonly do (list8, fields as uint0/smalluint/uint, vbin8, booleans,
    nulls). Returns (transfer, payload offset), or None to use the generic
    decoder."""
    if body[:3] != _TRANSFER_PREFIX or len(body) < 6 or body[3] != 0xC0:
        return None
    size, count = body[4], body[5]
    end = 5 + size
    if count > 11 or end > len(body):
        return None
    try:
        values, p = _read_fields(body, count, end)
    except (IndexError, struct.error):
        return None
    if p != end:
        return None
    # the generic path's field checks: each value has its field's type, the
    # handle is present; anything else goes the generic way (and fails there)
    if not values or values[0] is None:
        return None
    for v, expected in zip(values, _FIELD_TYPES, strict=False):  # values may be shorter
        if v is not None and type(v) is not expected:
            return None
    return Transfer(*values), end


# field types as the fast readers produce them; None: never on the fast path
_FIELD_TYPES = (UInt, UInt, bytes, UInt, bool, bool, None, None, bool, bool, bool)


def _read_fields(body: bytes, count: int, end: int) -> tuple[list, int]:
    p = 6
    values: list = []
    append = values.append
    for _ in range(count):
        if p >= end:
            return values, -1
        c = body[p]
        if c == 0x40:
            append(None)
            p += 1
        elif c == 0x43:
            append(UInt(0))
            p += 1
        elif c == 0x52:
            append(UInt(body[p + 1]))
            p += 2
        elif c == 0x70:
            append(UInt(_u32.unpack_from(body, p + 1)[0]))
            p += 5
        elif c == 0x41:
            append(True)
            p += 1
        elif c == 0x42:
            append(False)
            p += 1
        elif c == 0xA0:
            n = body[p + 1]
            append(body[p + 2 : p + 2 + n])
            p += 2 + n
        else:
            return values, -1  # a delivery state, a wide or unusual encoding: generic path
    return values, p
