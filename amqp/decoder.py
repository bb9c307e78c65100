"""Decoding AMQP 1.0 values [1.6], [1.2]: `decode(data, pos)` returns
`(value, next_pos)`, `loads(data)` the one value that fills `data`.

Decoding is strict: unknown constructors, truncated values, counts that do
not fit their size and invalid UTF-8 all raise DecodeError, never anything
else. Described values whose descriptor is registered in DESCRIBED_DECODERS
(performatives, delivery states, termini, message sections: composite.py)
decode to their composite class. The encoding side is encoder.py; codec.py is
the one import for both.

Each reader takes (data, pos, depth) with pos just after the constructor and
returns (value, next_pos). `data` is bytes or memoryview.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from . import structs
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

MAX_NESTING = 64  # bounds recursion on hostile input
MAX_SAME_HASH = 32  # keys of one map that may share a Python hash

# Composite registry, filled by composite.py: descriptor (int code or Symbol
# name) -> callable(list_of_fields) -> object.
DESCRIBED_DECODERS: dict[Any, Callable[[Any], Any]] = {}


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
