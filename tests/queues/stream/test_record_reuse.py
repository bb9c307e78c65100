"""A fanout hands every stream the same payload: the stream queue encodes its record
once and reuses it, but only for the same payload object, exchange and key."""

from amqp.message import Message
from queues.stream import queue as stream_queue
from queues.stream.chunk import encode_record


def test_the_same_payload_exchange_and_key_reuse_the_record():
    cache = stream_queue._LastRecord()
    payload = Message.build(b"x", message_annotations={"x-stream-filter-value": "blue"}).payload
    value, record = cache.get(payload, "fan", "k")
    assert (value, record) == ("blue", encode_record("fan", "k", "blue", payload))
    assert cache.get(payload, "fan", "k")[1] is record  # reused
    assert cache.get(payload, "fan", "other")[1] == encode_record("fan", "other", "blue", payload)
    assert cache.get(payload, "amq.fanout", "other")[1] == encode_record("amq.fanout", "other", "blue", payload)
    plain = Message.build(b"y").payload
    assert cache.get(plain, "amq.fanout", "other") == (None, encode_record("amq.fanout", "other", None, plain))
