"""Encoding and decoding of AMQP 1.0 values [1.6], [1.2]: the one import for both.

`encode(buf, value)` appends the smallest valid encoding of a value to a
bytearray (encoder.py); `decode(data, pos)` returns `(value, next_pos)`
(decoder.py). Decoding is strict: unknown constructors, truncated values,
counts that do not fit their size and invalid UTF-8 all raise DecodeError,
never anything else.

Described values whose descriptor is registered (performatives, delivery states,
termini, message sections) decode to their composite class; see composite.py.
"""

from __future__ import annotations

from .decoder import DESCRIBED_DECODERS, MAX_NESTING, MAX_SAME_HASH, decode, decode_at, loads
from .encoder import (
    ENCODERS,
    dumps,
    encode,
    encode_array,
    encode_binary,
    encode_bool,
    encode_byte,
    encode_char,
    encode_decimal,
    encode_described,
    encode_double,
    encode_float,
    encode_int,
    encode_list,
    encode_long,
    encode_map,
    encode_null,
    encode_short,
    encode_string,
    encode_symbol,
    encode_timestamp,
    encode_ubyte,
    encode_uint,
    encode_ulong,
    encode_ushort,
    encode_uuid,
)
from .errors import DecodeError

__all__ = [
    "DESCRIBED_DECODERS",
    "ENCODERS",
    "MAX_NESTING",
    "MAX_SAME_HASH",
    "DecodeError",
    "decode",
    "decode_at",
    "dumps",
    "encode",
    "encode_array",
    "encode_binary",
    "encode_bool",
    "encode_byte",
    "encode_char",
    "encode_decimal",
    "encode_described",
    "encode_double",
    "encode_float",
    "encode_int",
    "encode_list",
    "encode_long",
    "encode_map",
    "encode_null",
    "encode_short",
    "encode_string",
    "encode_symbol",
    "encode_timestamp",
    "encode_ubyte",
    "encode_uint",
    "encode_ulong",
    "encode_ushort",
    "encode_uuid",
    "loads",
]
