"""Round trips and strictness of the AMQP 1.0 codec [1.6] and composites [1.3].

Every primitive in every width, nested compounds, arrays, described values with
unknown descriptors and every composite of definitions.py go through
`dumps`/`loads` and must come back with the same value *and* the same AMQP type
(see `canon`). The encoder must pick the narrowest encoding; the decoder must
accept the wider ones too, and must turn every malformed input into DecodeError
and nothing else.

The strategies here are reused by test_proton_crosscheck.py.
"""

from __future__ import annotations

import math
import struct
import time
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node.amqp import codec
from node.amqp import definitions as d
from node.amqp.composite import Composite
from node.amqp.errors import DecodeError
from node.amqp.types import (
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


def _settings(n):
    return settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.too_slow])


SETTINGS = _settings(200)
MEDIUM = _settings(100)
# one run per primitive, composite or section class: fewer examples each, many classes
PER_CLASS = _settings(40)
FEW = _settings(40)

u8 = struct.Struct(">B").pack
u32 = struct.Struct(">I").pack
u64 = struct.Struct(">Q").pack


# ------------------------------------------------------------------ comparing

RESTRICTED = tuple(cls for cls in d.SECTIONS if not issubclass(cls, Composite))


def canon(v):
    """A structure equal for two values exactly when they are the same AMQP
    value of the same AMQP type (NaN equals NaN, 0.0 differs from -0.0)."""
    t = type(v)
    if isinstance(v, Composite):
        fields = []
        for f in v.FIELDS:
            x = getattr(v, f.name)
            if f.default is not None and x == f.default:
                fields.append(("default",))  # sent as null, comes back as the default
            else:
                fields.append(canon(x))
        return (t.__name__, tuple(fields))
    if t in RESTRICTED:
        if isinstance(v, dict):
            return (t.__name__, tuple((canon(k), canon(x)) for k, x in v.items()))
        if isinstance(v, bytes):
            return (t.__name__, bytes(v))
        if isinstance(v, list):
            return (t.__name__, tuple(canon(x) for x in v))
        return (t.__name__, canon(v.value))
    if isinstance(v, float):
        if math.isnan(v):
            return (t.__name__, "nan")
        return (t.__name__, struct.pack(">d", v))
    if isinstance(v, Array):
        return ("Array", canon(v.descriptor), tuple(canon(x) for x in v))
    if isinstance(v, list):
        return ("list", tuple(canon(x) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple((canon(k), canon(x)) for k, x in v.items()))
    if isinstance(v, Described):
        return ("Described", canon(v.descriptor), canon(v.value))
    if isinstance(v, (str, bytes)):
        return (t.__name__, v)
    if v is None or isinstance(v, (bool, int, uuid.UUID)):
        return (t.__name__, v)
    raise AssertionError(f"canon: unexpected {t.__name__}")


def roundtrip(v):
    data = codec.dumps(v)
    back = codec.loads(data)
    assert canon(back) == canon(v), (v, back, data.hex())
    # decode() reports where the value ends, with trailing bytes present
    value, end = codec.decode(data + b"\x40\x40", 0)
    assert end == len(data)
    assert canon(value) == canon(v)
    return data


# ------------------------------------------------------------------ strategies


def ints(lo, hi, wrap=None):
    """Integers of a range, with the width boundaries drawn often."""
    edges = sorted({x for x in (lo, hi, hi - 1, 0, 1, 127, 128, 255, 256, -128, -129) if lo <= x <= hi})
    s = st.one_of(st.sampled_from(edges), st.integers(lo, hi))
    return s.map(wrap) if wrap else s


def sized_binary():
    return st.one_of(st.binary(max_size=24), st.binary(min_size=253, max_size=258), st.binary(max_size=600))


def sized_text(alphabet=None):
    kw = {"alphabet": alphabet} if alphabet is not None else {}
    return st.one_of(
        st.text(max_size=24, **kw),
        st.text(min_size=253, max_size=258, **kw),
        st.text(max_size=400, **kw),
    )


ascii_chars = st.characters(min_codepoint=0, max_codepoint=127)
unicode_chars = st.characters(exclude_categories=("Cs",))

PRIMITIVES = {
    "null": st.none(),
    "boolean": st.booleans(),
    "ubyte": ints(0, 0xFF, UByte),
    "ushort": ints(0, 0xFFFF, UShort),
    "uint": ints(0, 0xFFFFFFFF, UInt),
    "ulong": ints(0, (1 << 64) - 1, ULong),
    "byte": ints(-128, 127, Byte),
    "short": ints(-(1 << 15), (1 << 15) - 1, Short),
    "int": ints(-(1 << 31), (1 << 31) - 1, Int),
    "long": ints(-(1 << 63), (1 << 63) - 1),
    "float": st.floats(width=32).map(Float),
    "double": st.floats(),
    "decimal32": st.binary(min_size=4, max_size=4).map(Decimal32),
    "decimal64": st.binary(min_size=8, max_size=8).map(Decimal64),
    "decimal128": st.binary(min_size=16, max_size=16).map(Decimal128),
    "char": unicode_chars.map(Char),
    "timestamp": ints(-(1 << 63), (1 << 63) - 1, Timestamp),
    "uuid": st.uuids(),
    "binary": sized_binary(),
    "string": sized_text(unicode_chars),
    "symbol": sized_text(ascii_chars).map(Symbol),
}

# leaves of nested values: short variable-width values keep generation fast,
# a long binary now and then pushes compounds into their 32-bit forms
scalars = st.one_of(
    *[s for name, s in PRIMITIVES.items() if name not in ("binary", "string", "symbol")],
    st.binary(max_size=30),
    st.text(unicode_chars, max_size=30),
    st.text(ascii_chars, max_size=30).map(Symbol),
    st.binary(min_size=250, max_size=300),
)

# descriptors that name no composite of definitions.py, as ulong and as symbol
unknown_descriptors = st.one_of(
    st.integers(0, (1 << 64) - 1).map(ULong).filter(lambda c: c not in codec.DESCRIBED_DECODERS),
    st.text(ascii_chars, max_size=40).map(lambda s: Symbol("test:" + s)),
)

map_keys = st.one_of(scalars, st.builds(Described, unknown_descriptors, scalars))


def arrays(elements=None, keys=map_keys):
    """Homogeneous arrays: one element type per array."""
    kinds = [s for name, s in PRIMITIVES.items() if name != "null"]
    if elements is not None:
        kinds += [
            st.lists(elements, max_size=4),
            st.dictionaries(keys, elements, max_size=3),
        ]
    return st.one_of(*[st.lists(k, max_size=6).map(Array) for k in kinds])


def nested_values(leaves, keys, described_in_described=True):
    """Scalars, lists, maps, arrays (of scalars, compounds and arrays) and
    described values with unknown descriptors, nested."""

    def compounds(children):
        described = children if described_in_described else children.filter(lambda v: type(v) is not Described)
        return st.one_of(
            st.lists(children, max_size=6),
            st.dictionaries(keys, children, max_size=5),
            arrays(children, keys),
            st.lists(arrays(), max_size=3).map(Array),  # arrays of arrays
            st.builds(Described, unknown_descriptors, described),
        )

    return st.recursive(leaves, compounds, max_leaves=15)


values = nested_values(scalars, map_keys)


# --- composite field values, per Field.type


def symbol_arrays(min_size=0):
    return st.lists(st.text(ascii_chars, max_size=20).map(Symbol), min_size=min_size, max_size=4).map(Array)


symbols = st.text(ascii_chars, max_size=30).map(Symbol)
message_ids = st.one_of(PRIMITIVES["ulong"], st.uuids(), st.binary(max_size=40), st.text(max_size=40))
addresses = st.text(unicode_chars, max_size=60)

ALL_COMPOSITES = [
    v for v in vars(d).values() if isinstance(v, type) and issubclass(v, Composite) and v is not Composite
]


def _replace(obj, **kw):
    for k, v in kw.items():
        setattr(obj, k, v)
    return obj


def composite_strategies(values, map_field_keys=None) -> tuple[dict, dict]:
    """Strategies for every composite and every message section of
    definitions.py, by class name, with `values` for the fields of any type.
    Returns (composites, sections)."""
    if map_field_keys is None:
        # "map" fields encode str keys as symbols: unsettled maps delivery
        # tags, filter sets map symbols
        map_field_keys = st.one_of(symbols, st.binary(max_size=8), PRIMITIVES["ulong"])
    field_strategies = {
        "uint": PRIMITIVES["uint"],
        "ushort": PRIMITIVES["ushort"],
        "ubyte": PRIMITIVES["ubyte"],
        "ulong": PRIMITIVES["ulong"],
        "bool": st.booleans(),
        "string": st.text(unicode_chars, max_size=40),
        "symbol": symbols,
        "binary": st.binary(max_size=40),
        "fields": st.dictionaries(symbols, values, max_size=4),
        "map": st.dictionaries(map_field_keys, values, max_size=4),
        "timestamp": PRIMITIVES["timestamp"],
    }
    composites: dict = {}

    def of_class(cls, star: dict):
        fields = {}
        for f in cls.FIELDS:
            if f.multiple:
                s = symbol_arrays()
            elif f.type == "*":
                s = star.get(f.name, values)
            else:
                s = field_strategies[f.type]
            fields[f.name] = s if f.mandatory else st.one_of(st.none(), s)
        return st.fixed_dictionaries(fields).map(lambda kw: cls(**kw))

    def deferred(name):
        return st.deferred(lambda: composites[name])

    errors = deferred("Error")
    outcomes = st.one_of(*[deferred(c.__name__) for c in d.OUTCOMES])
    delivery_states = st.one_of(outcomes, deferred("Received"), deferred("TransactionalState"), deferred("Declared"))
    lifetime_policies = st.one_of(
        *[deferred(c) for c in ("DeleteOnClose", "DeleteOnNoLinks", "DeleteOnNoMessages", "DeleteOnNoLinksOrMessages")]
    )
    filters = st.dictionaries(
        symbols,
        st.one_of(
            st.builds(Described, st.just(Symbol("apache.org:selector-filter:string")), st.text(max_size=30)),
            st.builds(Described, st.just(ULong(0x0000468C00000004)), st.text(max_size=30)),
            st.none(),
        ),
        max_size=3,
    )
    dynamic_node_properties = st.dictionaries(
        st.sampled_from([Symbol("lifetime-policy"), Symbol("supported-dist-modes"), Symbol("x-opt-custom")]),
        st.one_of(lifetime_policies, symbols, values),
        max_size=3,
    )
    star_fields = {
        "Attach": {"source": deferred("Source"), "target": st.one_of(deferred("Target"), deferred("Coordinator"))},
        "Transfer": {"state": delivery_states},
        "Disposition": {"state": delivery_states},
        "Detach": {"error": errors},
        "End": {"error": errors},
        "Close": {"error": errors},
        "Rejected": {"error": errors},
        "Source": {"address": addresses, "default_outcome": outcomes},
        "Target": {"address": addresses},
        "Declare": {"global_id": st.binary(max_size=20)},
        "TransactionalState": {"outcome": outcomes},
        "Properties": {
            "message_id": message_ids,
            "to": addresses,
            "reply_to": addresses,
            "correlation_id": message_ids,
        },
    }
    for cls in ALL_COMPOSITES:
        composites[cls.__name__] = of_class(cls, star_fields.get(cls.__name__, {}))
    # termini: dynamic node properties and filters as the spec shapes them
    composites["Source"] = st.builds(
        lambda c, dnp, flt: _replace(c, dynamic_node_properties=dnp, filter=flt),
        of_class(d.Source, star_fields["Source"]),
        st.one_of(st.none(), dynamic_node_properties),
        st.one_of(st.none(), filters),
    )
    composites["Target"] = st.builds(
        lambda c, dnp: _replace(c, dynamic_node_properties=dnp),
        of_class(d.Target, star_fields["Target"]),
        st.one_of(st.none(), dynamic_node_properties),
    )

    annotation_maps = st.dictionaries(st.one_of(symbols, PRIMITIVES["ulong"]), values, max_size=4)
    sections = {
        "DeliveryAnnotations": annotation_maps.map(d.DeliveryAnnotations),
        "MessageAnnotations": annotation_maps.map(d.MessageAnnotations),
        "Footer": annotation_maps.map(d.Footer),
        "ApplicationProperties": st.dictionaries(
            st.text(max_size=20),
            st.one_of(
                *[PRIMITIVES[k] for k in PRIMITIVES if k not in ("binary", "string", "symbol")], st.text(max_size=20)
            ),
            max_size=5,
        ).map(d.ApplicationProperties),
        "Data": sized_binary().map(d.Data),
        "AmqpSequence": st.lists(values, max_size=5).map(d.AmqpSequence),
        "AmqpValue": values.map(d.AmqpValue),
    }
    return composites, sections


COMPOSITES, SECTIONS = composite_strategies(values)


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
        out.append(b"\x71" + struct.pack(">i", v))
    elif t is int:
        out.append(b"\x81" + struct.pack(">q", v))
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
    for v in (float("nan"), float("inf"), float("-inf"), -0.0, 0.0, struct.unpack(">f", b"\x00\x00\x00\x01")[0]):
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


# ------------------------------------------------------------------ composites


@pytest.mark.parametrize("name", sorted(COMPOSITES))
@PER_CLASS
@given(data=st.data())
def test_composite_roundtrip(name, data):
    obj = data.draw(COMPOSITES[name])
    encoded = obj.encode()
    assert encoded == codec.dumps(obj)
    assert encoded[0] == 0x00 and encoded[1:3] == bytes([0x53, obj.CODE])
    back = codec.loads(encoded)
    assert type(back) is type(obj)
    assert canon(back) == canon(obj), (obj, back)
    # the same composite named by its symbolic descriptor, in list32 form
    count, items = _list_items(encoded[3:])
    wide = b"\x00\xa3" + u8(len(obj.NAME)) + obj.NAME.encode() + b"\xd0" + u32(len(items) + 4) + u32(count) + items
    assert canon(codec.loads(wide)) == canon(obj)


def _list_items(list_encoding: bytes) -> tuple[int, bytes]:
    """(count, element bytes) of an encoded list in any width."""
    c = list_encoding[0]
    if c == 0x45:
        return 0, b""
    if c == 0xC0:
        return list_encoding[2], list_encoding[3:]
    assert c == 0xD0
    return struct.unpack(">I", list_encoding[5:9])[0], list_encoding[9:]


@pytest.mark.parametrize("name", sorted(SECTIONS))
@PER_CLASS
@given(data=st.data())
def test_section_roundtrip(name, data):
    obj = data.draw(SECTIONS[name])
    encoded = obj.encode()
    assert encoded == codec.dumps(obj)
    assert encoded[:3] == bytes([0x00, 0x53, obj.CODE])
    back = codec.loads(encoded)
    assert type(back) is type(obj)
    assert canon(back) == canon(obj)


def test_annotation_sections_key_by_symbol():
    for cls in (d.DeliveryAnnotations, d.MessageAnnotations, d.Footer):
        back = codec.loads(cls({"x-opt-a": 1}).encode())
        assert type(next(iter(back))) is Symbol, cls
    back = codec.loads(d.ApplicationProperties({"k": 1}).encode())
    assert type(next(iter(back))) is str


@FEW
@given(st.lists(st.one_of(COMPOSITES["Header"], *SECTIONS.values(), COMPOSITES["Properties"]), max_size=6))
def test_message_of_sections_decodes_in_sequence(sections):
    data = b"".join(s.encode() for s in sections)
    pos, back = 0, []
    while pos < len(data):
        v, pos = codec.decode(data, pos)
        back.append(v)
    assert [canon(x) for x in back] == [canon(x) for x in sections]


def test_composite_encodings_are_narrowest():
    assert d.Open(container_id="c").encode().hex() == "005310c00401a10163"
    # defaults travel as null; trailing nulls are trimmed
    assert d.Open(container_id="c", max_frame_size=0xFFFFFFFF, channel_max=0xFFFF).encode().hex() == (
        "005310c00401a10163"
    )
    assert d.Open(container_id="c", channel_max=1).encode().hex() == "005310c00904a101634040600001"
    assert d.Accepted().encode().hex() == "00532445"
    assert d.End().encode().hex() == "00531745"
    flow = d.Flow(incoming_window=0, next_outgoing_id=0, outgoing_window=0)
    assert flow.encode().hex() == "005313c0050440434343"
    assert d.Transfer(handle=0, delivery_id=300).encode().hex() == "005314c00702437000000" + "12c"
    assert d.Attach(name="n", handle=0, role=True).encode().hex() == "005312c00603a1016e4341"
    assert d.Header(priority=4, durable=False).encode().hex() == "00537045"
    # capabilities go as an array of symbols, even a single one or none
    assert d.Open(container_id="c", offered_capabilities=["x"]).encode().hex() == (
        "005310c01008a10163" + "40" * 6 + "e00401a30178"
    )
    assert d.Open(container_id="c", offered_capabilities=[]).encode().hex() == (
        "005310c00e08a10163" + "40" * 6 + "e00200a3"
    )
    big = d.Transfer(handle=0, delivery_tag=b"t" * 300)
    assert big.encode()[3] == 0xD0


def test_single_symbol_for_a_multiple_field():
    data = bytes.fromhex("005310c00b06a1016340404040a30178")  # outgoing-locales as one symbol
    assert codec.loads(data).outgoing_locales == [Symbol("x")]


def test_symbolic_and_numeric_descriptors_decode_alike():
    numeric = d.Close(error=d.Error(condition=Symbol("amqp:internal-error"), description="boom")).encode()
    error = Described(Symbol("amqp:error:list"), [Symbol("amqp:internal-error"), "boom"])
    symbolic = codec.dumps(Described(Symbol("amqp:close:list"), [error]))
    assert symbolic != numeric
    assert codec.loads(symbolic) == codec.loads(numeric)
    assert codec.loads(symbolic).error.description == "boom"


# ------------------------------------------------------------------ composite strictness

VALID_FIELD = {
    "uint": UInt(1),
    "ushort": UShort(1),
    "ubyte": UByte(1),
    "ulong": ULong(1),
    "bool": True,
    "string": "s",
    "symbol": Symbol("s"),
    "binary": b"t",
    "fields": {Symbol("k"): 1},
    "map": {Symbol("k"): 1},
    "timestamp": Timestamp(1),
    "*": None,
    "symbols": Array([Symbol("PLAIN")]),
}

WRONG_FIELD = {
    "uint": ["1", 1, UShort(1), ULong(1), UByte(1), -1, True, Timestamp(1), 1.0],
    "ushort": [UInt(1), 1, "x", Byte(1)],
    "ubyte": [UInt(1), True, 1, Symbol("x")],
    "ulong": [UInt(1), 1, Timestamp(1), b"x"],
    "bool": [UInt(1), "true", 1],
    "string": [Symbol("x"), b"x", Char("x"), ["x"]],
    "symbol": ["x", b"x", Char("x"), Array([Symbol("x")])],
    "binary": ["x", Decimal32(b"abcd"), Symbol("x"), [b"x"], uuid.UUID(int=0)],
    "fields": [[], Array([]), d.MessageAnnotations({}), d.ApplicationProperties({}), "x"],
    "map": [[], Array([]), d.MessageAnnotations({}), Described(ULong(0x1234), {}), UInt(1)],
    "timestamp": [1, UInt(1), ULong(1), 1.0],
    "symbols": ["x", Array(["x"]), [Symbol("x")], UInt(1), Array([b"x"]), Array([Symbol("a"), "b"], code=0xA1)],
}


def _field_kind(f):
    return "symbols" if f.multiple else f.type


def _valid_fields(cls):
    return [VALID_FIELD[_field_kind(f)] if f.mandatory else None for f in cls.FIELDS]


def _wire(cls, fields) -> bytes:
    return codec.dumps(Described(ULong(cls.CODE), list(fields)))


@pytest.mark.parametrize("cls", ALL_COMPOSITES, ids=lambda c: c.__name__)
def test_minimal_valid_fields_decode(cls):
    back = codec.loads(_wire(cls, _valid_fields(cls)))
    assert type(back) is cls
    # extra trailing nulls are allowed for fields of a later version [1.3.1] ...
    assert type(codec.loads(_wire(cls, _valid_fields(cls) + [None, None]))) is cls
    # ... but not extra values
    with pytest.raises(DecodeError):
        codec.loads(_wire(cls, _valid_fields(cls) + [UInt(1)]))


TYPED_FIELDS = [(cls, i) for cls in ALL_COMPOSITES for i, f in enumerate(cls.FIELDS) if f.type != "*"]


@pytest.mark.parametrize(
    ("cls", "index"), TYPED_FIELDS, ids=[f"{c.__name__}.{c.FIELDS[i].name}" for c, i in TYPED_FIELDS]
)
def test_wrong_field_type_is_a_decode_error(cls, index):
    kind = _field_kind(cls.FIELDS[index])
    for wrong in WRONG_FIELD[kind]:
        fields = _valid_fields(cls)
        fields[index] = wrong
        with pytest.raises(DecodeError):
            codec.loads(_wire(cls, fields))
    fields = _valid_fields(cls)
    fields[index] = VALID_FIELD[kind]
    assert type(codec.loads(_wire(cls, fields))) is cls


MANDATORY = [(cls, i) for cls in ALL_COMPOSITES for i, f in enumerate(cls.FIELDS) if f.mandatory]


@pytest.mark.parametrize(("cls", "index"), MANDATORY, ids=[f"{c.__name__}.{c.FIELDS[i].name}" for c, i in MANDATORY])
def test_mandatory_field_null_is_a_decode_error(cls, index):
    fields = _valid_fields(cls)
    fields[index] = None
    with pytest.raises(DecodeError, match="mandatory"):
        codec.loads(_wire(cls, fields))
    # trimmed away entirely
    with pytest.raises(DecodeError):
        codec.loads(_wire(cls, fields[:index]))


@pytest.mark.parametrize("body", [b"\xa1\x01x", b"\x55\x01", b"\xe0\x04\x01\xa3\x01x", b"\xc1\x01\x00"])
def test_composite_body_must_be_a_list(body):
    with pytest.raises(DecodeError):
        codec.loads(b"\x00\x53\x10" + body)


@pytest.mark.parametrize(
    "cls", [c for c in d.SECTIONS if not issubclass(c, Composite) and c is not d.AmqpValue], ids=lambda c: c.__name__
)
def test_restricted_section_checks_its_value(cls):
    wrong = {
        dict: ["x", [], Array([]), d.MessageAnnotations({})],
        bytes: ["x", Decimal32(b"abcd"), d.Data(b"x")],
        list: ["x", Array([1]), {}],
    }[next(b for b in (dict, bytes, list) if issubclass(cls, b))]
    for v in wrong:
        with pytest.raises(DecodeError):
            codec.loads(b"\x00\x53" + u8(cls.CODE) + codec.dumps(v))


# ------------------------------------------------------------------ malformed input

VALID_CONSTRUCTORS = {
    0x00, 0x40, 0x41, 0x42, 0x43, 0x44, 0x45, 0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x60, 0x61,
    0x70, 0x71, 0x72, 0x73, 0x74, 0x80, 0x81, 0x82, 0x83, 0x84, 0x94, 0x98, 0xA0, 0xA1, 0xA3,
    0xB0, 0xB1, 0xB3, 0xC0, 0xC1, 0xD0, 0xD1, 0xE0, 0xF0,
}  # fmt: skip


@pytest.mark.parametrize("code", sorted(set(range(256)) - VALID_CONSTRUCTORS), ids=lambda c: f"{c:02x}")
def test_invalid_constructor(code):
    for tail in (b"", b"\x00" * 20, b"\x01\x40"):
        with pytest.raises(DecodeError):
            codec.loads(bytes([code]) + tail)
    # also as a list element, an array element constructor and a descriptor
    with pytest.raises(DecodeError):
        codec.loads(b"\xc0\x03\x01" + bytes([code, 0]))
    with pytest.raises(DecodeError):
        codec.loads(b"\xe0\x03\x01" + bytes([code, 0]))
    with pytest.raises(DecodeError):
        codec.loads(b"\x00" + bytes([code, 0, 0x40]))


def _assert_every_cut_fails(data: bytes, cuts=None):
    for cut in range(len(data)) if cuts is None else cuts:
        with pytest.raises(DecodeError):
            codec.loads(data[:cut])


@MEDIUM
@given(st.one_of(values, *COMPOSITES.values(), *SECTIONS.values()))
def test_truncated_at_every_cut_point(v):
    data = codec.dumps(v)
    if len(data) <= 400:
        _assert_every_cut_fails(data)
    else:  # decoding each prefix is linear: sample the cut points of long values
        step = len(data) // 200 + 1
        _assert_every_cut_fails(data, [*range(0, len(data), step), *range(len(data) - 20, len(data))])


@pytest.mark.parametrize("hexed", [h for _, h in NARROWEST] + [h.replace(" ", "") for h, _ in WIDER])
def test_truncated_fixed_examples(hexed):
    _assert_every_cut_fails(bytes.fromhex(hexed))


MALFORMED = {
    "map8 odd count": "c10403404040",
    "map8 count one": "c1020140",
    "map32 odd count": "d10000000500000001" + "40",
    "map duplicate key": "c10504" + "4140" + "4140",
    "map duplicate symbol key": "c10904" + "a3016140" + "a3016140",
    "map key a list": "c103024540",
    "map key a map": "c10502" + "c10100" + "40",
    "map key an array": "c10602" + "e0020040" + "40",
    "map key a composite": "c10602" + "00532445" + "40",
    "invalid utf-8": "a102c328",
    "utf-8 surrogate": "a103eda080",
    "utf-8 overlong": "a102c080",
    "utf-8 cut sequence": "a101e2",
    "invalid utf-8 str32": "b100000002c328",
    "symbol not ascii": "a30180",
    "symbol not ascii sym32": "b300000001ff",
    "boolean byte 2": "5602",
    "boolean byte ff": "56ff",
    "char past unicode": "7300110000",
    "char surrogate": "730000d800",
    "list count larger than body": "c00305" + "4040",
    "list count smaller than body": "c00301" + "4040",
    "list32 count mismatch": "d00000000600000001" + "4040",
    "list8 size zero": "c000",
    "list32 size below 4": "d00000000300000000",
    "list size past end": "c00a0140",
    "map32 size past end": "d1ffffffff00000000",
    "list32 huge count": "d000000005ffffffff40",
    "element runs past its list": "c00201" + "a00178",
    "array8 size zero": "e000",
    "array without constructor": "e00100",
    "array count too big": "e00305" + "5201",
    "array body longer than count": "e00401" + "520102",
    "array descriptor without constructor": "e00401" + "005301",
    "array of null with a body": "e00301" + "4040",
    "array of null, huge count": "f000000005ffffffff40",
    "array of null, count beyond its size": "e0020340",
    "array32 of null, count beyond its size": "f0000000050100000040",
    "array element past its end": "e00401" + "a10278",
    "array descriptor a list": "e00501" + "0045" + "a100",
    "array descriptor a long": "e00601" + "005501" + "a100",
    "array descriptor a map": "e00701" + "00c10100" + "a100",
    "descriptor a long": "00550145",
    "descriptor a string": "00a1016145",
    "descriptor a list": "004545",
    "descriptor a map": "00c1010045",
    "descriptor a uint": "00520145",
    "descriptor a boolean": "004145",
    "descriptor a described value": "0000530153" + "0145",
    "descriptor a long naming open": "005510" + "c00401a10163",
    "descriptor a string naming open": "00a10e" + b"amqp:open:list".hex() + "c00401a10163",
    "descriptor a uint naming accepted": "00522445",
    "described without value": "005310",
    "described without descriptor": "00",
    "trailing bytes": "4040",
    "trailing bytes after list": "450000",
    "empty": "",
    "truncated uuid": "98" + "00" * 15,
    "truncated decimal128": "94" + "00" * 15,
    "binary32 length past end": "b0ffffffff00",
    "string32 length past end": "b17fffffff",
}


@pytest.mark.parametrize("hexed", list(MALFORMED.values()), ids=list(MALFORMED))
def test_malformed_input_is_a_decode_error(hexed):
    data = bytes.fromhex(hexed)
    t0 = time.monotonic()
    with pytest.raises(DecodeError):
        codec.loads(data)
    assert time.monotonic() - t0 < 0.5  # no amplification
    with pytest.raises(DecodeError):  # nor inside a list
        codec.loads(b"\xd0" + u32(len(data) + 4) + u32(1) + data)


def _nested(depth: int, head, innermost: bytes = b"\x45") -> bytes:
    """`depth` layers of head(size of what they wrap) around `innermost`, built
    back to front without quadratic copying."""
    size, parts = len(innermost), []
    for _ in range(depth):
        h = head(size)
        parts.append(h)
        size += len(h)
    return b"".join(reversed(parts)) + innermost


def _nested_lists(depth: int) -> bytes:
    return _nested(depth, lambda s: b"\xd0" + u32(s + 4) + u32(1))


def _nested_arrays(depth: int) -> bytes:
    # an array of one array of one array ... of an empty array of null; the
    # elements of an array carry no constructor of their own
    inner = u32(5) + u32(0) + b"\x40"
    return b"\xf0" + _nested(depth - 1, lambda s: u32(s + 5) + u32(1) + b"\xf0", inner)


NESTINGS = {
    "list32": _nested_lists,
    "list8": lambda n: _nested(min(n, 80), lambda s: b"\xc0" + u8(s + 1) + b"\x01"),
    "map32": lambda n: _nested(n, lambda s: b"\xd1" + u32(s + 5) + u32(2) + b"\x40"),
    "array32": _nested_arrays,
    # array of one list holding an array of one list ...
    "arrays of lists": lambda n: _nested(
        n // 2, lambda s: b"\xf0" + u32(13 + s) + u32(1) + b"\xd0" + u32(4 + s) + u32(1)
    ),
    "described descriptors": lambda n: b"\x00" * n + b"\x53\x01" + b"\x45" * n,
    "described values": lambda n: b"\x00\x53\x01" * n + b"\x45",
    "unknown composite values": lambda n: b"\x00\x80\x00\x00\x00\x01\x00\x00\x00\x01" * n + b"\x45",
    "close(error=close(...))": lambda n: _nested(n, lambda s: b"\x00\x53\x18\xd0" + u32(s + 4) + u32(1)),
}


@pytest.mark.parametrize("kind", list(NESTINGS))
def test_deep_nesting_is_a_decode_error_not_recursion(kind):
    data = NESTINGS[kind](10_000)
    with pytest.raises(DecodeError):
        codec.loads(data)


def test_moderate_nesting_decodes():
    v: list = []
    for _ in range(30):
        v = [v]
    assert codec.loads(_nested_lists(30)) == v
    assert codec.loads(codec.dumps(v)) == v
    a = codec.loads(_nested_arrays(20))
    for _ in range(19):
        assert isinstance(a, Array) and len(a) == 1
        a = a[0]
    assert a == []
    close = codec.loads(NESTINGS["close(error=close(...))"](20))
    assert isinstance(close.error, d.Close)


def test_descriptor_arrays_must_be_hashable():
    # regression: an array whose descriptor is a list used to raise TypeError
    with pytest.raises(DecodeError):
        codec.loads(bytes.fromhex("e00601004552" + "01"))


def test_array_of_nulls_is_bounded_by_its_size():
    # regression: 10 bytes used to ask for 2**32 Python Nones
    assert codec.loads(bytes.fromhex("e0020140")) == [None]
    assert codec.loads(bytes.fromhex("e0020240")) == [None, None]
    t0 = time.monotonic()
    with pytest.raises(DecodeError):
        codec.loads(bytes.fromhex("f000000005ffffffff40"))
    assert time.monotonic() - t0 < 0.1


@pytest.mark.parametrize("kind", ["uuid", "described"])
def test_map_keys_sharing_one_hash_are_refused_quickly(kind):
    # regression: UUID (and described) keys hash without a key, so 8,000 of
    # them with one hash took seconds to insert, quadratically
    p = (1 << 61) - 1
    keys = [uuid.UUID(int=5 + i * p) for i in range(20_000)]
    if kind == "described":
        keys = [Described(ULong(1), k) for k in keys]
    assert len({hash(k) for k in keys[:100]}) == 1
    # encoded by hand: building the dict would be the quadratic thing itself
    body = b"".join(codec.dumps(k) + b"\x40" for k in keys)
    data = b"\xd1" + u32(len(body) + 4) + u32(2 * len(keys)) + body
    t0 = time.monotonic()
    with pytest.raises(DecodeError):
        codec.loads(data)
    assert time.monotonic() - t0 < 1
    # a few such keys are fine, and so are large maps of ordinary keys
    assert len(codec.loads(codec.dumps(dict.fromkeys(keys[:20])))) == 20
    assert codec.loads(codec.dumps({-1: 1, -2: 2})) == {-1: 1, -2: 2}  # hash(-1) == hash(-2)
    big = {uuid.UUID(int=i * 7919): i for i in range(5000)}
    assert codec.loads(codec.dumps(big)) == big


@SETTINGS
@given(st.binary(max_size=300))
def test_random_bytes_raise_only_decode_error(data):
    try:
        codec.loads(data)
    except DecodeError:
        pass


_mutable = st.one_of(values, *COMPOSITES.values(), *SECTIONS.values())


@SETTINGS
@given(_mutable, st.data())
def test_mutated_valid_encodings_raise_only_decode_error(v, data):
    raw = bytearray(codec.dumps(v))
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["flip", "set", "insert", "delete"]))
        i = data.draw(st.integers(0, max(len(raw) - 1, 0)))
        if op == "insert" or not raw:
            raw.insert(i, data.draw(st.integers(0, 255)))
        elif op == "delete":
            del raw[i]
        elif op == "flip":
            raw[i] ^= 1 << data.draw(st.integers(0, 7))
        else:
            raw[i] = data.draw(st.sampled_from([0x00, 0x40, 0x45, 0x53, 0xA1, 0xC0, 0xD0, 0xE0, 0xF0, 0xFF]))
    try:
        codec.loads(bytes(raw))
    except DecodeError:
        pass
