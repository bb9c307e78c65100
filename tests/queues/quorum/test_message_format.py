"""Publish batches in their own binary layout (queues/quorum/message_format.py):
the publisher's bytes travel in the Raft entry and land in the body store as
they are, and what was written before (AMQP-encoded records and bodies) stays readable."""

from __future__ import annotations

import pytest

from amqp import codec
from queues.quorum import Publish, PublishBatch
from queues.quorum.message_format import pack_message, read_stored, unpack_message
from raft import records
from raft.records import RecordError

MESSAGES = [
    (b"\x00Sp\xc0\x01\x00\x00Sw\xa1\x05hello", True, None, "", ("q",), 0, None),
    (b"x" * 5000, False, 1500, "amq.topic", ("a.b", "c"), None, {"x-opt-reason": "bad", "x-opt-n": 3}),
    (b"", True, 0, "ex", (), 7, None),
]


def test_the_entry_carries_the_stored_messages_and_the_payloads_as_they_were_published():
    batch = PublishBatch.of(MESSAGES, 1700000000000, "node-a/1", 9)
    entry = records.encode(batch, prefix=b"\x00")
    assert entry[:1] == b"\x00" and entry[1] == 0xFF  # pysyncobj's command type, then a binary record
    for stored, message in zip(batch.stored, MESSAGES, strict=True):
        assert stored in entry  # one run of bytes each, the payload at its end
        assert stored.endswith(message[0])
        assert unpack_message(stored) == message
    decoded = records.decode(entry, 1)
    assert decoded == batch and type(decoded) is PublishBatch and records.applies_as_proposed(batch)
    assert decoded.stored == batch.stored
    assert [m[0] for m in decoded.messages] == [m[0] for m in MESSAGES]


def test_a_stored_message_reads_back_in_either_format():
    payload = b"\x00Sw\xa0\x03abc"
    new = pack_message(payload, True, 10, "ex", ("k1", "k2"), 3, {"x-opt-a": 1})
    old = codec.dumps([payload, True, "ex", ["k1", "k2"], {"x-opt-a": 1}])  # before format 1
    assert read_stored(new) == read_stored(old) == (payload, True, "ex", ["k1", "k2"], {"x-opt-a": 1})


def test_version_1_publish_entries_still_decode_beside_version_2():
    old = Publish(tuple(MESSAGES), 1, "p", 1)
    data = records.encode(old)
    assert data[0] != 0xFF and records.decode(data) == old
    assert records.kind_of(old) == ("quorum.publish", 1) and records.kind_of(PublishBatch) == ("quorum.publish", 3)


@pytest.mark.parametrize("cut", [1, 5, 20, -1])
def test_a_truncated_batch_is_a_record_error(cut):
    entry = records.encode(PublishBatch.of(MESSAGES, 1, "p", 1))
    with pytest.raises(RecordError):
        records.decode(entry[:cut])
    with pytest.raises(RecordError):
        records.decode(entry + b"\x00")  # trailing bytes
