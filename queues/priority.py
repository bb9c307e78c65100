"""A message's priority as the queues read it: the header's `priority`
field [3.2.1] when the publisher set it, else None.

RabbitMQ reads the field only when it is present in the encoded header
(`Header.priority` fills in the spec's default, 4, so it cannot tell an
absent field from a 4): a classic priority queue puts a message without
one at priority 0, a quorum queue counts it as normal. The header is the
first section when present, so this looks at a few bytes only.
"""

from __future__ import annotations

import struct

from amqp.decoder import decode_at
from amqp.errors import DecodeError

__all__ = ["header_priority"]

_HEADER = b"\x00\x53\x70"  # described by the header's code, smallulong 0x70
_NULL = 0x40


def header_priority(payload: bytes) -> int | None:
    """The explicit header priority of an encoded message, or None."""
    if payload[:3] != _HEADER:
        return None
    try:
        code = payload[3]
        if code == 0xC0:  # list8: size, count
            count, pos, end = payload[5], 6, 5 + payload[4]
        elif code == 0xD0:  # list32
            size, count = struct.unpack_from(">II", payload, 4)
            pos, end = 12, 8 + size
        else:  # list0: no field at all
            return None
        if count < 2:
            return None
        _, pos = decode_at(payload, pos, end)  # durable
        if payload[pos] == _NULL:
            return None
        value, _ = decode_at(payload, pos, end)
    except (DecodeError, IndexError, struct.error, ValueError):
        return None  # a malformed header is refused where the message is parsed, not here
    return value if isinstance(value, int) and not isinstance(value, bool) else None
