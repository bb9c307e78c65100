"""The lazy message view [3.2] under generated input: random section sequences,
the quick composite decoder against the codec, and fuzzed bytes that may only
raise DecodeError."""

from __future__ import annotations

import re

import pytest
from codec_strategies import SECTION_NAMES
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from amqp import codec
from amqp.definitions import (
    AmqpSequence,
    AmqpValue,
    ApplicationProperties,
    Data,
    DeliveryAnnotations,
    Footer,
    Header,
    MessageAnnotations,
    Properties,
)
from amqp.errors import DecodeError
from amqp.message import (
    _HEADER_CONSTRUCTORS,
    _PROPERTIES_CONSTRUCTORS,
    BODY,
    FOOTER,
    HEADER,
    PROPERTIES,
    Message,
    _quick_composite,
)
from amqp.types import Byte, Char, Decimal32, Int, Symbol, Timestamp, UByte, UInt, ULong, UShort


def enc(section) -> bytes:
    return section.encode()


HEADER_BYTES = enc(Header(durable=True, priority=UByte(6), ttl=UInt(60000), delivery_count=UInt(2)))
PROPS_BYTES = enc(Properties(message_id="id-1", to="/queues/q1", subject="k", reply_to="/queues/r"))
BODY_BYTES = enc(Data(b"hello world!"))


# ---------------------------------------------------------------- property tests

_SPEC = re.compile(r"H?D?M?P?A?(d+|s+|v)?F?")  # [3.2]
_LETTER_RANK = {"H": 0, "D": 1, "M": 2, "P": 3, "A": 4, "d": 5, "s": 5, "v": 5, "F": 6}
_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.text(max_size=8), st.binary(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=8,
)
_annotations = st.dictionaries(st.text("abcdef-", min_size=1, max_size=6).map(Symbol), _values, max_size=3)
_headers = st.builds(
    Header,
    durable=st.booleans(),
    priority=st.integers(0, 255).map(UByte),
    ttl=st.none() | st.integers(0, 2**32 - 1).map(UInt),
    first_acquirer=st.booleans(),
    delivery_count=st.integers(0, 2**32 - 1).map(UInt),
)
_properties = st.builds(
    Properties,
    message_id=st.none() | st.text(max_size=10) | st.integers(0, 2**64 - 1).map(ULong) | st.uuids(),
    user_id=st.none() | st.binary(max_size=6),
    to=st.none() | st.text(max_size=10),
    subject=st.none() | st.text(max_size=10),
    reply_to=st.none() | st.text(max_size=10),
    correlation_id=st.none() | st.binary(max_size=6),
    content_type=st.none() | st.text("abc/", max_size=6).map(Symbol),
    absolute_expiry_time=st.none() | st.integers(-(2**63), 2**63 - 1).map(Timestamp),
    group_id=st.none() | st.text(max_size=6),
    group_sequence=st.none() | st.integers(0, 2**32 - 1).map(UInt),
)
_SECTION_STRATEGIES = {
    "H": _headers,
    "D": _annotations.map(DeliveryAnnotations),
    "M": _annotations.map(MessageAnnotations),
    "P": _properties,
    "A": st.dictionaries(st.text(max_size=6), _values, max_size=3).map(ApplicationProperties),
    "d": st.one_of(st.binary(max_size=40), st.binary(min_size=256, max_size=300)).map(Data),
    "s": st.lists(_values, max_size=4).map(AmqpSequence),
    "v": _values.map(AmqpValue),
    "F": _annotations.map(Footer),
}


@st.composite
def _encoded_sections(draw, spec: str):
    """Sections for the letters of `spec`, each with a random descriptor form."""
    sections, encodings = [], []
    for letter in spec:
        section = draw(_SECTION_STRATEGIES[letter])
        raw = section.encode()
        form = draw(st.sampled_from(["small", "small", "ulong", "symbol"]))
        if form == "ulong":
            raw = b"\x00\x80" + raw[2].to_bytes(8, "big") + raw[3:]
        elif form == "symbol":
            name = SECTION_NAMES[raw[2]].encode()
            raw = b"\x00\xa3" + bytes((len(name),)) + name + raw[3:]
        sections.append(section)
        encodings.append(raw)
    return sections, encodings


