"""Python-qpid-proton's types mapped one to one onto Warren's (`to_proton`,
`from_proton`), and encoding/decoding through Proton, for the cross-checks."""

from __future__ import annotations

import uuid

import proton

# the strategies live next to this file; conftest.py puts this directory on sys.path
from codec_strategies import (
    PRIMITIVES,
    RESTRICTED,
    composite_strategies,
    nested_values,
    symbols,
    unicode_chars,
)
from hypothesis import strategies as st
from proton import Data

from amqp import definitions as d
from amqp.composite import Composite
from amqp.types import (
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

# ------------------------------------------------------------------ type mapping

# Warren type -> (Proton type, Proton array element type)
_TO_PROTON = {
    UByte: (proton.ubyte, Data.UBYTE),
    UShort: (proton.ushort, Data.USHORT),
    UInt: (proton.uint, Data.UINT),
    ULong: (proton.ulong, Data.ULONG),
    Byte: (proton.byte, Data.BYTE),
    Short: (proton.short, Data.SHORT),
    Int: (proton.int32, Data.INT),
    int: (int, Data.LONG),
    Timestamp: (proton.timestamp, Data.TIMESTAMP),
    Float: (proton.float32, Data.FLOAT),
    float: (float, Data.DOUBLE),
    Char: (proton.char, Data.CHAR),
    Symbol: (proton.symbol, Data.SYMBOL),
    str: (str, Data.STRING),
    bytes: (bytes, Data.BINARY),
    bool: (bool, Data.BOOL),
    uuid.UUID: (lambda u: u, Data.UUID),
    Decimal32: (lambda v: proton.decimal32(int.from_bytes(v, "big")), Data.DECIMAL32),
    Decimal64: (lambda v: proton.decimal64(int.from_bytes(v, "big")), Data.DECIMAL64),
    Decimal128: (lambda v: proton.decimal128(bytes(v)), Data.DECIMAL128),
    list: (None, Data.LIST),
    dict: (None, Data.MAP),
    Array: (None, Data.ARRAY),
}

_FROM_PROTON = {
    proton.ubyte: UByte,
    proton.ushort: UShort,
    proton.uint: UInt,
    proton.ulong: ULong,
    proton.byte: Byte,
    proton.short: Short,
    proton.int32: Int,
    proton.timestamp: Timestamp,
    proton.float32: Float,
    proton.char: Char,
    proton.symbol: Symbol,
    proton.decimal32: lambda v: Decimal32(int(v).to_bytes(4, "big")),
    proton.decimal64: lambda v: Decimal64(int(v).to_bytes(8, "big")),
    proton.decimal128: lambda v: Decimal128(bytes(v)),
}


def to_proton(v):
    """A Warren value as the Proton object that encodes the same AMQP value."""
    if v is None:
        return None
    if isinstance(v, Composite) or type(v) in RESTRICTED:
        return to_proton(as_described(v))
    if isinstance(v, Array):
        descriptor = proton.UNDESCRIBED if v.descriptor is None else to_proton(v.descriptor)
        items = [x.value if isinstance(x, Described) else x for x in v]
        kind = _TO_PROTON[type(items[0])][1] if items else Data.NULL
        return proton.Array(descriptor, kind, *[to_proton(x) for x in items])
    if isinstance(v, list):
        return [to_proton(x) for x in v]
    if isinstance(v, dict):
        return {to_proton(k): to_proton(x) for k, x in v.items()}
    if isinstance(v, Described):
        return proton.Described(to_proton(v.descriptor), to_proton(v.value))
    return _TO_PROTON[type(v)][0](v)


def from_proton(v):
    """A value Proton decoded, in Warren's types."""
    t = type(v)
    if t in _FROM_PROTON:
        return _FROM_PROTON[t](v)
    if t is memoryview:  # a binary inside a live Message
        return bytes(v)
    if isinstance(v, proton.Array):
        descriptor = None if v.descriptor is proton.UNDESCRIBED else from_proton(v.descriptor)
        items = [from_proton(x) for x in v.elements]
        if descriptor is not None:
            items = [Described(descriptor, x) for x in items]
        return Array(items, descriptor=descriptor)
    if isinstance(v, proton.Described):
        return Described(from_proton(v.descriptor), from_proton(v.value))
    if isinstance(v, list):
        return [from_proton(x) for x in v]
    if isinstance(v, dict):
        return {from_proton(k): from_proton(x) for k, x in v.items()}
    assert v is None or t in (bool, int, float, str, bytes, uuid.UUID), t
    return v


def as_described(v):
    """Composites and sections as the generic described values they are on the
    wire: a ulong descriptor and the list of fields (defaults as null,
    trailing nulls trimmed) or the section's value."""
    if isinstance(v, Composite):
        fields = []
        for f in v.FIELDS:
            x = getattr(v, f.name)
            fields.append(None if x is None or (f.default is not None and x == f.default) else as_described(x))
        while fields and fields[-1] is None:
            fields.pop()
        return Described(ULong(v.CODE), fields)
    if type(v) in RESTRICTED:
        if isinstance(v, dict):
            symbol_keys = "annotations" in v.NAME or "footer" in v.NAME
            inner = {Symbol(k) if type(k) is str and symbol_keys else k: x for k, x in v.items()}
        elif isinstance(v, bytes):
            inner = bytes(v)
        elif isinstance(v, list):
            inner = list(v)
        else:
            inner = v.value
        return Described(ULong(v.CODE), as_described(inner))
    if isinstance(v, Array):
        return Array([as_described(x) for x in v], descriptor=v.descriptor)
    if isinstance(v, list):
        return [as_described(x) for x in v]
    if isinstance(v, dict):
        return {as_described(k): as_described(x) for k, x in v.items()}
    if isinstance(v, Described):
        return Described(v.descriptor, as_described(v.value))
    return v


def proton_decode(data: bytes):
    pd = Data()
    assert pd.decode(data) == len(data)
    return _own(pd.get_object())


def _own(v):
    """Copies the binaries Proton returns as views of its own buffers, which
    outlive the Data object only as dangling memory."""
    if isinstance(v, memoryview):
        return bytes(v)
    if isinstance(v, proton.Array):
        return proton.Array(v.descriptor, v.type, *[_own(x) for x in v.elements])
    if isinstance(v, proton.Described):
        return proton.Described(_own(v.descriptor), _own(v.value))
    if isinstance(v, list):
        return [_own(x) for x in v]
    if isinstance(v, dict):
        return {_own(k): _own(x) for k, x in v.items()}
    return v


def proton_encode(obj) -> bytes:
    pd = Data()
    pd.put_object(obj)
    return pd.encode()


# ------------------------------------------------------------------ strategies

# The same values as the round trips, but for what Proton's Python binding
# cannot represent: map keys that are described values (unhashable) or
# binaries (returned as memoryviews, unhashable); and a described value whose
# value is itself described (0x00 d1 0x00 d2 v), which Proton decodes as
# Described(d2, v), losing d1, although it encodes it as Warren does.
_keys = st.one_of(
    *[s for name, s in PRIMITIVES.items() if name not in ("binary", "string", "symbol")],
    st.text(unicode_chars, max_size=30),
    symbols,
)
_scalars = st.one_of(_keys, st.binary(max_size=30), st.binary(min_size=250, max_size=300))
values = nested_values(_scalars, _keys, described_in_described=False)
COMPOSITES, SECTIONS = composite_strategies(values, st.one_of(symbols, PRIMITIVES["ulong"]))
SECTIONS["AmqpValue"] = values.filter(lambda v: type(v) is not Described).map(d.AmqpValue)
