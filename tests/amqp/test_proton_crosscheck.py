"""Cross-checks Warren's codec against Qpid Proton's (python-qpid-proton).

Both directions, for every primitive, nested compounds, performatives and the
other composites, and whole messages: what Warren encodes Proton decodes to
the same value of the same AMQP type, and what Proton encodes Warren decodes
to the same value of the same AMQP type. Values are compared in Warren's
representation through `canon` (test_codec_roundtrip.py), after mapping
Proton's types one to one onto Warren's (`from_proton`, `to_proton`).
"""

from __future__ import annotations

import proton
import pytest

# the strategies live next to this file; conftest.py puts this directory on sys.path
from codec_strategies import (
    ALL_COMPOSITES,
    PRIMITIVES,
    RESTRICTED,
    canon,
    unknown_descriptors,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proton import Data
from proton_mapping import (
    COMPOSITES,
    SECTIONS,
    as_described,
    from_proton,
    proton_decode,
    proton_encode,
    to_proton,
    values,
)

from amqp import codec
from amqp import definitions as d
from amqp.types import (
    Array,
    Described,
    Symbol,
    UByte,
    UInt,
    ULong,
)


def _settings(n):
    return settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.too_slow])


SETTINGS = _settings(200)
PER_CLASS = _settings(25)


def test_proton_loses_the_outer_descriptor_of_described_in_described():
    # documents the Proton limitation the strategies above avoid: if this
    # starts failing, Proton got fixed and the filters can go
    data = codec.dumps(Described(ULong(0x1234), Described(ULong(5), None)))
    assert (
        data.hex()
        == proton_encode(proton.Described(proton.ulong(0x1234), proton.Described(proton.ulong(5), None))).hex()
    )
    assert proton_decode(data) == proton.Described(proton.ulong(5), None)


# ------------------------------------------------------------------ primitives and compounds


@pytest.mark.parametrize("name", list(PRIMITIVES))
@_settings(40)
@given(data=st.data())
def test_primitive_warren_to_proton_and_back(name, data):
    v = data.draw(PRIMITIVES[name])
    assert canon(from_proton(proton_decode(codec.dumps(v)))) == canon(v)
    assert canon(codec.loads(proton_encode(to_proton(v)))) == canon(v)


@SETTINGS
@given(values)
def test_values_warren_to_proton(v):
    assert canon(from_proton(proton_decode(codec.dumps(v)))) == canon(v)


@SETTINGS
@given(values)
def test_values_proton_to_warren(v):
    data = proton_encode(to_proton(v))
    assert canon(codec.loads(data)) == canon(v)


@_settings(100)
@given(unknown_descriptors, st.sampled_from(["symbol", "uint", "string", "long", "binary", "ubyte"]), st.data())
def test_described_arrays_both_ways(descriptor, kind, data):
    items = data.draw(st.lists(PRIMITIVES[kind], max_size=5))
    a = Array(items, descriptor=descriptor)
    expected = Array([Described(descriptor, x) for x in items], descriptor=descriptor)
    assert canon(from_proton(proton_decode(codec.dumps(a)))) == canon(expected)
    assert canon(codec.loads(proton_encode(to_proton(expected)))) == canon(expected)


EXACT = [
    (proton.uint(0), "43"),
    (proton.uint(255), "52ff"),
    (proton.uint(256), "7000000100"),
    (proton.ulong(0), "44"),
    (proton.ulong(255), "53ff"),
    (proton.int32(-128), "5480"),
    (-128, "5580"),
    (128, "810000000000000080"),
    (True, "41"),
    (proton.symbol("a"), "a30161"),
]


@pytest.mark.parametrize(("pv", "hexed"), EXACT, ids=[h for _, h in EXACT])
def test_same_narrow_scalar_encodings_as_proton(pv, hexed):
    assert proton_encode(pv).hex() == hexed
    assert codec.dumps(from_proton(pv)).hex() == hexed


def test_proton_wide_compounds_decode():
    # Proton writes list32, map32 and array32 even for small values
    v = {Symbol("k"): [UInt(1), "x", Array([Symbol("a"), Symbol("b")])], "e": [], "m": {}}
    data = proton_encode(to_proton(v))
    assert data[0] == 0xD1
    assert canon(codec.loads(data)) == canon(v)


