"""Cross-checks whole messages against Qpid Proton (python-qpid-proton): what a
Proton message encodes Warren decodes section by section, and what Warren
encodes Proton reads back field by field."""

from __future__ import annotations

import uuid

import proton
import pytest

# the strategies live next to this file; conftest.py puts this directory on sys.path
from codec_strategies import (
    PRIMITIVES,
    canon,
    symbols,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proton import Message
from proton_mapping import (
    COMPOSITES,
    SECTIONS,
    as_described,
    from_proton,
    to_proton,
)

from amqp import codec
from amqp import definitions as d
from amqp.types import (
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
)


def _settings(n):
    return settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.too_slow])


SETTINGS = _settings(200)
PER_CLASS = _settings(25)


# ------------------------------------------------------------------ messages


def _sections(data: bytes) -> list:
    pos, out = 0, []
    while pos < len(data):
        v, pos = codec.decode(data, pos)
        out.append(v)
    return out


def _by_type(sections: list) -> dict:
    found = {}
    for s in sections:
        assert type(s) not in found, "a section appears twice"
        found[type(s)] = s
    return found


# times proton takes in seconds and sends in milliseconds: keep them exact
# Proton's message fields go through C strings: no NUL characters
_c_text = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=20)


def _millis(hi):
    return st.integers(0, hi).filter(lambda ms: int(ms / 1000 * 1000) == ms)


_simple = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(1 << 63), (1 << 63) - 1),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.binary(max_size=20),
    st.uuids(),
    PRIMITIVES["uint"],
    PRIMITIVES["ubyte"],
    PRIMITIVES["timestamp"],
    symbols,
)
_bodies = st.one_of(
    st.tuples(st.just("data"), st.binary(max_size=300)),
    st.tuples(st.just("value"), st.text(max_size=60)),
    st.tuples(st.just("value"), st.dictionaries(st.text(max_size=10), _simple, max_size=4)),
    st.tuples(st.just("value"), st.binary(max_size=30)),
    st.tuples(st.just("sequence"), st.lists(_simple, max_size=6)),
)

MESSAGE_FIELDS = {
    "durable": st.booleans(),
    "priority": st.integers(0, 255),
    "ttl": _millis(0xFFFFFFFF),
    "first_acquirer": st.booleans(),
    "delivery_count": st.integers(0, 0xFFFFFFFF),
    "id": st.one_of(PRIMITIVES["ulong"], st.uuids(), st.binary(max_size=40), _c_text),
    "user_id": st.binary(max_size=20),
    "address": _c_text,
    "subject": _c_text,
    "reply_to": _c_text,
    "correlation_id": st.one_of(PRIMITIVES["ulong"], st.uuids(), st.binary(max_size=40), _c_text),
    "content_type": st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=20),
    "content_encoding": st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=20),
    "expiry_time": _millis(1 << 45),
    "creation_time": _millis(1 << 45),
    "group_id": _c_text,
    "group_sequence": st.integers(0, (1 << 31) - 1),
    "reply_to_group_id": _c_text,
    "properties": st.dictionaries(st.text(max_size=12), _simple, max_size=5),
    "annotations": st.dictionaries(symbols, _simple, max_size=4),
    "instructions": st.dictionaries(symbols, _simple, max_size=3),
}


def _proton_message(fields: dict, body) -> Message:
    m = Message()
    for k, v in fields.items():
        if k in ("ttl", "expiry_time", "creation_time"):
            v = v / 1000  # Proton takes seconds
        elif k in ("id", "correlation_id", "properties", "annotations", "instructions"):
            v = to_proton(v)
        setattr(m, k, v)
    kind, value = body
    m.inferred = kind != "value"  # binary -> data, list -> amqp-sequence
    m.body = to_proton(value)
    return m


