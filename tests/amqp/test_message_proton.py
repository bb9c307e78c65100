"""The lazy message view [3.2] against python-qpid-proton: messages either side
builds decode the same on the other."""

from __future__ import annotations

import uuid

import proton
from hypothesis import given, settings
from hypothesis import strategies as st

from amqp.definitions import (
    Data,
    Header,
    Properties,
)
from amqp.message import (
    DATA,
    Message,
)
from amqp.types import UByte, UInt


def enc(section) -> bytes:
    return section.encode()


HEADER_BYTES = enc(Header(durable=True, priority=UByte(6), ttl=UInt(60000), delivery_count=UInt(2)))
PROPS_BYTES = enc(Properties(message_id="id-1", to="/queues/q1", subject="k", reply_to="/queues/r"))
BODY_BYTES = enc(Data(b"hello world!"))


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
