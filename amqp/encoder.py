"""Encoding AMQP 1.0 values [1.6]: `encode(buf, value)` appends the smallest
valid encoding of a value to a bytearray, `dumps(value)` returns it as bytes.

Composites (performatives, delivery states, termini, message sections) encode
themselves through `encode_into` (composite.py). The decoding side is
decoder.py; codec.py is the one import for both.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from . import structs
from .types import (
    Array,
    Byte,
    Char,
    Decimal32,
    Decimal64,
    Decimal128,
    Described,
    Float,
    Int,
    Long,
    Short,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
    UShort,
)

# the table's layouts, assigned and not imported (amqp/structs.py says why)
_u8 = structs.U8
_u16 = structs.U16
_u32 = structs.U32
_u64 = structs.U64
_i8 = structs.I8
_i16 = structs.I16
_i32 = structs.I32
_i64 = structs.I64
_f32 = structs.F32
_f64 = structs.F64
_u32u32 = structs.SIZE_COUNT32


def encode_null(buf: bytearray, v: Any) -> None:
    buf.append(0x40)


def encode_bool(buf: bytearray, v: Any) -> None:
    buf.append(0x41 if v else 0x42)


def encode_ubyte(buf: bytearray, v: int) -> None:
    if not 0 <= v <= 0xFF:
        raise ValueError(f"ubyte out of range: {v}")
    buf += b"\x50" + _u8.pack(v)


def encode_ushort(buf: bytearray, v: int) -> None:
    if not 0 <= v <= 0xFFFF:
        raise ValueError(f"ushort out of range: {v}")
    buf += b"\x60" + _u16.pack(v)


def encode_uint(buf: bytearray, v: int) -> None:
    if v == 0:
        buf.append(0x43)
    elif 0 < v < 256:
        buf += b"\x52" + _u8.pack(v)
    elif 0 < v <= 0xFFFFFFFF:
        buf += b"\x70" + _u32.pack(v)
    else:
        raise ValueError(f"uint out of range: {v}")


def encode_ulong(buf: bytearray, v: int) -> None:
    if v == 0:
        buf.append(0x44)
    elif 0 < v < 256:
        buf += b"\x53" + _u8.pack(v)
    elif 0 < v <= 0xFFFFFFFFFFFFFFFF:
        buf += b"\x80" + _u64.pack(v)
    else:
        raise ValueError(f"ulong out of range: {v}")


def encode_byte(buf: bytearray, v: int) -> None:
    buf += b"\x51" + _i8.pack(v)


def encode_short(buf: bytearray, v: int) -> None:
    buf += b"\x61" + _i16.pack(v)


def encode_int(buf: bytearray, v: int) -> None:
    if -128 <= v <= 127:
        buf += b"\x54" + _i8.pack(v)
    else:
        buf += b"\x71" + _i32.pack(v)


def encode_long(buf: bytearray, v: int) -> None:
    if -128 <= v <= 127:
        buf += b"\x55" + _i8.pack(v)
    elif -(1 << 63) <= v < (1 << 63):
        buf += b"\x81" + _i64.pack(v)
    elif v < (1 << 64):  # a plain int too big for long fits ulong
        buf += b"\x80" + _u64.pack(v)
    else:
        raise ValueError(f"integer out of range: {v}")


def encode_float(buf: bytearray, v: float) -> None:
    buf += b"\x72" + _f32.pack(v)


def encode_double(buf: bytearray, v: float) -> None:
    buf += b"\x82" + _f64.pack(v)


def encode_decimal(buf: bytearray, v: bytes) -> None:
    buf.append({4: 0x74, 8: 0x84, 16: 0x94}[len(v)])
    buf += v


def encode_char(buf: bytearray, v: str) -> None:
    buf += b"\x73" + _u32.pack(ord(v))


def encode_timestamp(buf: bytearray, v: int) -> None:
    buf += b"\x83" + _i64.pack(v)


def encode_uuid(buf: bytearray, v: uuid.UUID) -> None:
    buf += b"\x98" + v.bytes


def _encode_variable(buf: bytearray, raw: bytes, small: int, large: int) -> None:
    n = len(raw)
    if n < 256:
        buf.append(small)
        buf.append(n)
    else:
        buf.append(large)
        buf += _u32.pack(n)
    buf += raw


def encode_binary(buf: bytearray, v: bytes) -> None:
    _encode_variable(buf, v, 0xA0, 0xB0)


def encode_string(buf: bytearray, v: str) -> None:
    _encode_variable(buf, v.encode("utf-8"), 0xA1, 0xB1)


def encode_symbol(buf: bytearray, v: str) -> None:
    _encode_variable(buf, v.encode("ascii"), 0xA3, 0xB3)


def _encode_compound(buf: bytearray, body: bytes | bytearray, count: int, small: int, large: int) -> None:
    # size counts the count field plus the body [1.6.22]
    if len(body) + 1 < 256 and count < 256:
        buf += bytes((small, len(body) + 1, count))
    else:
        buf.append(large)
        buf += _u32u32.pack(len(body) + 4, count)
    buf += body


def encode_list(buf: bytearray, v: list) -> None:
    if not v:
        buf.append(0x45)
        return
    body = bytearray()
    for item in v:
        encode(body, item)
    _encode_compound(buf, body, len(v), 0xC0, 0xD0)


def encode_map(buf: bytearray, v: dict) -> None:
    body = bytearray()
    for key, item in v.items():
        encode(body, key)
        encode(body, item)
    _encode_compound(buf, body, 2 * len(v), 0xC1, 0xD1)


def encode_described(buf: bytearray, v: Described) -> None:
    buf.append(0x00)
    descriptor = v.descriptor
    # a descriptor is a ulong or a symbol [1.5]: plain int and str stand for those
    if type(descriptor) is int:
        descriptor = ULong(descriptor)
    elif type(descriptor) is str:
        descriptor = Symbol(descriptor)
    encode(buf, descriptor)
    encode(buf, v.value)


# Array elements share one constructor [1.6.24]: per element type, the
# constructor and a packer for the narrow and wide forms.
def _array_element_code(items: Array) -> int:
    if items.code is not None:
        return items.code
    if not items:
        return 0x40
    first = items[0]
    if isinstance(first, bool):
        return 0x56
    if isinstance(first, (Char, Decimal32, Decimal64, Decimal128)):  # str and bytes subclasses
        return next(code for cls, code in _FIXED_ARRAY_CODES if isinstance(first, cls))
    if isinstance(first, (Symbol, str, bytes, bytearray)):
        raw = [_variable_raw(x) for x in items]
        wide = any(len(r) > 255 for r in raw)
        base = 0xA3 if isinstance(first, Symbol) else 0xA1 if isinstance(first, str) else 0xA0
        return base + 0x10 if wide else base
    if isinstance(first, UInt):
        return 0x52 if all(0 <= x < 256 for x in items) else 0x70
    if isinstance(first, ULong):
        return 0x53 if all(0 <= x < 256 for x in items) else 0x80
    if isinstance(first, Int):
        return 0x54 if all(-128 <= x < 128 for x in items) else 0x71
    for cls, code in _FIXED_ARRAY_CODES:
        if isinstance(first, cls):
            return code
    if isinstance(first, int):
        return 0x55 if all(-128 <= x < 128 for x in items) else 0x81
    if isinstance(first, Array):  # before list: an Array is a list
        return 0xF0
    if isinstance(first, list):
        return 0xD0
    if isinstance(first, dict):
        return 0xD1
    raise TypeError(f"cannot encode an array of {type(first).__name__}")


def _variable_raw(x: Any) -> bytes:
    if isinstance(x, str):
        return x.encode("ascii" if isinstance(x, Symbol) else "utf-8")
    return bytes(x)


def _encode_array_element(body: bytearray, code: int, x: Any) -> None:
    """Appends one element without its constructor."""
    tmp = bytearray()
    if code in (0xA0, 0xA1, 0xA3):
        raw = _variable_raw(x)
        body.append(len(raw))
        body += raw
        return
    if code in (0xB0, 0xB1, 0xB3):
        raw = _variable_raw(x)
        body += _u32.pack(len(raw))
        body += raw
        return
    if code == 0x56:
        body.append(1 if x else 0)
        return
    if code in _ELEMENT_PACKERS:
        body += _ELEMENT_PACKERS[code].pack(x)
        return
    if code in (0x74, 0x84, 0x94, 0x98):
        body += x.bytes if isinstance(x, uuid.UUID) else bytes(x)
        return
    if code == 0x73:
        body += _u32.pack(ord(x))
        return
    if code in (0xD0, 0xD1, 0xF0):
        # compound elements always use the 32-bit form inside an array
        if code == 0xF0:
            encode_array(tmp, x, force_wide=True)
        elif code == 0xD0:
            inner = bytearray()
            for item in x:
                encode(inner, item)
            tmp.append(0xD0)
            tmp += _u32u32.pack(len(inner) + 4, len(x))
            tmp += inner
        else:
            inner = bytearray()
            for k, item in x.items():
                encode(inner, k)
                encode(inner, item)
            tmp.append(0xD1)
            tmp += _u32u32.pack(len(inner) + 4, 2 * len(x))
            tmp += inner
        body += tmp[1:]
        return
    raise TypeError(f"cannot encode array element with constructor 0x{code:02x}")


def encode_array(buf: bytearray, v: Array, force_wide: bool = False) -> None:
    descriptor = getattr(v, "descriptor", None)
    if descriptor is not None:
        # a decoded array of described values holds Described items: the
        # descriptor goes once before the constructor, the items carry values
        v = Array(
            [x.value if isinstance(x, Described) and x.descriptor == descriptor else x for x in v],
            code=v.code,
            descriptor=descriptor,
        )
    code = _array_element_code(v) if isinstance(v, Array) else _array_element_code(Array(v))
    # compound elements are always written in their 32-bit form inside an array
    code = _WIDE_COMPOUND.get(code, code)
    body = bytearray()
    if descriptor is not None:
        body.append(0x00)
        encode(body, descriptor)
    body.append(code)
    if code != 0x40:
        for x in v:
            _encode_array_element(body, code, x)
    if not force_wide and len(body) + 1 < 256 and len(v) < 256:
        buf += bytes((0xE0, len(body) + 1, len(v)))
    else:
        buf.append(0xF0)
        buf += _u32u32.pack(len(body) + 4, len(v))
    buf += body


_WIDE_COMPOUND = {0xC0: 0xD0, 0xC1: 0xD1, 0xE0: 0xF0}

_ELEMENT_PACKERS = {
    0x50: _u8, 0x60: _u16, 0x52: _u8, 0x70: _u32, 0x53: _u8, 0x80: _u64,
    0x51: _i8, 0x61: _i16, 0x54: _i8, 0x71: _i32, 0x55: _i8, 0x81: _i64,
    0x72: _f32, 0x82: _f64, 0x83: _i64,
}  # fmt: skip

_FIXED_ARRAY_CODES = (
    (UByte, 0x50), (UShort, 0x60), (Byte, 0x51), (Short, 0x61), (Long, 0x81),
    (Timestamp, 0x83), (Float, 0x72), (float, 0x82), (Char, 0x73),
    (Decimal32, 0x74), (Decimal64, 0x84), (Decimal128, 0x94), (uuid.UUID, 0x98),
)  # fmt: skip

ENCODERS: dict[type, Callable[[bytearray, Any], None]] = {
    type(None): encode_null,
    bool: encode_bool,
    UByte: encode_ubyte,
    UShort: encode_ushort,
    UInt: encode_uint,
    ULong: encode_ulong,
    Byte: encode_byte,
    Short: encode_short,
    Int: encode_int,
    Long: encode_long,
    int: encode_long,
    Float: encode_float,
    float: encode_double,
    Decimal32: encode_decimal,
    Decimal64: encode_decimal,
    Decimal128: encode_decimal,
    Char: encode_char,
    Timestamp: encode_timestamp,
    uuid.UUID: encode_uuid,
    bytes: encode_binary,
    bytearray: encode_binary,
    memoryview: lambda buf, v: encode_binary(buf, bytes(v)),
    str: encode_string,
    Symbol: encode_symbol,
    list: encode_list,
    tuple: encode_list,
    dict: encode_map,
    Array: encode_array,
    Described: encode_described,
}


def encode(buf: bytearray, value: Any) -> None:
    """Appends the encoding of `value`; composites encode themselves."""
    encoder = ENCODERS.get(type(value))
    if encoder is not None:
        encoder(buf, value)
        return
    encode_self = getattr(value, "encode_into", None)
    if encode_self is not None:
        encode_self(buf)
        return
    for cls, fn in ENCODERS.items():  # subclasses of the types above
        if isinstance(value, cls) and cls is not type(None):
            fn(buf, value)
            return
    raise TypeError(f"cannot encode {type(value).__name__} as an AMQP value")


def dumps(value: Any) -> bytes:
    buf = bytearray()
    encode(buf, value)
    return bytes(buf)
