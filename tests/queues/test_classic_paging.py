"""A classic queue behind its memory window: ready messages beyond it live in
the store only (positions in memory, bodies on disk), are read back in
order as consumers take from the head, and a restart rebuilds the queue from
the store's index without reading a body."""

from __future__ import annotations

import asyncio
import struct

from amqp.types import Symbol
from queues.base import ACCEPT, RELEASE, Settlement
from queues.classic import FLAG_PAGE_COPY, ClassicQueue, MemoryPersistence, StorePersistence
from queues.classic.messages import READ_BATCH
from queues.classic.paging import Positions
from storage.group_commit import GroupCommitter
from storage.message_store import MessageStore

from .classic_fakes import FakeConsumer, FakeHost, grant, msg


def paged_queue(persistence, window=10, window_bytes=None, durable=True, name="q", host=None, **arguments):
    args = {k.replace("_", "-"): v for k, v in arguments.items()}
    return ClassicQueue("/", name, durable, None, False, args, host=host or FakeHost(), persistence=persistence,
                        memory_window=window, memory_bytes=window_bytes)  # fmt: skip


def test_positions_are_run_length_encoded():
    p = Positions()
    for seq in range(10_000):
        p.append(seq, 100)
    assert p.runs == 1 and len(p) == 10_000 and p.bytes == 1_000_000
    p.append(10_000, 7)  # another size: a new run
    p.append(10_002, 7)  # a gap: a new run
    assert p.runs == 3 and (p.first_seq(), p.end_seq()) == (0, 10_003)
    assert p.take(3, 1 << 30) == [(0, 100), (1, 100), (2, 100)]
    assert p.take(5, 250) == [(3, 100), (4, 100)]  # stops before the byte budget is passed
    assert p.take(1, 0) == [(5, 100)]  # but always takes one
    taken = p.take(20_000, 1 << 30)
    assert [s for s, _ in taken] == [*range(6, 10_001), 10_002] and taken[-1] == (10_002, 7)
    assert not p and p.bytes == 0


def test_backlog_beyond_the_window_stays_on_disk_and_comes_back_in_order():
    persistence = MemoryPersistence()
    q = paged_queue(persistence, window=10, window_bytes=None)
    for i in range(1000):
        q.publish(msg(b"m%04d" % i, durable=True), None)
    info = q.info()
    assert (info["messages_ram"], info["messages_paged_out"]) == (10, 990)
    assert q.memory_bytes == 10 * 5 and info["message_bytes_paged_out"] == 990 * 5
    assert q.message_count == 1000 and q.ready_bytes == 5000
    assert q._messages.tail.positions.runs == 1  # 990 positions, one run

    c = FakeConsumer()
    q.attach_consumer(c)
    most_held = 0
    while q.message_count:
        grant(q, c, 7)
        most_held = max(most_held, len(q._messages.ready))
        q.settle(c, c.seqs[-7:], ACCEPT)
    assert c.bodies == [b"m%04d" % i for i in range(1000)]
    assert most_held <= 10
    assert c.first_acquirer == [True] * 1000  # paged messages were never delivered
    assert persistence.reads == 990  # each paged body read once
    assert persistence.records == {}  # all accepted


def test_byte_budget_bounds_the_window_too():
    persistence = MemoryPersistence()
    q = paged_queue(persistence, window=None, window_bytes=1000)
    for _ in range(50):
        q.publish(msg(b"x" * 100, durable=True), None)
    assert q.info()["messages_ram"] == 10 and q.memory_bytes == 1000
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 10)
    assert q.memory_bytes == 0  # the window is empty until the head is needed
    grant(q, c, 1)
    assert c.seqs == list(range(11)) and q.memory_bytes == 900  # one read batch: the budget's worth


def test_transient_messages_are_written_out_as_page_copies_and_deleted_when_read_back():
    persistence = MemoryPersistence()
    q = paged_queue(persistence, window=5, durable=False)
    for i in range(20):
        q.publish(msg(b"t%d" % i, durable=i % 2 == 0), None)
    copies = {seq: r for (_, seq), r in persistence.records.items()}
    assert sorted(copies) == list(range(5, 20))
    assert all(r.flags & FLAG_PAGE_COPY for r in copies.values())
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 20)
    assert c.bodies == [b"t%d" % i for i in range(20)]
    assert [m.durable for m in c.got] == [i % 2 == 0 for i in range(20)]  # the header's durability survives
    assert persistence.records == {}  # every copy deleted once its body was back