def _same_id(got, want) -> bool:
    if isinstance(got, memoryview):
        got = bytes(got)
    if want in (None, "", b""):  # Proton may leave an empty id out
        return got in (None, want)
    if type(want) is ULong:  # Proton's Message gives a ulong id as a plain int
        return isinstance(got, int) and got == want
    return canon(got) == canon(want)


def _c_string(v) -> str:
    """What Proton's Message gives for a string field: its C string, cut at
    the first NUL."""
    return (v or "").split("\x00")[0]


def _unset(v):
    """Proton's Message gives an absent content type or encoding as symbol("None")."""
    return None if v == "None" else v


@_settings(100)
@given(st.dictionaries(st.sampled_from(sorted(MESSAGE_FIELDS)), st.none()).flatmap(
    lambda keys: st.fixed_dictionaries({k: MESSAGE_FIELDS[k] for k in keys})
), _bodies)  # fmt: skip
def test_proton_message_decodes_in_warren(fields, body):
    data = _proton_message(fields, body).encode()
    found = _by_type(_sections(data))
    f = fields.get

    header = found.get(d.Header, d.Header())
    assert header.durable == f("durable", False)
    assert header.priority == f("priority", 4)
    assert (header.ttl or 0) == f("ttl", 0)
    assert header.first_acquirer == f("first_acquirer", False)
    assert header.delivery_count == f("delivery_count", 0)

    props = found.get(d.Properties, d.Properties())
    assert _same_id(props.message_id, f("id")), (props.message_id, f("id"))
    assert _same_id(props.correlation_id, f("correlation_id"))
    assert (props.user_id or b"") == f("user_id", b"")
    for warren, key in (("to", "address"), ("subject", "subject"), ("reply_to", "reply_to"), ("group_id", "group_id"),
                        ("reply_to_group_id", "reply_to_group_id")):  # fmt: skip
        assert (getattr(props, warren) or "") == (f(key) or ""), key
    for key in ("content_type", "content_encoding"):
        got = getattr(props, key)
        assert (got is None and not f(key)) or (type(got) is Symbol and got == f(key)), key
    for key in ("creation_time", "absolute_expiry_time"):
        got = getattr(props, key)
        want = f("expiry_time" if key == "absolute_expiry_time" else key)
        assert (got is None and not want) or (type(got) is Timestamp and got == want), key
    assert (props.group_sequence or 0) == f("group_sequence", 0)

    if f("properties"):
        app = found[d.ApplicationProperties]
        assert canon(dict(app)) == canon(fields["properties"])
        assert all(type(k) is str for k in app)
    if f("annotations"):
        assert canon(dict(found[d.MessageAnnotations])) == canon(fields["annotations"])
    if f("instructions"):
        assert canon(dict(found[d.DeliveryAnnotations])) == canon(fields["instructions"])

    kind, value = body
    if kind == "data":
        assert found[d.Data] == value and type(found[d.Data]) is d.Data
    elif kind == "sequence":
        assert canon(list(found[d.AmqpSequence])) == canon(value)
    else:
        assert canon(found[d.AmqpValue].value) == canon(value)


