"""Primitives and compounds in the AMQP 1.0 codec [1.6]: round trips and exact bytes.

Every primitive in every width, nested lists, maps and arrays, arrays of
arrays and of described values, and described values with unknown descriptors
go through `dumps`/`loads` and must come back with the same value *and* the
same AMQP type (see `canon` in codec_strategies.py). The encoder must pick the
narrowest encoding (checked byte for byte on a table of values, with the
switches from 8-bit to 32-bit forms); the decoder must accept the wider ones
too, and every truncation of those fixed examples must be a DecodeError.

Composites and message sections are in test_codec_composites.py, malformed
input in test_codec_malformed.py.
"""

from __future__ import annotations

import math
import uuid

import pytest
from codec_strategies import (
    FEW,
    MEDIUM,
    PRIMITIVES,
    SETTINGS,
    _assert_every_cut_fails,
    arrays,
    canon,
    map_keys,
    roundtrip,
    u8,
    u32,
    u64,
    unknown_descriptors,
    values,
)
from hypothesis import given
from hypothesis import strategies as st

from amqp import codec
from amqp import definitions as d
from amqp.structs import F32, I32, I64
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

# ------------------------------------------------------------------ primitives


def expected_constructors(v) -> set[int]:
    """The one constructor the encoder must choose for a scalar."""
    t = type(v)

    def var(raw, small, large):
        return {small if len(raw) < 256 else large}

    if v is None:
        return {0x40}
    if t is bool:
        return {0x41 if v else 0x42}
    if t is UInt:
        return {0x43 if v == 0 else 0x52 if v < 256 else 0x70}
    if t is ULong:
        return {0x44 if v == 0 else 0x53 if v < 256 else 0x80}
    if t is Int:
        return {0x54 if -128 <= v <= 127 else 0x71}
    if t is int:
        return {0x55 if -128 <= v <= 127 else 0x81}
    if t is bytes:
        return var(v, 0xA0, 0xB0)
    if t is str:
        return var(v.encode(), 0xA1, 0xB1)
    if t is Symbol:
        return var(v.encode(), 0xA3, 0xB3)
    fixed = {
        UByte: 0x50, UShort: 0x60, Byte: 0x51, Short: 0x61, Float: 0x72, float: 0x82,
        Decimal32: 0x74, Decimal64: 0x84, Decimal128: 0x94, Char: 0x73, Timestamp: 0x83, uuid.UUID: 0x98,
    }  # fmt: skip
    return {fixed[t]}


def alternative_encodings(v) -> list[bytes]:
    """Every valid encoding of a scalar, narrow and wide."""
    t = type(v)
    out = [codec.dumps(v)]
    if t is bool:
        out.append(b"\x56" + (b"\x01" if v else b"\x00"))
    elif t is UInt:
        out.append(b"\x70" + u32(v))
        if v < 256:
            out.append(b"\x52" + u8(v))
    elif t is ULong:
        out.append(b"\x80" + u64(v))
        if v < 256:
            out.append(b"\x53" + u8(v))
    elif t is Int:
        out.append(b"\x71" + I32.pack(v))
    elif t is int:
        out.append(b"\x81" + I64.pack(v))
    elif t in (bytes, str, Symbol):
        raw = v if t is bytes else v.encode()
        small, large = {bytes: (0xA0, 0xB0), str: (0xA1, 0xB1), Symbol: (0xA3, 0xB3)}[t]
        out.append(bytes([large]) + u32(len(raw)) + raw)
        if len(raw) < 256:
            out.append(bytes([small, len(raw)]) + raw)
    return out


@pytest.mark.parametrize("name", list(PRIMITIVES))
@MEDIUM
@given(data=st.data())
def test_primitive_roundtrip_narrowest_and_wide(name, data):
    v = data.draw(PRIMITIVES[name])
    encoded = roundtrip(v)
    assert encoded[0] in expected_constructors(v), (v, encoded.hex())
    for alt in alternative_encodings(v):
        assert canon(codec.loads(alt)) == canon(v), alt.hex()


