"""The lazy message view [3.2]: section scanning, lazy decoding, re-encoding
of header and annotations, and interoperability with python-qpid-proton."""

from __future__ import annotations

import re
import tracemalloc
import uuid

import proton
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from amqp import codec, decoder
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
    AMQP_SEQUENCE,
    AMQP_VALUE,
    BODY,
    DATA,
    FOOTER,
    HEADER,
    PROPERTIES,
    Message,
    _quick_composite,
)
from amqp.sections import _WIDTH
from amqp.types import Byte, Char, Decimal32, Int, Symbol, Timestamp, UByte, UInt, ULong, UShort


def enc(section) -> bytes:
    return section.encode()


HEADER_BYTES = enc(Header(durable=True, priority=UByte(6), ttl=UInt(60000), delivery_count=UInt(2)))
PROPS_BYTES = enc(Properties(message_id="id-1", to="/queues/q1", subject="k", reply_to="/queues/r"))
BODY_BYTES = enc(Data(b"hello world!"))


# ---------------------------------------------------------------- scanning and accessors


def test_typical_message_fields():
    payload = HEADER_BYTES + PROPS_BYTES + BODY_BYTES
    m = Message.from_bytes(payload)
    assert m.payload is payload
    assert (m.durable, m.priority, m.ttl, m.delivery_count, m.first_acquirer) == (True, 6, 60000, 2, False)
    assert (m.message_id, m.to, m.subject, m.reply_to) == ("id-1", "/queues/q1", "k", "/queues/r")
    assert m.correlation_id is None and m.absolute_expiry_time is None
    assert m.delivery_annotations is None and m.message_annotations is None
    assert m.application_properties is None and m.footer is None
    assert m.body == b"hello world!" and m.body_kind == DATA
    assert bytes(m.bare_bytes) == PROPS_BYTES + BODY_BYTES
    assert bytes(m.body_bytes) == BODY_BYTES
    assert len(m) == len(payload)
    assert m.sizes == (len(HEADER_BYTES), 0, 0, len(PROPS_BYTES), 0, len(BODY_BYTES), 0,
                       len(PROPS_BYTES) + len(BODY_BYTES))  # fmt: skip
    assert m.header is m.header  # cached


def test_message_without_header_has_header_defaults():
    m = Message.from_bytes(BODY_BYTES)
    assert m.header is None
    assert (m.durable, m.priority, m.ttl, m.delivery_count, m.first_acquirer) == (False, 4, None, 0, False)
    assert m.properties is None and m.to is None and m.message_id is None


def test_empty_payload_and_missing_body_are_accepted():
    assert Message.from_bytes(b"").sizes == (0,) * 8
    m = Message.from_bytes(HEADER_BYTES + PROPS_BYTES)
    assert m.body_kind == 0 and m.body is None and m.body_sections == ()
    assert m.to == "/queues/q1"


def test_all_sections_round_trip():
    m = Message.build(
        [1, "two", None],
        header={"durable": True, "first_acquirer": True},
        delivery_annotations={"x-opt-d": 1},
        message_annotations={"x-opt-m": "v", ULong(7): True},
        properties={"message_id": ULong(9), "correlation_id": uuid.UUID(int=5), "absolute_expiry_time": Timestamp(10)},
        application_properties={"a": 1, "b": [1, 2]},
        footer={"x-sig": b"\x01\x02"},
        body_kind="sequence",
    )
    again = Message.from_bytes(m.payload)
    assert again.header == Header(durable=True, first_acquirer=True)
    assert again.delivery_annotations == {"x-opt-d": 1}
    assert type(next(iter(again.delivery_annotations))) is Symbol  # annotation keys are symbols [3.2.10]
    assert again.message_annotations == {"x-opt-m": "v", 7: True}
    assert (again.message_id, again.correlation_id, again.absolute_expiry_time) == (9, uuid.UUID(int=5), 10)
    assert again.application_properties == {"a": 1, "b": [1, 2]}
    assert again.footer == {"x-sig": b"\x01\x02"}
    assert again.body == [1, "two", None] and again.body_kind == AMQP_SEQUENCE
    assert sum(again.sizes[:7]) == len(again)