def test_paged_head_is_loaded_for_drop_head_and_ttl():
    host = FakeHost()
    q = paged_queue(MemoryPersistence(), window=4, host=host, x_max_length=30, x_message_ttl=1000)
    for i in range(100):
        q.publish(msg(b"%d" % i, durable=True), None)
    assert q.message_count == 30 and q.stats.dropped == 70
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 5)
    assert c.bodies == [b"%d" % i for i in range(70, 75)]
    host.advance(1000)
    assert q.message_count == 0 and q.stats.expired == 25


def test_released_messages_go_back_before_the_paged_tail():
    q = paged_queue(MemoryPersistence(), window=3)
    for i in range(10):
        q.publish(msg(b"%d" % i, durable=True), None)
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 5)
    q.settle(c, [1, 3], RELEASE)
    q.settle(c, [0, 2, 4], ACCEPT)
    grant(q, c, 10)
    assert c.seqs == [0, 1, 2, 3, 4, 1, 3, 5, 6, 7, 8, 9]


async def until(predicate, turns: int = 5_000) -> None:
    for _ in range(turns):
        if predicate():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("condition never became true")


def test_bodies_paged_before_their_fsync_are_delivered_from_memory(tmp_path):
    store = MessageStore(tmp_path / "messages")

    async def main():
        gc = GroupCommitter(store)
        q = paged_queue(StorePersistence(store, gc), window=5)
        for i in range(50):
            q.publish(msg(b"m%d" % i, durable=True), None)
        assert store.durable_seq() == 0 and q._messages.tail.unflushed_bytes == 45 * 3 - 5
        c = FakeConsumer()
        q.attach_consumer(c)
        grant(q, c, 20)  # before any commit: nothing on disk is readable yet
        assert c.bodies == [b"m%d" % i for i in range(20)] and store.body_reads == 0
        await gc.flush()
        assert q.memory_bytes == 0  # committed: the kept bodies are let go (the window is empty after 4 batches)
        grant(q, c, 30)
        assert c.bodies == [b"m%d" % i for i in range(50)]
        assert store.body_reads == 30  # the other 30 paged: read back from the store, once each
        await gc.close()

    asyncio.run(main())
    store.close()


def test_purge_deletes_the_paged_range(tmp_path):
    store = MessageStore(tmp_path / "messages")

    async def main():
        gc = GroupCommitter(store)
        q = paged_queue(StorePersistence(store, gc), window=5)
        keep = paged_queue(StorePersistence(store, gc), window=5, name="keep")
        for i in range(40):
            q.publish(msg(b"m%d" % i, durable=True), None)
            keep.publish(msg(b"k%d" % i, durable=True), None)
        await gc.flush()
        assert q.purge() == 40 and q.message_count == 0 and q.memory_bytes == 0
        await gc.flush()
        assert list(store.iter_index(q.store_key)) == []
        assert len(list(store.iter_index(keep.store_key))) == 40
        await gc.close()

    asyncio.run(main())
    store.close()


def test_restart_rebuilds_the_queue_from_the_index_without_reading_a_body(tmp_path):
    path = tmp_path / "messages"
    store = MessageStore(path)

    async def before_restart():
        gc = GroupCommitter(store)
        q = paged_queue(StorePersistence(store, gc), window=4)
        for i in range(30):
            # odd ones transient: written out as page copies beyond the window, gone after the restart
            q.publish(msg(b"m%02d" % i, durable=i % 2 == 0), None)
        c = FakeConsumer()
        q.attach_consumer(c)
        grant(q, c, 4)  # 0..3
        q.settle(c, [0], ACCEPT)
        q.settle(c, [2], Settlement("modified", True, False, {Symbol("x-opt-why"): "retry"}))
        await gc.close()
        return q.store_key

    key = asyncio.run(before_restart())
    store.close()

    store = MessageStore(path)
    assert store.indexed_queues() == [key]

    async def after_restart():
        gc = GroupCommitter(store)
        q = paged_queue(StorePersistence(store, gc), window=4)
        q.recover_stored(None)  # no checkpoint: the whole index
        assert store.body_reads == 0
        durable = [i for i in range(2, 30, 2)]
        assert q.message_count == len(durable) and q.ready_bytes == 3 * len(durable)
        assert q.memory_bytes == 0 and q.info()["messages_paged_out"] == len(durable)
        c = FakeConsumer()
        q.attach_consumer(c)
        grant(q, c, 100)
        assert c.bodies == [b"m%02d" % i for i in durable]
        assert c.first_acquirer == [False] * len(durable)  # recovered: may have been delivered
        assert c.got[0].delivery_count == 1 and c.got[0].annotations == {Symbol("x-opt-why"): "retry"}
        assert store.body_reads == len(durable)
        q.publish(msg(b"new", durable=True), None)
        assert c.seqs[-1] == 30  # seqs continue after the recovered ones
        await gc.flush()
        # the transient page copies were deleted at the restart
        assert [s for s, _, flags, _ in store.iter_index(key) if flags & FLAG_PAGE_COPY] == []
        await gc.close()

    asyncio.run(after_restart())
    store.close()