_valid_specs = st.tuples(
    st.booleans(), st.booleans(), st.booleans(), st.booleans(), st.booleans(),
    st.sampled_from(["", "d", "dd", "ddd", "s", "ss", "v"]), st.booleans(),
).map(lambda t: "".join(c for c, on in zip("HDMPA", t[:5], strict=True) if on) + t[5] + ("F" if t[6] else ""))  # fmt: skip


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_section_sequences(data):
    """Any sequence of sections scans iff it follows the grammar of [3.2],
    and then every section decodes to what was encoded."""
    spec = data.draw(st.one_of(_valid_specs, st.text("HDMPAdsvF", max_size=7)))
    sections, encodings = data.draw(_encoded_sections(spec))
    payload = b"".join(encodings)
    if not _SPEC.fullmatch(spec):
        with pytest.raises(DecodeError):
            Message.from_bytes(payload)
        return
    m = Message.from_bytes(payload)
    by_rank: dict[int, list] = {}
    for letter, section, raw in zip(spec, sections, encodings, strict=True):
        by_rank.setdefault(_LETTER_RANK[letter], []).append((section, raw))
    for rank in range(7):
        got = by_rank.get(rank, [])
        assert bytes(m.section_bytes(rank)) == b"".join(raw for _, raw in got)
        assert m.sizes[rank] == sum(len(raw) for _, raw in got)
    assert m.header == next((s for s, _ in by_rank.get(HEADER, [])), None)
    assert m.delivery_annotations == next((s for s, _ in by_rank.get(1, [])), None)
    assert m.message_annotations == next((s for s, _ in by_rank.get(2, [])), None)
    assert m.properties == next((s for s, _ in by_rank.get(PROPERTIES, [])), None)
    assert m.application_properties == next((s for s, _ in by_rank.get(4, [])), None)
    assert m.footer == next((s for s, _ in by_rank.get(FOOTER, [])), None)
    assert m.body_sections == tuple(s for s, _ in by_rank.get(BODY, []))
    assert m.body_kind == (by_rank[BODY][0][0].CODE if BODY in by_rank else 0)
    # the header and properties come out the same from the quick and the generic path
    assert m.header == m._section(HEADER) and m.properties == m._section(PROPERTIES)

    changes = data.draw(st.fixed_dictionaries({}, optional={"delivery_count": st.integers(0, 99)}))
    merge = data.draw(st.dictionaries(st.sampled_from(["x-a", "x-b"]), st.integers(0, 3), max_size=2))
    out = Message.from_bytes(m.to_delivery_bytes(changes, merge))
    assert bytes(out.bare_bytes) == bytes(m.bare_bytes)
    assert bytes(out.section_bytes(FOOTER)) == bytes(m.section_bytes(FOOTER))
    assert out.delivery_annotations is None
    assert out.delivery_count == changes.get("delivery_count", m.delivery_count)
    if merge:
        assert out.message_annotations == {**(m.message_annotations or {}), **merge}


def _exercise(payload: bytes) -> None:
    """Everything a peer's bytes can reach raises DecodeError or nothing."""
    try:
        m = Message.from_bytes(payload)
    except DecodeError:
        return
    assert sum(m.sizes[:7]) == len(payload)
    for name in (
        "header", "delivery_annotations", "message_annotations", "properties", "application_properties",
        "footer", "body_sections", "body", "durable", "to", "subject", "message_id", "ttl",
    ):  # fmt: skip
        try:
            getattr(m, name)
        except DecodeError:
            pass
    # quick and generic decoding agree, including on failure
    for rank, cls, constructors in (
        (HEADER, Header, _HEADER_CONSTRUCTORS),
        (PROPERTIES, Properties, _PROPERTIES_CONSTRUCTORS),
    ):
        if not m.has(rank):
            continue
        try:
            generic = m._section(rank)
        except DecodeError:
            generic = DecodeError
        try:
            quick = _quick_composite(cls, constructors, m.payload, m._b[rank], m._b[rank + 1])
        except DecodeError:
            quick = DecodeError
        assert quick is None or quick == generic
    try:
        m.to_delivery_bytes({"delivery_count": 1}, {"x-opt": 1})
    except DecodeError:
        pass


