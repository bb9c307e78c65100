"""The bytes a consumer receives when the queue adds annotations per message
(a stream's x-stream-offset): the cached fast path must give what the general
merge gives, section by section, and leave the bare message byte for byte."""

import pytest

from amqp import definitions as d
from amqp.message import Message
from amqp.types import Long, Symbol
from node.client import delivery_bytes
from node.client.delivery_bytes import delivery_payload
from queues.base import QueueMessage

OFFSET = Symbol("x-stream-offset")


def general_merge(payload: bytes, exchange: str, key: str, added: dict) -> Message:
    """What amqp.message's merge makes of it (the path for everything the cache does not cover)."""
    annotations = {Symbol("x-exchange"): exchange, Symbol("x-routing-key"): key, **added}
    return Message.from_bytes(Message.from_bytes(payload).to_delivery_bytes({"first_acquirer": True}, annotations))


@pytest.mark.parametrize(
    "header, delivery_annotations, message_annotations",
    [
        (None, None, None),
        ({}, None, None),
        ({"durable": True, "priority": 7}, None, None),
        ({"durable": True}, None, {"x-stream-filter-value": "v7"}),  # what stream publishers send
        ({"durable": True}, {"x-opt-hop": 1}, {"x-opt-a": 1, "x-opt-b": "two"}),  # delivery annotations dropped
        ({"first_acquirer": True}, None, {"x-exchange": "published", "x-opt-c": [1, 2]}),  # routing ones replaced
    ],
)
def test_added_annotations_match_the_general_merge(header, delivery_annotations, message_annotations):
    published = Message.build(b"body", header=header, delivery_annotations=delivery_annotations,
                              message_annotations=message_annotations, properties={"message_id": "m"},
                              application_properties={"k": "v"})  # fmt: skip
    for offset in (0, 1, 2**40):  # the second and third from the cache
        added = {OFFSET: Long(offset)}
        queued = QueueMessage(offset, published.payload, True, None, 0, False, "ex", ["rk"], added)
        out = Message.from_bytes(delivery_payload(queued))
        want = general_merge(published.payload, "ex", "rk", added)
        assert out.header == want.header
        assert out.header.first_acquirer is True
        assert out.delivery_annotations is None
        assert out.message_annotations == want.message_annotations
        assert out.message_annotations[OFFSET] == offset
        assert out.message_annotations["x-exchange"] == "ex"
        assert bytes(out.bare_bytes) == bytes(published.bare_bytes)


def test_an_added_key_that_was_published_takes_the_general_path():
    published = Message.build(b"body", message_annotations={"x-stream-offset": 99})
    queued = QueueMessage(5, published.payload, True, None, 0, False, "", ["q"], {OFFSET: Long(5)})
    out = Message.from_bytes(delivery_payload(queued))
    assert out.message_annotations[OFFSET] == 5  # the queue's value wins, as in the general merge


def test_redeliveries_are_not_cached():
    published = Message.build(b"body", header={"durable": True})
    delivery_bytes._entries_cache.clear()
    queued = QueueMessage(1, published.payload, True, None, 2, True, "", ["q"], {Symbol("x-opt-note"): "n"})
    out = Message.from_bytes(delivery_payload(queued))
    assert out.header.first_acquirer is False
    assert out.header.delivery_count == 2
    assert out.message_annotations["x-opt-note"] == "n"
    assert not delivery_bytes._entries_cache


def test_a_header_is_added_when_none_was_published():
    published = Message.build(b"body")
    queued = QueueMessage(3, published.payload, True, None, 0, False, "", ["q"], {OFFSET: Long(3)})
    out = Message.from_bytes(delivery_payload(queued))
    assert out.header == d.Header(first_acquirer=True)


def test_annotation_encodings_the_shortcut_does_not_read_are_scanned():
    """A map32 header (list32) and map8/map32 annotations are read by their sizes; an
    amqp-value body right after the header works too."""
    header = d.Header(durable=True).encode()
    big = {Symbol(f"x-opt-{i}"): "v" * 20 for i in range(20)}  # over 255 bytes: map32
    rest = Message.build("value body", properties={"subject": "s"}).payload
    for annotations in ({}, {Symbol("x-opt-a"): 1}, big):
        ma = d.MessageAnnotations(annotations).encode() if annotations else b""
        payload = header + ma + rest
        assert delivery_bytes._annotations_end(payload) == len(header) + len(ma)
        queued = QueueMessage(9, payload, True, None, 0, False, "", ["q"], {OFFSET: Long(9)})
        out = Message.from_bytes(delivery_payload(queued))
        assert out.message_annotations == {**annotations, "x-exchange": "", "x-routing-key": "q", OFFSET: 9}
        assert out.body == "value body"