def test_read_batches_are_bounded():
    persistence = MemoryPersistence()
    q = paged_queue(persistence, window=10_000)
    q._messages.window = 0  # everything published from now on is paged
    for i in range(READ_BATCH * 3):
        q.publish(msg(b"%d" % i, durable=True), None)
    q._messages.window = 10_000
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 1)
    assert persistence.reads == READ_BATCH and len(q._messages.ready) == READ_BATCH - 1


def test_positions_round_trip_keeps_page_copies_flagged():
    p = Positions()
    for seq in range(5, 100):
        p.append(seq, 10)
    for seq in range(100, 110):
        p.append(seq, 10, copy=True)
    p.append(110, 3)
    p.take(2, 1 << 30)
    back = Positions.from_bytes(p.to_bytes())
    assert list(back.iter_runs()) == [(7, 93, 10, False), (100, 10, 10, True), (110, 1, 3, False)]
    assert len(back) == 104 and back.bytes == 1033
    assert [back.seq_after(k) for k in (0, 92, 93, 103, 104)] == [7, 99, 100, 110, 111]


def test_clean_restart_reads_the_checkpoint_once(tmp_path):
    path = tmp_path / "messages"
    store = MessageStore(path)

    async def before_stop():
        gc = GroupCommitter(store)
        q = paged_queue(StorePersistence(store, gc), window=4)
        for i in range(40):
            q.publish(msg(b"m%02d" % i, durable=i != 30), None)  # 30: transient, a page copy
        c = FakeConsumer()
        q.attach_consumer(c)
        grant(q, c, 3)
        q.settle(c, [0, 1], ACCEPT)
        q.settle(c, [2], RELEASE)
        q.detach_consumer(c)
        q.write_checkpoint()
        await gc.close()
        return q.store_key

    key = asyncio.run(before_stop())
    store.close()

    store = MessageStore(path)
    snapshots = store.take_positions()
    assert list(snapshots) == [key]
    store.commit()
    assert store.take_positions() == {}  # deleted as it was read
    durable = [i for i in range(2, 40) if i != 30]

    q = paged_queue(StorePersistence(store, None), window=4)  # no confirm waits: no committer needed
    q.recover_stored(snapshots[key])
    assert store.body_reads == 0 and q.message_count == len(durable) and q.ready_bytes == 3 * len(durable)
    store.commit()
    assert [s for s, *_ in store.iter_index(key)] == durable  # the page copy was deleted at the restart
    assert list(store.take_positions()) == [key]  # the recovered queue wrote a fresh checkpoint
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 100)
    assert c.bodies == [b"m%02d" % i for i in durable] and c.first_acquirer == [False] * len(durable)
    q.publish(msg(b"new", durable=True), None)
    assert c.seqs[-1] == 40
    store.close()


def test_a_clean_shutdown_snapshot_of_the_first_format_is_still_read(tmp_path):
    # version 1: positions without page-copy flags (the copies left out), then next seq and has-TTL
    runs = struct.pack(">BI", 1, 2) + struct.pack(">qq", 4, 20) + struct.pack(">II", 6, 3) + struct.pack(">II", 2, 2)
    snapshot = runs + struct.pack(">QB", 30, 0)
    q = paged_queue(MemoryPersistence(), window=4)
    q.recover_stored(snapshot)
    assert list(q._messages.tail.positions.iter_runs()) == [(4, 6, 2, False), (20, 3, 2, False)]
    assert q.message_count == 9 and q.ready_bytes == 18 and q._next_seq == 30