_typed_values = st.one_of(
    st.none(), st.booleans(), st.integers(0, 255).map(UByte), st.integers(0, 2**16 - 1).map(UShort),
    st.integers(0, 2**32 - 1).map(UInt), st.integers(0, 2**64 - 1).map(ULong), st.integers(-128, 127).map(Byte),
    st.integers(-(2**31), 2**31 - 1).map(Int), st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**63), 2**63 - 1).map(Timestamp), st.floats(allow_nan=False), st.uuids(),
    st.binary(max_size=4), st.text(max_size=4), st.text("ab", max_size=3).map(Symbol),
    st.characters().map(Char), st.lists(st.integers(0, 3), max_size=2),
)  # fmt: skip


_FIELD_VALUES = {
    "bool": st.booleans(),
    "ubyte": st.integers(0, 255).map(UByte),
    "uint": st.integers(0, 2**32 - 1).map(UInt),
    "ulong": st.integers(0, 2**64 - 1).map(ULong),
    "timestamp": st.integers(-(2**63), 2**63 - 1).map(Timestamp),
    "string": st.text(max_size=4),
    "symbol": st.text("ab", max_size=3).map(Symbol),
    "binary": st.binary(max_size=4),
    "*": _typed_values,
}


# values of a type next to the right one: the field checks must tell them apart
_NEAR_MISSES = {
    "bool": st.integers(0, 1) | st.integers(0, 1).map(UByte),
    "ubyte": st.integers(0, 127).map(Byte) | st.integers(0, 255).map(UShort) | st.integers(0, 255).map(UInt),
    "uint": st.integers(0, 255).map(UByte)
    | st.integers(0, 2**16 - 1).map(UShort)
    | st.integers(0, 9).map(ULong)
    | st.integers(0, 9).map(Int)
    | st.integers(0, 9),
    "ulong": st.integers(0, 9).map(UInt) | st.integers(0, 9) | st.integers(0, 9).map(Timestamp),
    "timestamp": st.integers(0, 9) | st.integers(0, 9).map(ULong),
    "string": st.text("ab", max_size=3).map(Symbol) | st.characters().map(Char) | st.binary(max_size=3),
    "symbol": st.text("ab", max_size=3) | st.characters().map(Char),
    "binary": st.text(max_size=3) | st.binary(min_size=4, max_size=4).map(Decimal32),
}


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([0x70, 0x73]), st.data(), st.booleans())
def test_quick_and_generic_composite_decoding_agree(code, data, wide):
    """The quick header/properties decoder gives what the codec gives, or
    defers to it: same value or DecodeError for any typed field list."""
    cls, constructors = (Header, _HEADER_CONSTRUCTORS) if code == 0x70 else (Properties, _PROPERTIES_CONSTRUCTORS)
    # mostly well-typed fields, some of any type, sometimes one too many
    kinds = [f.type for f in cls.FIELDS] + ["*"]
    count = data.draw(st.integers(0, len(kinds)))
    fields = []
    for kind in kinds[:count]:
        dice = data.draw(st.integers(0, 19))
        if dice < 2 and kind != "*":
            strategy = _NEAR_MISSES[kind]
        elif dice < 3:
            strategy = _typed_values
        elif dice < 6:
            strategy = st.none()
        else:
            strategy = _FIELD_VALUES[kind]
        fields.append(data.draw(strategy))
    body = bytearray()
    for value in fields:
        codec.encode(body, value)
    if wide or len(body) + 1 >= 256:
        listed = b"\xd0" + (len(body) + 4).to_bytes(4, "big") + len(fields).to_bytes(4, "big") + body
    else:
        listed = bytes((0xC0, len(body) + 1, len(fields))) + body
    payload = b"\x00\x53" + bytes((code,)) + listed
    try:
        generic = codec.loads(payload)
    except DecodeError:
        generic = DecodeError
    try:
        quick = _quick_composite(cls, constructors, payload, 0, len(payload))
    except DecodeError:
        quick = DecodeError
    assert quick is None or quick == generic
    m = Message.from_bytes(payload)
    try:
        got = m.header if code == 0x70 else m.properties
    except DecodeError:
        got = DecodeError
    assert got == generic