@_settings(100)
@given(
    COMPOSITES["Header"],
    COMPOSITES["Properties"],
    SECTIONS["DeliveryAnnotations"],
    SECTIONS["MessageAnnotations"],
    st.dictionaries(st.text(max_size=12), _simple, max_size=5).map(d.ApplicationProperties),
    st.one_of(SECTIONS["Data"], SECTIONS["AmqpSequence"], SECTIONS["AmqpValue"]),
)
def test_warren_sections_decode_in_proton(header, props, delivery_ann, message_ann, app_props, body):
    data = b"".join(s.encode() for s in (header, delivery_ann, message_ann, props, app_props, body))
    m = Message()
    m.decode(data)

    assert m.durable == header.durable
    assert m.priority == header.priority
    assert m.ttl * 1000 == pytest.approx(header.ttl or 0)
    assert m.first_acquirer == header.first_acquirer
    assert m.delivery_count == header.delivery_count

    assert _same_id(from_proton(m.id), props.message_id)
    assert _same_id(from_proton(m.correlation_id), props.correlation_id)
    assert (m.user_id or b"") == (props.user_id or b"")
    assert (m.address or "") == _c_string(props.to)
    assert (m.subject or "") == _c_string(props.subject)
    assert (m.reply_to or "") == _c_string(props.reply_to)
    for key in ("content_type", "content_encoding"):
        want = getattr(props, key)
        # the value "None" itself reads back as absent: proton cannot tell the two apart
        assert _unset(getattr(m, key)) == (None if want is None else _unset(_c_string(want))), key
    assert m.expiry_time * 1000 == pytest.approx(props.absolute_expiry_time or 0)
    assert m.creation_time * 1000 == pytest.approx(props.creation_time or 0)
    assert (m.group_id or "") == _c_string(props.group_id)
    assert (m.reply_to_group_id or "") == _c_string(props.reply_to_group_id)
    assert m.group_sequence & 0xFFFFFFFF == (props.group_sequence or 0)

    assert canon(from_proton(m.properties or {})) == canon(dict(app_props))
    assert canon(from_proton(m.annotations or {})) == canon(as_described(dict(message_ann)))
    assert canon(from_proton(m.instructions or {})) == canon(as_described(dict(delivery_ann)))

    if type(body) is d.Data:
        assert m.body == bytes(body) and m.inferred
    elif type(body) is d.AmqpSequence:
        assert canon(from_proton(m.body)) == canon(list(body)) and m.inferred
    else:
        assert canon(from_proton(m.body)) == canon(body.value) and not m.inferred


def test_proton_message_example():
    m = Message(
        body=b"hello",
        durable=True,
        priority=7,
        ttl=1.5,
        first_acquirer=True,
        delivery_count=3,
        id=proton.ulong(5),
        user_id=b"u",
        address="queue-a",
        subject="s",
        reply_to="r",
        correlation_id=uuid.UUID(int=7),
        content_type="text/plain",
        content_encoding="utf-8",
        expiry_time=100.25,
        creation_time=50.5,
        group_id="g",
        group_sequence=4,
        reply_to_group_id="rg",
        properties={"k": 1, "x": "y"},
        annotations={proton.symbol("x-opt-a"): "v"},
        instructions={proton.symbol("x-opt-i"): proton.uint(1)},
    )
    m.inferred = True
    sections = _sections(m.encode())
    assert [type(s) for s in sections] == [
        d.Header, d.DeliveryAnnotations, d.MessageAnnotations, d.Properties, d.ApplicationProperties, d.Data,
    ]  # fmt: skip
    header, da, ma, props, app, data = sections
    assert header == d.Header(durable=True, priority=7, ttl=1500, first_acquirer=True, delivery_count=3)
    assert type(header.priority) is UByte and type(header.ttl) is UInt
    assert props.message_id == 5 and type(props.message_id) is ULong
    assert props.correlation_id == uuid.UUID(int=7)
    assert props.to == "queue-a" and props.content_type == "text/plain" and type(props.content_type) is Symbol
    assert props.absolute_expiry_time == 100250 and props.creation_time == 50500
    assert props.group_sequence == 4 and props.reply_to_group_id == "rg"
    assert app == {"k": 1, "x": "y"}
    assert ma == {"x-opt-a": "v"} and type(next(iter(ma))) is Symbol
    assert da == {"x-opt-i": 1} and type(da["x-opt-i"]) is UInt
    assert data == b"hello"

    # and Warren's encoding of the same sections is what Proton decodes
    m2 = Message()
    m2.decode(b"".join(s.encode() for s in sections))
    for attr in ("durable", "priority", "ttl", "id", "user_id", "address", "correlation_id", "content_type",
                 "expiry_time", "creation_time", "group_sequence", "properties", "annotations", "body"):  # fmt: skip
        assert getattr(m2, attr) == getattr(m, attr), attr
