"""The lazy message view [3.2]: section scanning, malformed input, lazy decoding
and the re-encoding of header and annotations."""

from __future__ import annotations

import tracemalloc
import uuid

import pytest
from codec_strategies import SECTION_NAMES

from amqp import decoder
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
    AMQP_SEQUENCE,
    AMQP_VALUE,
    BODY,
    DATA,
    FOOTER,
    PROPERTIES,
    Message,
)
from amqp.sections import _WIDTH
from amqp.types import Symbol, Timestamp, UByte, UInt, ULong


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
        name = SECTION_NAMES[code].encode()
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