@pytest.mark.parametrize(
    ("kwargs", "kind", "body", "sections"),
    [
        ({"body": b"abc"}, DATA, b"abc", (Data(b"abc"),)),
        ({"body": [b"ab", b"c"], "body_kind": "data"}, DATA, b"abc", (Data(b"ab"), Data(b"c"))),
        ({"body": "text"}, AMQP_VALUE, "text", (AmqpValue("text"),)),
        ({"body": None}, AMQP_VALUE, None, (AmqpValue(None),)),
        ({"body": b"raw", "body_kind": "value"}, AMQP_VALUE, b"raw", (AmqpValue(b"raw"),)),
        ({"body": [1, 2], "body_kind": "sequence"}, AMQP_SEQUENCE, [1, 2], (AmqpSequence([1, 2]),)),
        (
            {"body_sections": [AmqpSequence([1]), AmqpSequence([2, 3])]},
            AMQP_SEQUENCE,
            [1, 2, 3],
            (AmqpSequence([1]), AmqpSequence([2, 3])),
        ),
        ({}, 0, None, ()),
    ],
)
def test_build_body_kinds(kwargs, kind, body, sections):
    m = Message.build(**kwargs)
    assert m.body_kind == kind
    assert m.body == body
    assert m.body_sections == sections


def test_alternative_descriptor_encodings():
    """A section descriptor may be a ulong in any width or the symbolic
    name [1.5]; clients use smallulong but the others are valid."""
    plain = Message.build(b"x", header={"durable": True}, properties={"to": "q"})
    wide = bytearray()
    named = bytearray()
    for start, end in ((0, plain._b[1]), (plain._b[PROPERTIES], plain._b[BODY]), (plain._b[BODY], len(plain))):
        section = plain.payload[start:end]
        code = section[2]
        wide += b"\x00\x80" + code.to_bytes(8, "big") + section[3:]
        name = _SYMBOLIC[code].encode()
        named += b"\x00\xa3" + bytes((len(name),)) + name + section[3:]
    for payload in (bytes(wide), bytes(named)):
        m = Message.from_bytes(payload)
        assert (m.durable, m.to, m.body, m.body_kind) == (True, "q", b"x", DATA)
        assert m.header == plain.header and m.properties == plain.properties


# ---------------------------------------------------------------- malformed input


def _sections(spec: str) -> bytes:
    """Encodes a message from letters: H D M P A d(ata) s(equence) v(alue) F."""
    return b"".join(enc(_SECTION_SAMPLES[c]) for c in spec)


_SECTION_SAMPLES = {
    "H": Header(durable=True),
    "D": DeliveryAnnotations({"x-d": 1}),
    "M": MessageAnnotations({"x-m": 1}),
    "P": Properties(to="q"),
    "A": ApplicationProperties({"a": 1}),
    "d": Data(b"data"),
    "s": AmqpSequence([1]),
    "v": AmqpValue("v"),
    "F": Footer({"f": 1}),
}


@pytest.mark.parametrize(
    ("spec", "complaint"),
    [
        ("PH", "header section after properties"),
        ("HH", "more than one header"),
        ("HMD", "delivery-annotations section after message-annotations"),
        ("MM", "more than one message-annotations"),
        ("dP", "properties section after data"),
        ("AP", "properties section after application-properties"),
        ("dv", "amqp-value section in a body of data sections"),
        ("ds", "amqp-sequence section in a body of data sections"),
        ("sd", "data section in a body of amqp-sequence sections"),
        ("vv", "at most one amqp-value"),
        ("vd", "data section in a body of amqp-value sections"),
        ("FF", "after the footer"),
        ("dFd", "after the footer"),
        ("HFP", "after the footer"),
    ],
)
def test_out_of_order_sections_are_rejected(spec, complaint):
    with pytest.raises(DecodeError, match=complaint):
        Message.from_bytes(_sections(spec))


