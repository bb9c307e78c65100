"""A message store written before the index existed (store format 1: records
only, as the base commit wrote them) opens, gains its index, and its queues
recover from that index like any other."""

from __future__ import annotations

import asyncio
import struct

from rocksdict import Options, Rdict

from queues.base import QueueMessage
from queues.classic import ClassicQueue, StorePersistence, encode_record, payload_size, store_key
from storage.group_commit import GroupCommitter
from storage.message_store import MessageStore


def write_format_1(path, queue: str, messages: list[QueueMessage]) -> None:
    """The format-1 layout, byte for byte: the marker and one record per message."""
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    db = Rdict(str(path), opts)
    db[b"\x00format"] = b"\x01"
    name = queue.encode()
    for m in messages:
        db[b"m" + struct.pack(">H", len(name)) + name + struct.pack(">Q", m.seq)] = encode_record(m).encode()
    db.close()


class Recorder:
    presettled = True

    def __init__(self):
        self.got = []

    def deliver(self, queue, message):
        self.got.append(message)

    def credit_reply(self, *args):
        pass

    def queue_deleted(self):
        pass


class Host:
    def now_ms(self):
        return 0

    def call_later(self, delay, fn):
        raise AssertionError("no timer expected")


def test_a_format_1_store_gains_its_index_and_recovers(tmp_path):
    path = tmp_path / "messages"
    key = store_key("/", "old")
    old = [QueueMessage(seq, b"payload-%d" % seq, True, exchange="", routing_keys=["old"]) for seq in (3, 4, 9)]
    old[1].delivery_count = 2
    write_format_1(path, key, old)

    store = MessageStore(path, size_of=payload_size)
    assert store.indexed_queues() == [key]
    assert list(store.iter_index(key)) == [(3, 9, 0, 0), (4, 9, 0, 0), (9, 9, 0, 0)]
    store.close()

    store = MessageStore(path)  # upgraded once: the marker says format 2 now
    assert store.body_reads == 0

    async def recover():
        gc = GroupCommitter(store)
        q = ClassicQueue("/", "old", True, None, False, {}, host=Host(), persistence=StorePersistence(store, gc),
                         memory_window=2)  # fmt: skip
        q.recover_index(store.iter_index(key))
        assert q.message_count == 3 and q.ready_bytes == 27 and store.body_reads == 0
        c = Recorder()
        q.attach_consumer(c)
        q.credit(c, 0, 10, False, False)
        assert [m.payload for m in c.got] == [b"payload-3", b"payload-4", b"payload-9"]
        assert [m.delivery_count for m in c.got] == [0, 2, 0]
        q.publish(QueueMessage(0, b"new", True), None)
        assert c.got[-1].seq == 10
        await gc.close()

    asyncio.run(recover())
    store.close()
    with Rdict(str(path), Options(raw_mode=True)) as db:
        assert db[b"\x00format"] == b"\x02"