# one element encoding per constructor of [1.6], and a few invalid ones
_ELEMENTS = [bytes.fromhex(h) for h in (
    "40 41 42 43 44 45 5001 51ff 5205 5305 5405 5505 5601 5602 600001 61ffff 7000000001 71ffffffff 723f800000"
    " 7300000061 7400000000 800000000000000001 81ffffffffffffffff 823ff0000000000000 830000000000000001"
    " 840000000000000000 94" + "00" * 16 + " 98" + "11" * 16 + " a00161 a10161 a101ff a30161 a301ff b00000000161"
    " b10000000161 b30000000161 c00100 c10100 d00000000400000000 d10000000400000000 e0020040 f000000005000000014040"
    " 00530145 00a301614045 ff 7800000000"
).split()]  # fmt: skip


@pytest.mark.parametrize(
    ("cls", "constructors"), [(Header, _HEADER_CONSTRUCTORS), (Properties, _PROPERTIES_CONSTRUCTORS)]
)
def test_quick_decoding_checks_every_field_like_the_codec(cls, constructors):
    """Every field of the header and properties, holding an element of
    every constructor: the quick path agrees with the codec or defers."""
    for i in range(len(cls.FIELDS) + 1):
        for element in _ELEMENTS:
            body = b"\x40" * i + element
            payload = b"\x00\x53" + bytes((cls.CODE, 0xC0, len(body) + 1, i + 1)) + body
            try:
                generic = codec.loads(payload)
            except DecodeError:
                generic = DecodeError
            try:
                quick = _quick_composite(cls, constructors, payload, 0, len(payload))
            except DecodeError:
                quick = DecodeError
            assert quick is None or quick == generic, (cls.__name__, i, element.hex())


def _mutate(data, payload: bytearray) -> bytes:
    for _ in range(data.draw(st.integers(1, 4))):
        action = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        i = data.draw(st.integers(0, len(payload)))
        if action == "flip" and i < len(payload):
            payload[i] = data.draw(st.integers(0, 255))
        elif action == "cut":
            del payload[i:]
        else:
            payload[i:i] = data.draw(st.binary(min_size=1, max_size=3))
    return bytes(payload)


def _random_bytes_case(payload: bytes) -> None:
    _exercise(payload)
    _exercise(b"\x00\x53\x70" + payload)
    _exercise(b"\x00\x53\x77" + payload)


def _mutated_message_case(data) -> None:
    spec = data.draw(_valid_specs)
    assume(spec)
    _, encodings = data.draw(_encoded_sections(spec))
    _exercise(_mutate(data, bytearray(b"".join(encodings))))


# A few hundred cases always; many more with the `slow` marker.
_FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_FUZZ_BIG = settings(max_examples=2_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_FUZZ
@given(st.binary(max_size=300))
def test_random_bytes_only_raise_decode_error(payload):
    _random_bytes_case(payload)


@_FUZZ
@given(st.data())
def test_mutated_messages_only_raise_decode_error(data):
    _mutated_message_case(data)


@pytest.mark.slow
@_FUZZ_BIG
@given(st.binary(max_size=300))
def test_random_bytes_only_raise_decode_error_big(payload):
    _random_bytes_case(payload)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@_FUZZ_BIG
@given(st.data())
def test_mutated_messages_only_raise_decode_error_big(data):
    _mutated_message_case(data)


def test_whole_prefix_and_trailing_data():
    """Fed every prefix of a valid message, the scanner either accepts a
    shorter message at a section boundary or raises DecodeError."""
    payload = Message.build(
        {"k": [1, 2]}, header={"durable": True}, message_annotations={"x": 1}, properties={"to": "q"}, footer={"f": 1}
    ).payload
    m = Message.from_bytes(payload)
    boundaries = set(m._b)
    for cut in range(len(payload)):
        if cut in boundaries:
            Message.from_bytes(payload[:cut])
        else:
            with pytest.raises(DecodeError):
                Message.from_bytes(payload[:cut])
    with pytest.raises(DecodeError):
        Message.from_bytes(payload + b"\x00")