@pytest.mark.parametrize(
    ("payload", "complaint"),
    [
        (b"\x45", "expected a described section"),
        (HEADER_BYTES + b"\x40\x40\x40\x40", "expected a described section"),
        (b"\x00\x53\x10\x45", "not a message section"),  # a performative's descriptor
        (b"\x00\x53\x79\x45", "not a message section"),
        (b"\x00\x52\x70\x45", "ulong or a symbol"),  # a uint descriptor
        (b"\x00\x44\x45\x45", "not a message section"),
        (b"\x00\x80" + (1 << 32 | 0x70).to_bytes(8, "big") + b"\x45", "not a message section"),
        (b"\x00\xa3\x04amqp\x45", "not a message section"),
        (b"\x00\x53\x70\xc1\x01\x00", "header section holds constructor 0xc1"),
        (b"\x00\x53\x75\xa1\x01a", "data section holds constructor 0xa1"),
        (b"\x00\x53\x72\xc0\x01\x00", "message-annotations section holds constructor 0xc0"),
        (b"\x00\x53\x71\x40", "delivery-annotations section holds constructor 0x40"),
        (b"\x00\x53\x73\xc1\x01\x00", "properties section holds constructor 0xc1"),
        (b"\x00\x53\x74\x45", "application-properties section holds constructor 0x45"),
        (b"\x00\x53\x76\xc1\x01\x00", "amqp-sequence section holds constructor 0xc1"),
        (b"\x00\x53\x76\xe0\x02\x00\x40", "amqp-sequence section holds constructor 0xe0"),
        (b"\x00\x53\x78\xd0\x00\x00\x00\x04\x00\x00\x00\x00", "footer section holds constructor 0xd0"),
        (b"\x00\x53\x77\xff", "invalid constructor 0xff"),
        (b"\x00\x53\x75\xa0\x05abc", "truncated"),
        (b"\x00\x53\x75\xb0\x00\x00\x01\x00abc", "truncated"),
        (b"\x00\x53\x75", "truncated"),
        (HEADER_BYTES + b"\x00", "truncated"),
        (b"\x00\x53\x77\x00\x53\x01\xa1\x09abc", "truncated"),  # described amqp-value
        (b"\x00\x53\x77" + b"\x00" * 200 + b"\x40", "nested too deeply"),
    ],
)
def test_malformed_sections_are_rejected(payload, complaint):
    with pytest.raises(DecodeError, match=complaint):
        Message.from_bytes(payload)


def test_section_contents_are_checked_when_decoded():
    # size-correct but invalid: a header whose priority is a string
    payload = b"\x00\x53\x70\xc0\x05\x02\x40\xa1\x01x" + BODY_BYTES
    m = Message.from_bytes(payload)
    assert m.body == b"hello world!"
    with pytest.raises(DecodeError):
        _ = m.header
    with pytest.raises(DecodeError):
        _ = m.durable


def test_skip_table_matches_codec_constructors():
    valid = {c for c in range(256) if decoder._READERS[c] is not None}
    assert {c for c in range(256) if _WIDTH[c] > -8} | {0x00} == valid


# ---------------------------------------------------------------- laziness


def test_garbage_body_is_not_decoded_by_scanning():
    """An amqp-value whose contents are invalid but whose size is right
    scans fine and the other sections decode; only the body access fails."""
    for garbage in (
        b"\x00\x53\x77\xc0\x03\x01\xff\xff",  # list with an invalid constructor
        b"\x00\x53\x77\xa1\x02\xff\xfe",  # string that is not UTF-8
        b"\x00\x53\x76\xd0\x00\x00\x00\x06\x00\x00\x00\x09\x71\x00",  # count does not fit
    ):
        m = Message.from_bytes(HEADER_BYTES + PROPS_BYTES + garbage)
        assert m.to == "/queues/q1" and m.durable
        assert bytes(m.body_bytes) == garbage
        with pytest.raises(DecodeError):
            _ = m.body
        assert m.to_delivery_bytes({"delivery_count": 7}).endswith(PROPS_BYTES + garbage)


