"""Composites [1.3] and message sections [3.2] in the AMQP 1.0 codec.

Every composite and section of definitions.py round-trips (also named by its
symbolic descriptor, in list32 form), a message decodes section by section,
composites encode narrowest, and decoding is strict: extra values, fields of
the wrong type, null mandatory fields, a body that is not a list and restricted
sections holding the wrong type are a DecodeError.
"""

from __future__ import annotations

import uuid

import pytest
from codec_strategies import ALL_COMPOSITES, COMPOSITES, FEW, PER_CLASS, SECTIONS, canon, u8, u32
from hypothesis import given
from hypothesis import strategies as st

from amqp import codec
from amqp import definitions as d
from amqp.composite import Composite
from amqp.errors import DecodeError
from amqp.structs import U32
from amqp.types import Array, Byte, Char, Decimal32, Described, Symbol, Timestamp, UByte, UInt, ULong, UShort

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
    return U32.unpack(list_encoding[5:9])[0], list_encoding[9:]


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
