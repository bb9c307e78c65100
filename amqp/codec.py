"""Encoding and decoding of AMQP 1.0 values [1.6], [1.2].

`encode(buf, value)` appends the smallest valid encoding of a value to a
bytearray; `decode(data, pos)` returns `(value, next_pos)`. Decoding is strict:
unknown constructors, truncated values, counts that do not fit their size and
invalid UTF-8 all raise DecodeError, never anything else.

Described values whose descriptor is registered (performatives, delivery states,
termini, message sections) decode to their composite class; see composite.py.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from .errors import DecodeError
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

_u8 = struct.Struct(">B")
_u16 = struct.Struct(">H")
_u32 = struct.Struct(">I")
_u64 = struct.Struct(">Q")
_i8 = struct.Struct(">b")
_i16 = struct.Struct(">h")
_i32 = struct.Struct(">i")
_i64 = struct.Struct(">q")
_f32 = struct.Struct(">f")
_f64 = struct.Struct(">d")
_u8u8 = struct.Struct(">BB")
_u32u32 = struct.Struct(">II")

MAX_NESTING = 64  # bounds recursion on hostile input
MAX_SAME_HASH = 32  # keys of one map that may share a Python hash

# Composite registry, filled by composite.py: descriptor (int code or Symbol
# name) -> callable(list_of_fields) -> object.
DESCRIBED_DECODERS: dict[Any, Callable[[Any], Any]] = {}


# ---------------------------------------------------------------- encoding


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


# ---------------------------------------------------------------- decoding
#
# Each reader takes (data, pos, depth) with pos just after the constructor and
# returns (value, next_pos). `data` is bytes or memoryview.


def _need(data, pos: int, n: int) -> None:
    if pos + n > len(data):
        raise DecodeError("value truncated")


def _fixed(struct_: struct.Struct, wrap: Callable[[Any], Any] | None):
    size = struct_.size
    unpack = struct_.unpack_from

    def read(data, pos, depth):
        if pos + size > len(data):
            raise DecodeError("value truncated")
        v = unpack(data, pos)[0]
        return (wrap(v) if wrap else v), pos + size

    return read


def _const(value):
    def read(data, pos, depth):
        return value, pos

    return read


def _read_bool(data, pos, depth):
    _need(data, pos, 1)
    b = data[pos]
    if b > 1:
        raise DecodeError(f"boolean byte must be 0 or 1, not {b}")
    return b == 1, pos + 1


def _read_char(data, pos, depth):
    _need(data, pos, 4)
    cp = _u32.unpack_from(data, pos)[0]
    if cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
        raise DecodeError(f"invalid char code point {cp:#x}")
    return Char(chr(cp)), pos + 4


def _read_raw(size: int, wrap):
    def read(data, pos, depth):
        end = pos + size
        if end > len(data):
            raise DecodeError("value truncated")
        return wrap(bytes(data[pos:end])), end

    return read


def _read_uuid(data, pos, depth):
    end = pos + 16
    if end > len(data):
        raise DecodeError("value truncated")
    return uuid.UUID(bytes=bytes(data[pos:end])), end


def _variable(width: int, convert):
    if width == 1:

        def read(data, pos, depth):
            if pos >= len(data):
                raise DecodeError("value truncated")
            end = pos + 1 + data[pos]
            if end > len(data):
                raise DecodeError("value truncated")
            return convert(data[pos + 1 : end]), end
    else:

        def read(data, pos, depth):
            if pos + 4 > len(data):
                raise DecodeError("value truncated")
            end = pos + 4 + _u32.unpack_from(data, pos)[0]
            if end > len(data):
                raise DecodeError("value truncated")
            return convert(data[pos + 4 : end]), end

    return read


def _to_bytes(raw) -> bytes:
    return bytes(raw)


def _to_str(raw) -> str:
    try:
        return str(raw, "utf-8")
    except UnicodeDecodeError as e:
        raise DecodeError(f"invalid UTF-8 in string: {e.reason}") from None


def _to_symbol(raw) -> Symbol:
    try:
        return Symbol(str(raw, "ascii"))
    except UnicodeDecodeError:
        raise DecodeError("symbol is not ASCII") from None


def _compound_header(data, pos: int, width: int) -> tuple[int, int, int]:
    """Returns (count, body_start, end) of a list, map or array."""
    if width == 1:
        if pos + 2 > len(data):
            raise DecodeError("compound header truncated")
        size, count = data[pos], data[pos + 1]
        if size < 1:
            raise DecodeError("compound size smaller than its count field")
        start, end = pos + 2, pos + 1 + size
    else:
        if pos + 8 > len(data):
            raise DecodeError("compound header truncated")
        size, count = _u32u32.unpack_from(data, pos)
        if size < 4:
            raise DecodeError("compound size smaller than its count field")
        start, end = pos + 8, pos + 4 + size
    if end > len(data):
        raise DecodeError("compound value truncated")
    if count > end - start and count > 0:
        # each element takes at least one byte (except in arrays of null)
        raise DecodeError(f"count {count} does not fit in {end - start} bytes")
    return count, start, end


def _read_list(width: int):
    def read(data, pos, depth):
        if depth > MAX_NESTING:
            raise DecodeError("values nested too deeply")
        count, p, end = _compound_header(data, pos, width)
        items = []
        append = items.append
        for _ in range(count):
            if p >= end:
                raise DecodeError("list shorter than its count")
            v, p = decode_at(data, p, end, depth + 1)
            append(v)
        if p != end:
            raise DecodeError("list size does not match its elements")
        return items, end

    return read


def _read_map(width: int):
    def read(data, pos, depth):
        if depth > MAX_NESTING:
            raise DecodeError("values nested too deeply")
        count, p, end = _compound_header(data, pos, width)
        if count % 2:
            raise DecodeError("map with an odd number of elements")
        result = {}
        # Python's hashes of UUIDs (and so of described values holding them)
        # are not keyed: a peer can send thousands of keys with one hash and
        # make each insertion linear. Large maps count keys per hash.
        hashes: dict[int, int] | None = {} if count > 2 * MAX_SAME_HASH else None
        for _ in range(count // 2):
            if p >= end:
                raise DecodeError("map shorter than its count")
            k, p = decode_at(data, p, end, depth + 1)
            v, p = decode_at(data, p, end, depth + 1)
            try:
                if hashes is not None:
                    h = hash(k)
                    n = hashes[h] = hashes.get(h, 0) + 1
                    if n > MAX_SAME_HASH:
                        raise DecodeError("too many map keys with the same hash")
                if k in result:
                    raise DecodeError("map with a duplicate key")  # [1.6.23]
                result[k] = v
            except TypeError:
                raise DecodeError("map key of an unhashable type") from None
        if p != end:
            raise DecodeError("map size does not match its elements")
        return result, end

    return read


def _read_array(width: int):
    def read(data, pos, depth):
        if depth > MAX_NESTING:
            raise DecodeError("values nested too deeply")
        if width == 1:
            if pos + 2 > len(data):
                raise DecodeError("array header truncated")
            size, count = data[pos], data[pos + 1]
            p, end = pos + 2, pos + 1 + size
        else:
            if pos + 8 > len(data):
                raise DecodeError("array header truncated")
            size, count = _u32u32.unpack_from(data, pos)
            p, end = pos + 8, pos + 4 + size
        if end > len(data) or p > end:
            raise DecodeError("array truncated")
        if p >= end:
            raise DecodeError("array without an element constructor")
        descriptor = None
        if data[p] == 0x00:
            descriptor, p = decode_at(data, p + 1, end, depth + 1)
            _check_descriptor(descriptor)
            if p >= end:
                raise DecodeError("array without an element constructor")
        code = data[p]
        p += 1
        reader = _READERS[code]
        if reader is None or code == 0x00:
            raise DecodeError(f"invalid array element constructor 0x{code:02x}")
        if code == 0x40 and count > 0 and p != end:
            raise DecodeError("array of null with a body")
        if code == 0x40 and count > size:
            # nulls take no bytes: bound them by the array's size so that a
            # few bytes cannot ask for billions of items
            raise DecodeError(f"array of {count} nulls is larger than its size")
        if code != 0x40 and count > end - p:
            raise DecodeError(f"array count {count} does not fit in its size")
        items = []
        for _ in range(count):
            v, p = reader(data, p, depth + 1)
            if p > end:
                raise DecodeError("array element past the end of the array")
            if descriptor is not None:
                v = _described(descriptor, v)
            items.append(v)
        if p != end:
            raise DecodeError("array size does not match its elements")
        return Array(items, code=code, descriptor=descriptor), end

    return read


def _described(descriptor: Any, value: Any) -> Any:
    build = DESCRIBED_DECODERS.get(descriptor)
    if build is None:
        return Described(descriptor, value)
    return build(value)


def _check_descriptor(descriptor: Any) -> None:
    # other descriptor types are reserved [1.5]; a long or a string must not
    # pass for the ulong or symbol of a registered composite
    if type(descriptor) is not ULong and type(descriptor) is not Symbol:
        raise DecodeError("descriptor must be a ulong or a symbol")


def _read_described(data, pos, depth):
    if depth > MAX_NESTING:
        raise DecodeError("values nested too deeply")
    if pos >= len(data):
        raise DecodeError("described value truncated")
    descriptor, pos = decode_at(data, pos, len(data), depth + 1)
    _check_descriptor(descriptor)
    if pos >= len(data):
        raise DecodeError("described value truncated")
    value, pos = decode_at(data, pos, len(data), depth + 1)
    return _described(descriptor, value), pos


_READERS: list[Callable | None] = [None] * 256
_READERS[0x00] = _read_described
_READERS[0x40] = _const(None)
_READERS[0x41] = _const(True)
_READERS[0x42] = _const(False)
_READERS[0x56] = _read_bool
_READERS[0x50] = _fixed(_u8, UByte)
_READERS[0x60] = _fixed(_u16, UShort)
_READERS[0x70] = _fixed(_u32, UInt)
_READERS[0x52] = _fixed(_u8, UInt)
_READERS[0x43] = _const(UInt(0))
_READERS[0x80] = _fixed(_u64, ULong)
_READERS[0x53] = _fixed(_u8, ULong)
_READERS[0x44] = _const(ULong(0))
_READERS[0x51] = _fixed(_i8, Byte)
_READERS[0x61] = _fixed(_i16, Short)
_READERS[0x71] = _fixed(_i32, Int)
_READERS[0x54] = _fixed(_i8, Int)
_READERS[0x81] = _fixed(_i64, None)
_READERS[0x55] = _fixed(_i8, None)
_READERS[0x72] = _fixed(_f32, Float)
_READERS[0x82] = _fixed(_f64, None)
_READERS[0x74] = _read_raw(4, Decimal32)
_READERS[0x84] = _read_raw(8, Decimal64)
_READERS[0x94] = _read_raw(16, Decimal128)
_READERS[0x73] = _read_char
_READERS[0x83] = _fixed(_i64, Timestamp)
_READERS[0x98] = _read_uuid
_READERS[0xA0] = _variable(1, _to_bytes)
_READERS[0xB0] = _variable(4, _to_bytes)
_READERS[0xA1] = _variable(1, _to_str)
_READERS[0xB1] = _variable(4, _to_str)
_READERS[0xA3] = _variable(1, _to_symbol)
_READERS[0xB3] = _variable(4, _to_symbol)
_READERS[0x45] = _const(None)  # replaced below: list0 must be a fresh list
_READERS[0xC0] = _read_list(1)
_READERS[0xD0] = _read_list(4)
_READERS[0xC1] = _read_map(1)
_READERS[0xD1] = _read_map(4)
_READERS[0xE0] = _read_array(1)
_READERS[0xF0] = _read_array(4)


def _read_list0(data, pos, depth):
    return [], pos


_READERS[0x45] = _read_list0


def decode_at(data, pos: int, end: int, depth: int = 0) -> tuple[Any, int]:
    """Decodes one value at `pos` that must end by `end`."""
    if pos >= end:
        raise DecodeError("value truncated")
    reader = _READERS[data[pos]]
    if reader is None:
        raise DecodeError(f"invalid constructor 0x{data[pos]:02x}")
    value, pos = reader(data, pos + 1, depth)
    if pos > end:
        raise DecodeError("value runs past its container")
    return value, pos


def decode(data, pos: int = 0) -> tuple[Any, int]:
    """Decodes one value at `pos`; returns (value, position after it)."""
    try:
        return decode_at(data, pos, len(data))
    except (struct.error, IndexError, ValueError) as e:  # belt and braces
        raise DecodeError(f"malformed value: {e}") from None


def loads(data) -> Any:
    """Decodes exactly one value that fills `data`."""
    value, pos = decode(data)
    if pos != len(data):
        raise DecodeError(f"{len(data) - pos} trailing bytes after the value")
    return value