def test_huge_body_is_neither_copied_nor_decoded():
    body = b"\xa5" * (32 << 20)
    payload = HEADER_BYTES + PROPS_BYTES + enc(Data(body))
    tracemalloc.start()
    try:
        m = Message.from_bytes(payload)
        assert (m.to, m.durable) == ("/queues/q1", True)
        bare, body_bytes = m.bare_bytes, m.body_bytes
        changed = m.with_message_annotations({"x-opt-k": 1})
        _, peak = tracemalloc.get_traced_memory()
        assert changed.message_annotations == {"x-opt-k": 1}
    finally:
        tracemalloc.stop()
    # one copy for the new payload of `changed`, nothing else of body size
    assert len(body) < peak < len(body) + (1 << 20)
    assert bare.obj is payload and body_bytes.obj is payload
    assert len(body_bytes) == len(body) + 8


def test_bytearray_payload_is_copied_once_into_bytes():
    raw = bytearray(HEADER_BYTES + BODY_BYTES)
    m = Message.from_bytes(raw)
    raw[0] = 0xFF
    assert type(m.payload) is bytes and m.durable


# ---------------------------------------------------------------- re-encoding


def test_unchanged_rewrites_return_the_same_bytes():
    payload = HEADER_BYTES + PROPS_BYTES + BODY_BYTES
    m = Message.from_bytes(payload)
    assert m.to_delivery_bytes() is payload
    assert m.to_delivery_bytes({"delivery_count": 2, "durable": True}, {}) is payload
    assert m.with_header(priority=6) is m
    assert m.with_delivery_count(2) is m
    assert m.with_first_acquirer(False) is m
    assert m.with_message_annotations({}) is m
    annotated = Message.build(b"x", message_annotations={"x-opt-a": 1})
    assert annotated.with_message_annotations({"x-opt-a": 1}) is annotated
    assert annotated.with_message_annotations({"x-opt-a": 1.0}) is not annotated  # a double is not a long
    headerless = Message.from_bytes(BODY_BYTES)
    assert headerless.with_delivery_count(0) is headerless
    assert headerless.to_delivery_bytes({"priority": 4}) is headerless.payload


def test_with_header_changes_only_the_header():
    m = Message.build(
        b"body",
        header={"durable": True},
        delivery_annotations={"x-d": 1},
        properties={"to": "q"},
        footer={"f": 2},
    )
    for changed in (m.with_delivery_count(3), m.with_header(delivery_count=3)):
        assert changed.delivery_count == 3 and changed.durable
        assert bytes(changed.bare_bytes) == bytes(m.bare_bytes)
        assert changed.delivery_annotations == {"x-d": 1}  # kept by with_*
        assert changed.footer == {"f": 2}
        rescanned = Message.from_bytes(changed.payload)
        assert rescanned._b == changed._b and rescanned.body_kind == changed.body_kind
    added = Message.from_bytes(BODY_BYTES).with_first_acquirer(True)
    assert added.header == Header(first_acquirer=True)
    assert bytes(added.body_bytes) == BODY_BYTES
    with pytest.raises(TypeError, match="not header fields: colour"):
        m.with_header(colour="red")


def test_with_message_annotations_merges():
    m = Message.build(b"x", message_annotations={"x-opt-a": 1, "x-opt-b": 2}, properties={"subject": "s"})
    changed = m.with_message_annotations({"x-opt-b": 3, "x-opt-c": "new"})
    assert changed.message_annotations == {"x-opt-a": 1, "x-opt-b": 3, "x-opt-c": "new"}
    assert all(type(k) is Symbol for k in changed.message_annotations)
    assert changed.subject == "s" and bytes(changed.bare_bytes) == bytes(m.bare_bytes)
    assert Message.from_bytes(changed.payload)._b == changed._b


