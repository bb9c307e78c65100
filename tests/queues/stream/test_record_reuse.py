"""A fanout hands every stream the same payload: the stream queue makes its record head
once and reuses it, but only for the same payload object, exchange and key. A record is
that head and the payload, joined only when the chunk is."""

from amqp.message import Message
from queues.stream import queue as stream_queue
from queues.stream.chunk import encode_record


def test_the_same_payload_exchange_and_key_reuse_the_record():
    cache = stream_queue._LastRecord()
    payload = Message.build(b"x", message_annotations={"x-stream-filter-value": "blue"}).payload
    value, head = cache.get(payload, "fan", "k")
    assert (value, head + payload) == ("blue", encode_record("fan", "k", "blue", payload))
    assert cache.get(payload, "fan", "k")[1] is head  # reused
    assert cache.get(payload, "fan", "other")[1] + payload == encode_record("fan", "other", "blue", payload)
    assert cache.get(payload, "amq.fanout", "other")[1] + payload == encode_record("amq.fanout", "other", "blue",
                                                                                   payload)  # fmt: skip
    plain = Message.build(b"y").payload
    value, head = cache.get(plain, "amq.fanout", "other")
    assert (value, head + plain) == (None, encode_record("amq.fanout", "other", None, plain))


def test_a_publishers_messages_share_the_record_head_but_not_the_payload():
    cache = stream_queue._LastRecord()
    first, second = Message.build(b"one").payload, Message.build(b"two").payload
    longer = Message.build(b"three").payload
    head = cache.get(first, "", "s")[1]
    assert head + first == encode_record("", "s", None, first)
    prefix = cache.prefix
    assert cache.get(second, "", "s")[1] is head  # the same exchange, key, value and size: made once
    assert cache.get(longer, "", "s")[1] + longer == encode_record("", "s", None, longer)
    assert cache.prefix is prefix
    assert cache.get(second, "", "t")[1] + second == encode_record("", "t", None, second)


def test_filter_values_are_kept_by_annotation_bytes_and_stay_bounded(monkeypatch):
    monkeypatch.setattr(stream_queue, "_filter_value_memo", {})
    monkeypatch.setattr(stream_queue, "_FILTER_VALUE_MEMO_MAX", 3)

    def annotated(value, body=b"b"):
        return Message.build(body, message_annotations={"x-stream-filter-value": value}).payload

    assert stream_queue.filter_value_of(annotated("red")) == "red"
    assert stream_queue.filter_value_of(annotated("red", b"other body")) == "red"
    assert len(stream_queue._filter_value_memo) == 1  # the same section bytes: decoded once
    assert stream_queue.filter_value_of(annotated("green")) == "green"
    not_a_string = Message.build(b"b", message_annotations={"x-stream-filter-value": 7}).payload
    assert stream_queue.filter_value_of(not_a_string) is None
    assert stream_queue.filter_value_of(annotated("blue")) == "blue"  # the memo was full: started over
    assert len(stream_queue._filter_value_memo) == 1
    long_value = "v" * 300  # a section over the memo's size limit is decoded, never kept
    assert stream_queue.filter_value_of(annotated(long_value)) == long_value
    assert len(stream_queue._filter_value_memo) == 1
