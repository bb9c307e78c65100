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

from . import structs
from .definitions import Transfer
from .types import UInt

# the table's layouts, assigned and not imported (amqp/structs.py says why)
_u32 = structs.U32
_frame_header = structs.FRAME_HEADER

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
    if body[:3] != _TRANSFER_PREFIX or len(body) < 7 or body[3] != 0xC0:
        return None
    end = 5 + body[4]
    count = body[5]
    # the generic path's field checks: each value has its field's type, the
    # handle is present; anything else goes the generic way (and fails there)
    if not 0 < count <= 11 or end > len(body) or body[6] == 0x40:
        return None
    p = 6
    values: list = []
    append = values.append
    try:
        for allowed in _ALLOWED[:count]:
            if p >= end:
                return None
            c = body[p]
            if c not in allowed:
                return None  # a delivery state, a wide or unusual encoding, a wrong type: generic path
            if c == 0x40:
                append(None)
                p += 1
            elif c == 0x52:
                append(_SMALL_UINTS[body[p + 1]])
                p += 2
            elif c == 0x70:
                append(UInt(_u32.unpack_from(body, p + 1)[0]))
                p += 5
            elif c == 0xA0:
                n = body[p + 1]
                append(body[p + 2 : p + 2 + n])
                p += 2 + n
            else:  # 0x41, 0x42, 0x43: true, false, uint0
                append(_CONSTANTS[c])
                p += 1
    except (IndexError, struct.error):
        return None
    if p != end:
        return None
    return Transfer(*values), end


# the constructors each field takes on the fast path, in field order; a field in another
# encoding (or of another type) sends the frame down the generic path
_UINT_FIELD = b"\x40\x43\x52\x70"
_BOOL_FIELD = b"\x40\x41\x42"
_ALLOWED = (_UINT_FIELD, _UINT_FIELD, b"\x40\xa0", _UINT_FIELD, _BOOL_FIELD, _BOOL_FIELD, b"\x40", b"\x40",
            _BOOL_FIELD, _BOOL_FIELD, _BOOL_FIELD)  # fmt: skip
_SMALL_UINTS = tuple(UInt(i) for i in range(256))  # immutable, so shared
_CONSTANTS = {0x41: True, 0x42: False, 0x43: _SMALL_UINTS[0]}