def test_to_delivery_bytes_drops_delivery_annotations_and_keeps_the_rest():
    m = Message.build(
        {"k": "v"},
        header={"durable": True},
        delivery_annotations={"x-d": 1},
        message_annotations={"x-m": 1},
        properties={"to": "q"},
        application_properties={"a": 1},
        footer={"f": 1},
    )
    out = Message.from_bytes(m.to_delivery_bytes())
    assert out.delivery_annotations is None
    assert out.header == m.header and out.message_annotations == m.message_annotations
    assert bytes(out.bare_bytes) == bytes(m.bare_bytes)
    assert out.footer == {"f": 1}
    out = Message.from_bytes(m.to_delivery_bytes({"delivery_count": 1}, {"x-n": True}))
    assert (out.delivery_count, out.durable) == (1, True)
    assert out.message_annotations == {"x-m": 1, "x-n": True}
    assert bytes(out.bare_bytes) + bytes(out.section_bytes(FOOTER)) == m.payload[m._b[PROPERTIES] :]


# ---------------------------------------------------------------- python-qpid-proton


def _ms(seconds):
    return None if seconds is None else round(seconds * 1000)


def _assert_same_fields(m: Message, pm: proton.Message) -> None:
    """Our view of a payload agrees with proton's decoding of it."""
    assert m.durable == pm.durable
    assert m.priority == pm.priority
    assert m.ttl == (_ms(pm.ttl) or None)  # proton reports no ttl as 0
    assert m.first_acquirer == pm.first_acquirer
    assert m.delivery_count == pm.delivery_count
    assert m.message_id == pm.id
    assert m.correlation_id == pm.correlation_id
    assert m.to == pm.address
    assert m.subject == pm.subject
    assert m.reply_to == pm.reply_to
    assert m.user_id == (pm.user_id or None)
    # proton reports a missing content-type as symbol("None")
    assert m.content_type == (None if pm.content_type == "None" else pm.content_type)
    assert m.absolute_expiry_time == (_ms(pm.expiry_time) or None)
    assert m.creation_time == (_ms(pm.creation_time) or None)
    assert m.group_id == pm.group_id
    assert (m.delivery_annotations or None) == (pm.instructions or None)
    assert (m.message_annotations or None) == (pm.annotations or None)
    assert (m.application_properties or None) == (pm.properties or None)
    body = pm.body
    if isinstance(body, memoryview):
        body = bytes(body)
    assert m.body == body


def test_proton_message_with_every_field():
    pm = proton.Message(
        body=b"hello",
        inferred=True,
        id="abc",
        correlation_id=5,
        ttl=1.5,
        expiry_time=1000.0,
        creation_time=5.0,
        priority=7,
        delivery_count=3,
        first_acquirer=True,
        durable=True,
        user_id=b"u",
        subject="s",
        reply_to="r",
        address="/queues/q",
        content_type="text/plain",
        group_id="g",
        group_sequence=3,
        reply_to_group_id="rg",
        instructions={"x-opt-i": 1},
        annotations={"x-opt-a": "v"},
        properties={"k": [1, 2], "n": None},
    )
    m = Message.from_bytes(pm.encode())
    assert (m.ttl, m.absolute_expiry_time, m.creation_time) == (1500, 1_000_000, 5000)
    assert m.body_kind == DATA
    _assert_same_fields(m, pm)
    assert m.properties.group_sequence == 3 and m.properties.reply_to_group_id == "rg"


def test_proton_decodes_to_delivery_bytes():
    pm = proton.Message(
        body={"k": [1, 2.5, "x"]},
        id=uuid.UUID(int=42),
        durable=True,
        ttl=2.0,
        address="/queues/q",
        instructions={"x-opt-i": 1},
        annotations={"x-opt-a": "v"},
        properties={"p": "v"},
    )
    m = Message.from_bytes(pm.encode())
    out = proton.Message()
    out.decode(m.to_delivery_bytes({"delivery_count": 4, "first_acquirer": True}, {"x-opt-b": 7}))
    assert (out.delivery_count, out.first_acquirer, out.durable, out.ttl) == (4, True, True, 2.0)
    assert out.instructions is None
    assert out.annotations == {"x-opt-a": "v", "x-opt-b": 7}
    assert (out.id, out.address, out.properties, out.body) == (pm.id, pm.address, pm.properties, pm.body)


