"""What the codec tests share (test_codec_*.py, test_proton_crosscheck.py).

`canon` compares two values as AMQP values of the same AMQP type (NaN equals
NaN, 0.0 differs from -0.0); `roundtrip` sends a value through `dumps`/`loads`
and `decode` and checks it comes back the same. The hypothesis strategies draw
every primitive in every width, nested compounds, arrays, described values with
unknown descriptors, and every composite and message section of
definitions.py (`composite_strategies`). Not a test module: conftest.py puts
this directory on sys.path.
"""

from __future__ import annotations

import math
import uuid

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from amqp import codec
from amqp import definitions as d
from amqp.composite import Composite
from amqp.errors import DecodeError
from amqp.structs import F64, U8, U32, U64
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


def _settings(n):
    return settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.too_slow])


SETTINGS = _settings(200)
MEDIUM = _settings(100)
# one run per primitive, composite or section class: fewer examples each, many classes
PER_CLASS = _settings(40)
FEW = _settings(40)

u8 = U8.pack
u32 = U32.pack
u64 = U64.pack


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
        return (t.__name__, F64.pack(v))
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


def _assert_every_cut_fails(data: bytes, cuts=None):
    for cut in range(len(data)) if cuts is None else cuts:
        with pytest.raises(DecodeError):
            codec.loads(data[:cut])


# The symbolic descriptor of each message section [3.2], by its numeric code.
SECTION_NAMES = {
    0x70: "amqp:header:list", 0x71: "amqp:delivery-annotations:map", 0x72: "amqp:message-annotations:map",
    0x73: "amqp:properties:list", 0x74: "amqp:application-properties:map", 0x75: "amqp:data:binary",
    0x76: "amqp:amqp-sequence:list", 0x77: "amqp:value:*", 0x78: "amqp:footer:map",
}  # fmt: skip