@SETTINGS
@given(values)
def test_nested_values_roundtrip(v):
    roundtrip(v)


@MEDIUM
@given(st.lists(values, max_size=8))
def test_lists_in_both_widths(items):
    body = b"".join(codec.dumps(x) for x in items)
    encodings = [codec.dumps(items), b"\xd0" + u32(len(body) + 4) + u32(len(items)) + body]
    if len(body) + 1 < 256:
        encodings.append(bytes([0xC0, len(body) + 1, len(items)]) + body)
    if not items:
        encodings.append(b"\x45")
    for enc in encodings:
        assert canon(codec.loads(enc)) == canon(items), enc.hex()


@MEDIUM
@given(st.dictionaries(map_keys, values, max_size=6))
def test_maps_in_both_widths(m):
    body = b"".join(codec.dumps(k) + codec.dumps(v) for k, v in m.items())
    encodings = [codec.dumps(m), b"\xd1" + u32(len(body) + 4) + u32(2 * len(m)) + body]
    if len(body) + 1 < 256:
        encodings.append(bytes([0xC1, len(body) + 1, 2 * len(m)]) + body)
    for enc in encodings:
        assert canon(codec.loads(enc)) == canon(m), enc.hex()


@MEDIUM
@given(arrays(values))
def test_arrays_roundtrip_and_both_widths(a):
    data = roundtrip(a)
    back = codec.loads(data)
    assert isinstance(back, Array)
    # re-encoding the decoded array (with its recorded element constructor) is stable
    assert canon(codec.loads(codec.dumps(back))) == canon(a)
    if data[0] == 0xE0:  # the same array in its 32-bit form
        size, count, body = data[1], data[2], data[3:]
        wide = b"\xf0" + u32(size + 3) + u32(count) + body
        assert canon(codec.loads(wide)) == canon(a)


@FEW
@given(st.lists(arrays(), min_size=1, max_size=4))
def test_arrays_of_arrays(inner):
    data = roundtrip(Array(inner))
    assert data[0] in (0xE0, 0xF0)
    ctor = data[3] if data[0] == 0xE0 else data[9]
    assert ctor == 0xF0


@MEDIUM
@given(unknown_descriptors, st.sampled_from(["symbol", "uint", "string", "long", "binary", "double"]), st.data())
def test_arrays_of_described_values(descriptor, kind, data):
    items = data.draw(st.lists(PRIMITIVES[kind], max_size=5))
    a = Array(items, descriptor=descriptor)
    encoded = codec.dumps(a)
    back = codec.loads(encoded)
    assert canon(back.descriptor) == canon(descriptor)
    assert [canon(x) for x in back] == [canon(Described(descriptor, x)) for x in items]
    assert codec.dumps(back) == encoded  # the decoded form encodes the same


@MEDIUM
@given(unknown_descriptors, values)
def test_described_with_unknown_descriptor(descriptor, v):
    data = roundtrip(Described(descriptor, v))
    assert data[0] == 0x00


def test_nan_payloads_and_signed_zero():
    for v in (float("nan"), float("inf"), float("-inf"), -0.0, 0.0, 5e-324, 1.7976931348623157e308):
        roundtrip(v)
    for v in (float("nan"), float("inf"), float("-inf"), -0.0, 0.0, F32.unpack(b"\x00\x00\x00\x01")[0]):
        roundtrip(Float(v))
    assert codec.dumps(-0.0) == b"\x82\x80" + bytes(7)
    assert math.isnan(codec.loads(b"\x72\x7f\xc0\x00\x00"))


def test_memoryview_input():
    v = {Symbol("a"): ["x", b"y", Symbol("z"), UInt(7), 1.5], "k": Array([Symbol("s")])}
    data = codec.dumps(v)
    assert canon(codec.loads(memoryview(data))) == canon(v)
    assert canon(codec.decode(memoryview(b"\x00" + data), 1)[0]) == canon(v)


# ------------------------------------------------------------------ narrowest encodings, exact bytes