def test_proton_decodes_built_messages():
    m = Message.build(
        [1, 2],
        body_kind="sequence",
        header={"priority": UByte(9), "ttl": UInt(500)},
        properties={"message_id": "m", "to": "/queues/q", "correlation_id": b"c", "subject": "200"},
        application_properties={"a": "b"},
    )
    pm = proton.Message()
    pm.decode(m.payload)
    assert (pm.priority, pm.ttl, pm.id, pm.address, pm.correlation_id, pm.subject) == (
        9, 0.5, "m", "/queues/q", b"c", "200",
    )  # fmt: skip
    assert pm.properties == {"a": "b"} and pm.body == [1, 2]


_text = st.text(max_size=20)
_ids = st.one_of(st.none(), _text, st.integers(0, 2**64 - 1), st.uuids(), st.binary(max_size=8))
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), _text, st.binary(max_size=20),
    st.floats(allow_nan=False),
)  # fmt: skip
_annotation_keys = st.text("abcxyz-", min_size=1, max_size=8).map(lambda s: proton.symbol("x-opt-" + s))
_seconds = st.integers(1, 2**40).map(lambda ms: ms / 1000)


@settings(max_examples=150, deadline=None)
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "durable": st.booleans(),
            "priority": st.integers(0, 255),
            "ttl": st.integers(1, 2**32 - 1).map(lambda ms: ms / 1000),
            "first_acquirer": st.booleans(),
            "delivery_count": st.integers(0, 2**32 - 1),
            "id": _ids,
            "correlation_id": _ids,
            "user_id": st.binary(min_size=1, max_size=10),
            "address": _text,
            "subject": _text,
            "reply_to": _text,
            "content_type": st.text("abc/", max_size=10).map(proton.symbol),
            "expiry_time": _seconds,
            "creation_time": _seconds,
            "group_id": _text,
            "instructions": st.dictionaries(_annotation_keys, _scalars, max_size=3),
            "annotations": st.dictionaries(_annotation_keys, _scalars, max_size=3),
            "properties": st.dictionaries(_text, _scalars, max_size=3),
        },
    ),
    st.one_of(
        st.none(),
        st.binary(max_size=40).map(lambda b: (b, True)),
        st.lists(st.integers(-5, 5), max_size=4).map(lambda v: (v, True)),
        _scalars.map(lambda v: (v, False)),
    ),
    st.fixed_dictionaries({}, optional={"delivery_count": st.integers(0, 9), "first_acquirer": st.booleans()}),
    st.dictionaries(_annotation_keys, _scalars, max_size=2),
)
def test_proton_interop(fields, body, header_changes, annotations_merge):
    pm = proton.Message(**fields)
    if body is not None:
        pm.body, pm.inferred = body
    payload = pm.encode()
    m = Message.from_bytes(payload)
    _assert_same_fields(m, pm)

    out_bytes = m.to_delivery_bytes(header_changes, annotations_merge)
    out = proton.Message()
    out.decode(out_bytes)
    expected = proton.Message()
    expected.decode(payload)
    for name, value in header_changes.items():
        setattr(expected, name, value)
    if annotations_merge:
        expected.annotations = {**(expected.annotations or {}), **annotations_merge}
    expected.instructions = None
    for name in (
        "durable", "priority", "ttl", "first_acquirer", "delivery_count", "id", "correlation_id", "user_id",
        "address", "subject", "reply_to", "content_type", "expiry_time", "creation_time", "group_id",
        "instructions", "annotations", "properties", "inferred",
    ):  # fmt: skip
        assert getattr(out, name) == getattr(expected, name), name
    assert (bytes(out.body) if isinstance(out.body, memoryview) else out.body) == m.body
    assert bytes(Message.from_bytes(out_bytes).bare_bytes) == bytes(m.bare_bytes)


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
_SYMBOLIC = {
    0x70: "amqp:header:list", 0x71: "amqp:delivery-annotations:map", 0x72: "amqp:message-annotations:map",
    0x73: "amqp:properties:list", 0x74: "amqp:application-properties:map", 0x75: "amqp:data:binary",
    0x76: "amqp:amqp-sequence:list", 0x77: "amqp:value:*", 0x78: "amqp:footer:map",
}  # fmt: skip


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
            name = _SYMBOLIC[raw[2]].encode()
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
