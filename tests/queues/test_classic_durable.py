"""ClassicQueue over the real MessageStore and GroupCommitter: confirms wait
for the fsync, and a restart brings the messages back as they were."""

from __future__ import annotations

import asyncio

import pytest

from amqp.types import Symbol, UInt
from queues.base import ACCEPT, RELEASE, Outcome, QueueMessage, Settlement
from queues.classic import (
    ENVELOPE_VERSION,
    ClassicQueue,
    StorePersistence,
    decode_record,
    encode_record,
)
from storage.group_commit import GroupCommitter
from storage.message_store import MessageStore, Record, StoreFormatError

from .classic_fakes import T0, FakeConsumer, FakeHost, grant


def make(host, persistence, name="q", **arguments):
    args = {k.replace("_", "-"): v for k, v in arguments.items()}
    return ClassicQueue("/", name, True, None, False, args, host=host, persistence=persistence)


def durable_msg(body: bytes, **kw) -> QueueMessage:
    kw.setdefault("exchange", "amq.topic")
    kw.setdefault("routing_keys", ["a.b"])
    return QueueMessage(0, body, True, **kw)


async def until(predicate, turns: int = 5_000) -> None:
    for _ in range(turns):
        if predicate():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("condition never became true")


def test_envelope_round_trip():
    m = QueueMessage(
        7, b"\x00\x53\x75payload", True, T0 + 5, 3, True, "ex", ["k1", "k2"], {Symbol("x-opt-a"): UInt(5), "s": [1]}
    )
    back = decode_record(7, encode_record(m))
    assert back == m
    assert type(next(iter(back.annotations))) is Symbol and type(back.annotations[Symbol("x-opt-a")]) is UInt
    plain = QueueMessage(1, b"", True, routing_keys=[])
    # whatever was stored, a recovered message counts as acquired
    assert decode_record(1, encode_record(plain)) == QueueMessage(1, b"", True, routing_keys=[], acquired=True)
    record = encode_record(m)
    assert record.body[0] == ENVELOPE_VERSION and record.flags == 1 and record.delivery_count == 3
    assert decode_record(7, Record.decode(record.encode())) == m


def test_envelope_rejects_unknown_version_and_garbage():
    good = encode_record(QueueMessage(0, b"x", True))
    for body in (b"", bytes([9]) + good.body[1:], good.body[:5] + b"\xff\xff", b"\x01\x00\x00\x10\x00abc"):
        with pytest.raises(StoreFormatError):
            decode_record(0, Record(body=body))


def test_confirm_arrives_only_after_the_commit(tmp_path):
    store = MessageStore(tmp_path / "messages")

    async def main():
        gc = GroupCommitter(store)
        q = make(FakeHost(), StorePersistence(store, gc))
        confirmed = []

        def confirm(seq):
            def cb(outcome):
                # On the loop, after the synced write: the record is readable.
                assert outcome is Outcome.ACCEPTED
                assert store.get(q.store_key, seq) is not None
                confirmed.append(seq)

            return cb

        for i in range(50):
            q.publish(durable_msg(b"m%d" % i), confirm(i))
        assert confirmed == [] and store.durable_seq() == 0
        q.publish(QueueMessage(0, b"transient", False), lambda o: confirmed.append("t"))
        assert confirmed == ["t"]  # not stored, confirmed at once
        await until(lambda: len(confirmed) == 51)
        assert confirmed == ["t", *range(50)]
        assert store.commits == 1  # one fsync for the whole turn
        assert [s for s, _ in store.iter_queue(q.store_key)] == list(range(50))
        await gc.close()

    asyncio.run(main())
    store.close()


def test_restart_recovers_messages_in_order_with_their_state(tmp_path):
    path = tmp_path / "messages"
    store = MessageStore(path)

    async def before_crash():
        gc = GroupCommitter(store)
        host = FakeHost()
        q = make(host, StorePersistence(store, gc))
        other = make(host, StorePersistence(store, gc), name="other")
        for i in range(6):
            q.publish(durable_msg(b"m%d" % i, routing_keys=[f"k{i}"]), None)
        q.publish(QueueMessage(0, b"transient", False), None)  # seq 6: lost in a restart
        other.publish(durable_msg(b"o"), None)
        c = FakeConsumer()
        q.attach_consumer(c)
        grant(q, c, 4)  # 0..3 acquired
        q.settle(c, [0], ACCEPT)
        q.settle(c, [1], Settlement("modified", True, False, {Symbol("x-opt-why"): "retry"}))
        q.settle(c, [2], RELEASE)
        # 3 stays unsettled; after the restart every message counts as acquired.
        await gc.close()
        return q.store_key

    key = asyncio.run(before_crash())
    store.close()

    store = MessageStore(path)
    recovered = store.recover()
    host = FakeHost()
    q = ClassicQueue("/", "q", True, None, False, {}, host=host, persistence=None)
    assert q.store_key == key
    q.recover(recovered[key])
    assert q.message_count == 5 and q.ready_bytes == 10
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 10)
    assert c.bodies == [b"m1", b"m2", b"m3", b"m4", b"m5"]
    assert c.seqs == [1, 2, 3, 4, 5]
    assert c.first_acquirer == [False, False, False, False, False]
    assert [m.delivery_count for m in c.got] == [1, 0, 0, 0, 0]
    assert c.got[0].annotations == {Symbol("x-opt-why"): "retry"}
    assert [m.annotations for m in c.got[1:]] == [None] * 4
    assert [(m.exchange, m.routing_keys, m.durable) for m in c.got[3:]] == [
        ("amq.topic", ["k4"], True),
        ("amq.topic", ["k5"], True),
    ]
    q.publish(durable_msg(b"new"), None)
    assert c.seqs[-1] == 6  # seqs continue after the recovered ones
    other = make(host, None, name="other")
    other.recover(recovered[other.store_key])
    assert other.message_count == 1
    store.close()


def test_recovered_expired_messages_expire(tmp_path):
    path = tmp_path / "messages"
    store = MessageStore(path)

    async def run():
        gc = GroupCommitter(store)
        q = make(FakeHost(), StorePersistence(store, gc), x_message_ttl=1000)
        q.publish(durable_msg(b"a"), None)
        q.publish(durable_msg(b"b", expires_at=T0 + 5000), None)
        await gc.close()

    asyncio.run(run())
    store.close()
    store = MessageStore(path)
    host = FakeHost()
    host.now = T0 + 2000
    q = make(host, None, x_message_ttl=1000)
    q.recover(store.recover()[q.store_key])
    assert q.message_count == 0 and q.stats.expired == 2  # both had the queue TTL: T0 + 1000
    store.close()


def test_delete_removes_the_queue_from_the_store(tmp_path):
    store = MessageStore(tmp_path / "messages")

    async def run():
        gc = GroupCommitter(store)
        p = StorePersistence(store, gc)
        q = make(FakeHost(), p)
        keep = make(FakeHost(), p, name="keep")
        for i in range(5):
            q.publish(durable_msg(b"%d" % i), None)
        keep.publish(durable_msg(b"k"), None)
        await gc.flush()
        assert q.delete() == 5
        await gc.close()
        return q.store_key, keep.store_key

    key, keep_key = asyncio.run(run())
    recovered = store.recover()
    assert key not in recovered and len(recovered[keep_key]) == 1
    store.close()