NARROWEST = [
    (None, "40"),
    (True, "41"),
    (False, "42"),
    (UByte(0), "5000"),
    (UByte(255), "50ff"),
    (UShort(256), "600100"),
    (UInt(0), "43"),
    (UInt(1), "5201"),
    (UInt(255), "52ff"),
    (UInt(256), "7000000100"),
    (UInt(0xFFFFFFFF), "70ffffffff"),
    (ULong(0), "44"),
    (ULong(255), "53ff"),
    (ULong(256), "800000000000000100"),
    (Byte(-1), "51ff"),
    (Short(-2), "61fffe"),
    (Int(0), "5400"),
    (Int(127), "547f"),
    (Int(-128), "5480"),
    (Int(128), "7100000080"),
    (Int(-129), "71ffffff7f"),
    (0, "5500"),
    (127, "557f"),
    (-128, "5580"),
    (128, "810000000000000080"),
    (-129, "81ffffffffffffff7f"),
    (Float(1.5), "723fc00000"),
    (1.5, "823ff8000000000000"),
    (Decimal32(b"\x01\x02\x03\x04"), "7401020304"),
    (Decimal64(bytes(range(8))), "840001020304050607"),
    (Decimal128(bytes(range(16))), "94" + bytes(range(16)).hex()),
    (Char("a"), "7300000061"),
    (Char("\U0001f600"), "730001f600"),
    (Timestamp(1), "830000000000000001"),
    (uuid.UUID(int=1), "98" + "00" * 15 + "01"),
    (b"", "a000"),
    (b"x" * 255, "a0ff" + "78" * 255),
    (b"x" * 256, "b000000100" + "78" * 256),
    ("", "a100"),
    ("é" * 127 + "x", "a1ff" + "c3a9" * 127 + "78"),  # 255 UTF-8 bytes
    ("é" * 128, "b100000100" + "c3a9" * 128),  # 128 chars but 256 bytes
    (Symbol(""), "a300"),
    (Symbol("s" * 255), "a3ff" + "73" * 255),
    (Symbol("s" * 256), "b300000100" + "73" * 256),
    ([], "45"),
    ([None], "c0020140"),
    ([None] * 254, "c0fffe" + "40" * 254),
    ([None] * 255, "d000000103000000ff" + "40" * 255),
    ({}, "c10100"),
    ({Symbol("a"): None}, "c10502a3016140"),
    ({None: None}, "c103024040"),
    (Array([]), "e0020040"),
    (Array([Symbol("a")]), "e00401a30161"),
    (Array([Symbol("a" * 256)]), "f0" + "00000109" + "00000001" + "b3" + "00000100" + "61" * 256),
    (Array([Char("a")]), "e006017300000061"),
    (Array([Decimal32(b"\x01\x02\x03\x04")]), "e006017401020304"),
    (Array([UInt(1), UInt(255)]), "e0040252" + "01ff"),
    (Array([UInt(1), UInt(256)]), "e00a0270" + "00000001" + "00000100"),
    (Array([ULong(0)]), "e003015300"),
    (Array([Int(-128)]), "e003015480"),
    (Array([Int(128)]), "e006017100000080"),
    (Array([5]), "e003015505"),
    (Array([True, False]), "e00402560100"),
    (Array([[]]), "e00a01d0" + "00000004" + "00000000"),
    (Array([Array([Symbol("a")])]), "e00d01f0" + "00000007" + "00000001" + "a30161"),
    (Described(ULong(0x1234), None), "00" + "800000000000001234" + "40"),
    (Described(Symbol("x:y"), 1), "00a303783a795501"),
    (Described(7, None), "00530740"),  # a plain int descriptor is a ulong [1.5]
]


@pytest.mark.parametrize(("value", "hexed"), NARROWEST, ids=[f"{i}" for i in range(len(NARROWEST))])
def test_narrowest_encoding(value, hexed):
    assert codec.dumps(value).hex() == hexed
    if isinstance(value, Described) and type(value.descriptor) is int:
        value = Described(ULong(value.descriptor), value.value)
    assert canon(codec.loads(bytes.fromhex(hexed))) == canon(value)