# ------------------------------------------------------------------ performatives and other composites


@pytest.mark.parametrize("name", sorted(COMPOSITES))
@PER_CLASS
@given(data=st.data())
def test_composite_warren_to_proton(name, data):
    obj = data.draw(COMPOSITES[name])
    pv = proton_decode(obj.encode())
    assert isinstance(pv, proton.Described)
    assert type(pv.descriptor) is proton.ulong and pv.descriptor == obj.CODE
    assert isinstance(pv.value, list)
    assert canon(from_proton(pv)) == canon(as_described(obj))


@pytest.mark.parametrize("name", sorted(COMPOSITES))
@PER_CLASS
@given(data=st.data())
def test_composite_proton_to_warren(name, data):
    obj = data.draw(COMPOSITES[name])
    back = codec.loads(proton_encode(to_proton(obj)))
    assert type(back) is type(obj)
    assert canon(back) == canon(obj)


@pytest.mark.parametrize("name", sorted(SECTIONS))
@PER_CLASS
@given(data=st.data())
def test_sections_both_ways(name, data):
    obj = data.draw(SECTIONS[name])
    assert canon(from_proton(proton_decode(obj.encode()))) == canon(as_described(obj))
    back = codec.loads(proton_encode(to_proton(obj)))
    assert type(back) is type(obj)
    assert canon(back) == canon(obj)


def test_every_composite_is_cross_checked():
    assert {c.__name__ for c in ALL_COMPOSITES} == set(COMPOSITES)
    assert {c.__name__ for c in RESTRICTED} == set(SECTIONS)
    assert {c.__name__ for c in d.PERFORMATIVES + d.SASL_FRAMES + d.OUTCOMES} <= set(COMPOSITES)


def test_performative_fields_as_proton_sees_them():
    attach = d.Attach(
        name="link-1",
        handle=UInt(3),
        role=d.RECEIVER,
        snd_settle_mode=UByte(d.SND_SETTLED),
        source=d.Source(
            address="queue-a",
            durable=UInt(2),
            dynamic=True,
            dynamic_node_properties={Symbol("lifetime-policy"): d.DeleteOnClose()},
            filter={Symbol("sel"): Described(Symbol("apache.org:selector-filter:string"), "a = 1")},
            default_outcome=d.Released(),
            outcomes=Array([Symbol("amqp:accepted:list"), Symbol("amqp:released:list")]),
            capabilities=Array([Symbol("queue")]),
        ),
        target=d.Target(address="t"),
        initial_delivery_count=UInt(0),
        max_message_size=ULong(1 << 40),
        properties={Symbol("x-opt"): "v"},
    )
    pv = proton_decode(attach.encode())
    fields = pv.value
    assert fields[0] == "link-1" and type(fields[1]) is proton.uint and fields[1] == 3
    assert fields[2] is True and type(fields[3]) is proton.ubyte and fields[3] == 1
    assert fields[4] is None  # rcv-settle-mode first is the default
    source = fields[5]
    assert source.descriptor == 0x28 and source.value[0] == "queue-a" and source.value[1] == 2
    assert source.value[5] == {proton.symbol("lifetime-policy"): proton.Described(proton.ulong(0x2B), [])}
    sel = source.value[7][proton.symbol("sel")]
    assert sel.descriptor == proton.symbol("apache.org:selector-filter:string") and sel.value == "a = 1"
    assert source.value[8] == proton.Described(proton.ulong(0x26), [])
    assert source.value[9].type == Data.SYMBOL and list(source.value[9].elements) == [
        "amqp:accepted:list",
        "amqp:released:list",
    ]
    assert type(fields[10]) is proton.ulong and fields[10] == 1 << 40
    assert fields[13] == {proton.symbol("x-opt"): "v"}
    assert type(next(iter(fields[13]))) is proton.symbol
    # and back from Proton's encoding
    assert canon(codec.loads(proton_encode(pv))) == canon(attach)