def test_array_body_boundary_switches_to_array32():
    # e0 size count ctor + n one-byte elements: size = 2 + n must stay below 256
    fits = Array([Byte(1)] * 253)
    assert codec.dumps(fits)[:4] == bytes([0xE0, 255, 253, 0x51])
    wide = Array([Byte(1)] * 254)
    assert codec.dumps(wide)[:10] == b"\xf0" + u32(4 + 1 + 254) + u32(254) + b"\x51"
    for a in (fits, wide):
        assert codec.loads(codec.dumps(a)) == a


def test_map_boundary_switches_to_map32():
    small = {UInt(i): None for i in range(1, 127)}  # 126 * (2 + 1) + 1 = 379 > 255
    assert codec.dumps(small)[0] == 0xD1
    m = {ULong(i): None for i in range(1, 64)}  # 63 * 3 + 1 = 190
    assert codec.dumps(m)[:3] == bytes([0xC1, 190, 126])


WIDER = [
    ("7000000001", UInt(1)),
    ("5200", UInt(0)),
    ("800000000000000001", ULong(1)),
    ("5300", ULong(0)),
    ("71000000ff", Int(255)),
    ("7100000001", Int(1)),
    ("810000000000000001", 1),
    ("5601", True),
    ("5600", False),
    ("b00000000178", b"x"),
    ("b10000000178", "x"),
    ("b30000000178", Symbol("x")),
    ("c00100", []),
    ("d00000000400000000", []),
    ("d0000000050000000140", [None]),
    ("d10000000400000000", {}),
    ("d1000000060000000240" + "40", {None: None}),
    ("f00000000500000000a3", Array([])),
    ("f00000000a00000001b30000000161", Array([Symbol("a")])),
    ("e00701b30000000161", Array([Symbol("a")])),
    ("e006017000000001", Array([UInt(1)])),
    ("e00a0180" + "0000000000000001", Array([ULong(1)])),
    ("e0060171" + "00000001", Array([Int(1)])),
    ("e00401c10100", Array([{}])),  # a map8 element
    ("e00401c00100", Array([[]])),  # a list8 element
    ("00 80 0000000000001234 40", Described(ULong(0x1234), None)),
    ("00 53 10 d0 00000007 00000001 a1 01 63", d.Open(container_id="c")),
    ("00 a3 0e" + b"amqp:open:list".hex() + "c00401a10163", d.Open(container_id="c")),
    ("00 80 0000000000000010 c00401a10163", d.Open(container_id="c")),
    ("00 53 10 c0 05 02 a1 01 63 40", d.Open(container_id="c")),
    (
        "00 53 11 c0 0f 05 40 70 00000001 43 5200 70 ffffffff",
        d.Begin(next_outgoing_id=UInt(1), incoming_window=UInt(0), outgoing_window=UInt(0)),
    ),
    ("00 53 14 c0 06 01 70 00000000", d.Transfer(handle=UInt(0))),
    ("00 53 24 40", d.Accepted()),  # a null list body is an empty list
    ("00 53 24 c00100", d.Accepted()),
    ("00 53 24 d000000004 00000000", d.Accepted()),
    ("00 53 17 c0 04 03 40 40 40", d.End()),  # trailing nulls for fields of a later version
]


@pytest.mark.parametrize(("hexed", "expected"), WIDER, ids=[f"{i}" for i in range(len(WIDER))])
def test_decoder_accepts_wider_encodings(hexed, expected):
    assert canon(codec.loads(bytes.fromhex(hexed.replace(" ", "")))) == canon(expected)


def test_array_decoded_from_narrow_compound_elements_reencodes():
    # regression: the recorded element constructor 0xc0 had no encoder
    for hexed, expected in (("e00401c00100", [[]]), ("e00401c10100", [{}])):
        a = codec.loads(bytes.fromhex(hexed))
        assert a == expected
        assert codec.loads(codec.dumps(a)) == expected


@pytest.mark.parametrize("hexed", [h for _, h in NARROWEST] + [h.replace(" ", "") for h, _ in WIDER])
def test_truncated_fixed_examples(hexed):
    _assert_every_cut_fails(bytes.fromhex(hexed))
