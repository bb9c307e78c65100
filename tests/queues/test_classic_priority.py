"""Classic priority queues (x-max-priority) and single active consumer
(x-single-active-consumer), on the pure queue with fake host and consumers;
the paging and restart cases on a real MessageStore."""

from __future__ import annotations

import asyncio

import pytest

from queues.base import ACCEPT, RELEASE, QueueArgumentError, QueueMessage
from queues.classic import ClassicQueueConfig, MemoryPersistence, PriorityClassicQueue, StorePersistence, classic_queue
from queues.classic.figures import MESSAGE_OVERHEAD
from queues.priority import header_priority
from storage.group_commit import GroupCommitter
from storage.message_store import MessageStore

from .classic_fakes import FakeConsumer, FakeHost, grant


def encoded(body: str, priority: int | None = None) -> bytes:
    """An AMQP message: a header with `priority` (none: no header), an amqp-value string body."""
    header = b"" if priority is None else b"\x00\x53\x70\xc0\x04\x02\x40\x50" + bytes([priority])
    data = body.encode()
    return header + b"\x00\x53\x77\xa1" + bytes([len(data)]) + data


def pmsg(body: str, priority: int | None = None, durable: bool = False) -> QueueMessage:
    return QueueMessage(0, encoded(body, priority), durable, exchange="", routing_keys=["q"])


def bodies(c: FakeConsumer) -> list[str]:
    return [m.payload.split(b"\xa1", 1)[1][1:].decode() for m in c.got]


def pqueue(max_priority=10, persistence=None, window=None, durable=False, host=None, **arguments):
    args = {"x-max-priority": max_priority, **{k.replace("_", "-"): v for k, v in arguments.items()}}
    return classic_queue("/", "q", durable, None, False, args, host=host or FakeHost(),
                         persistence=persistence or MemoryPersistence(), memory_window=window)  # fmt: skip


def test_header_priority_reads_only_an_explicit_field():
    assert header_priority(encoded("a", 7)) == 7
    assert header_priority(encoded("a", 0)) == 0
    assert header_priority(encoded("a")) is None  # no header
    assert header_priority(b"\x00\x53\x70\xc0\x02\x01\x41" + encoded("a")[0:0]) is None  # header: durable only
    assert header_priority(b"\x00\x53\x70\x45") is None  # empty header list


def test_x_max_priority_is_validated_and_picks_the_priority_queue():
    assert ClassicQueueConfig.from_arguments({"x-max-priority": 255}).max_priority == 255
    for bad in (256, -1, "5", True):
        with pytest.raises(QueueArgumentError):
            ClassicQueueConfig.from_arguments({"x-max-priority": bad})
    assert isinstance(pqueue(5), PriorityClassicQueue)
    assert not isinstance(classic_queue("/", "q", False, None, False, {}, host=FakeHost()), PriorityClassicQueue)


def test_higher_priority_first_fifo_within_a_priority_absent_is_zero_and_above_max_is_max():
    q = pqueue(max_priority=5)
    for body, prio in [("n1", None), ("p2a", 2), ("p5", 5), ("p9", 9), ("p2b", 2), ("p0", 0), ("n2", None)]:
        q.publish(pmsg(body, prio), None)
    assert q.message_count == 7
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 10)
    # 9 counts as 5 (the max): after the 5 published before it; no priority counts as 0
    assert bodies(c) == ["p5", "p9", "p2a", "p2b", "n1", "p0", "n2"]


def test_a_released_message_goes_back_to_its_place_within_its_priority():
    q = pqueue()
    for body, prio in [("a1", 1), ("a2", 1), ("b1", 3), ("b2", 3)]:
        q.publish(pmsg(body, prio), None)
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 3)  # b1 b2 a1
    q.settle(c, [c.got[2].seq, c.got[0].seq], RELEASE)  # a1 and b1 back
    c2 = FakeConsumer()
    q.detach_consumer(c)  # b2 back too
    q.attach_consumer(c2)
    grant(q, c2, 10)
    assert bodies(c2) == ["b1", "b2", "a1", "a2"]
    assert [m.acquired for m in c2.got] == [True, True, True, False]


def test_priorities_page_out_behind_one_shared_window_and_come_back_in_order():
    persistence = MemoryPersistence()
    q = pqueue(max_priority=3, persistence=persistence, window=4, durable=True)
    expected = []
    for i in range(40):
        q.publish(pmsg(f"m{i:02d}", i % 4, durable=True), None)
    for prio in (3, 2, 1, 0):
        expected += [f"m{i:02d}" for i in range(40) if i % 4 == prio]
    info = q.info()
    assert info["messages_ram"] == 4 and info["messages_paged_out"] == 36 and q.message_count == 40
    # the memory alarm counts every level's paged positions: here each one is a
    # run of its own, as a level's seqs are every 4th
    assert q.held_bytes - q.memory_bytes - 4 * MESSAGE_OVERHEAD == 36 * 17
    c = FakeConsumer()
    q.attach_consumer(c)
    most_in_memory = 0
    while q.message_count:
        grant(q, c, 3)
        most_in_memory = max(most_in_memory, q.info()["messages_ram"])
        q.settle(c, [m.seq for m in c.got[-3:]], ACCEPT)
    assert bodies(c) == expected
    assert most_in_memory <= 4 and persistence.records == {}


def test_purge_removes_every_level_and_not_the_unsettled_messages():
    persistence = MemoryPersistence()
    q = pqueue(max_priority=3, persistence=persistence, window=2, durable=True)
    for i in range(20):
        q.publish(pmsg(f"m{i}", 3 if i % 5 == 0 else 1, durable=True), None)
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 2)  # m0 and m5 (priority 3), unsettled
    held = {m.seq for m in c.got}
    assert q.purge() == 18 and q.message_count == 0
    assert {seq for _, seq in persistence.records} == held  # the unsettled ones keep their records
    q.settle(c, sorted(held), ACCEPT)
    assert persistence.records == {}


def _restart_case(tmp_path, clean: bool) -> None:
    path = tmp_path / "messages"
    store = MessageStore(path)
    order = [("a", 1), ("b", None), ("c", 4), ("d", 1), ("e", 4), ("f", 9), ("g", None)]

    async def before():
        gc = GroupCommitter(store)
        q = pqueue(max_priority=4, persistence=StorePersistence(store, gc), window=2, durable=True)
        for body, prio in order:
            q.publish(pmsg(body, prio, durable=True), None)
        q.publish(pmsg("transient", 4), None)  # gone after the restart
        if clean:
            store.put_positions(q.store_key, q.positions_snapshot())
        await gc.close()
        return q.store_key

    key = asyncio.run(before())
    store.close()
    store = MessageStore(path)
    q = pqueue(max_priority=4, persistence=StorePersistence(store, None), window=2, durable=True)
    if clean:
        q.recover_positions(store.take_positions()[key])
        assert store.body_reads == 0
    else:
        q.recover_index(store.iter_index(key))
        assert store.body_reads == len(order)  # each body read once, to learn its priority
    assert q.message_count == len(order) and q.info()["messages_ram"] == 0
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 10)
    assert bodies(c) == ["c", "e", "f", "a", "d", "b", "g"]
    q.publish(pmsg("new", 4, durable=True), None)
    assert c.seqs[-1] == len(order) + 1  # seqs continue after the recovered ones (and the transient one)
    store.close()


def test_restart_from_the_index_puts_each_message_back_in_its_priority(tmp_path):
    _restart_case(tmp_path, clean=False)


def test_clean_restart_keeps_the_levels_in_the_positions_snapshot(tmp_path):
    _restart_case(tmp_path, clean=True)


def test_a_plain_queues_checkpoint_is_refused_and_the_index_read_instead():
    """A priority queue reading another queue's checkpoint (x-max-priority
    added to a stored queue's definition) rebuilds from its index."""
    from storage.message_store import StoreFormatError

    persistence = MemoryPersistence()
    plain = classic_queue("/", "q", True, None, False, {}, host=FakeHost(), persistence=persistence)
    plain.publish(pmsg("x", durable=True), None)
    plain.write_checkpoint()
    checkpoint = persistence.positions[plain.store_key]
    with pytest.raises(StoreFormatError):
        pqueue(durable=True).recover_positions(checkpoint)
    q = pqueue(durable=True, persistence=persistence)
    q.recover_stored(checkpoint)
    assert q.message_count == 1
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 1)
    assert bodies(c) == ["x"]


def test_a_priority_queue_saves_its_levels_at_a_clean_stop_only():
    """No checkpoint while it runs (a crash rebuilds it from the index, since
    the store deletes a clean stop's snapshot as the next start reads it)."""
    persistence = MemoryPersistence()
    q = pqueue(durable=True, persistence=persistence, window=1)
    for i in range(5):
        q.publish(pmsg(f"m{i}", i, durable=True), None)
    assert persistence.positions == {}
    q.write_checkpoint()  # the broker's clean stop
    again = pqueue(durable=True, persistence=persistence)
    again.recover_stored(persistence.positions[q.store_key])
    assert again.message_count == 5


# ---------------------------------------------------------------- single active consumer


def sac_queue(**arguments):
    args = {"x-single-active-consumer": True, **arguments}
    return classic_queue("/", "q", False, None, False, args, host=FakeHost())


def test_single_active_consumer_only_the_first_receives_and_the_next_takes_over():
    q = sac_queue()
    first, second, third = FakeConsumer(), FakeConsumer(), FakeConsumer()
    for c in (first, second, third):
        q.attach_consumer(c)
        grant(q, c, 5)
    for i in range(4):
        q.publish(pmsg(f"m{i}"), None)
    assert bodies(first) == ["m0", "m1", "m2", "m3"] and second.got == [] and third.got == []
    assert [q.consumer_activity(c) for c in (first, second, third)] == ["single_active", "waiting", "waiting"]
    q.settle(first, [first.got[0].seq], ACCEPT)
    q.detach_consumer(first)  # m1..m3 back, to the next in attach order, with the credit it already gave
    assert bodies(second) == ["m1", "m2", "m3"] and third.got == []
    assert q.consumer_activity(second) == "single_active" and q.consumer_activity(third) == "waiting"
    q.detach_consumer(second)
    assert bodies(third) == ["m1", "m2", "m3"]
    assert q.consumer_count == 1


def test_a_waiting_consumer_that_drains_gets_its_drain_completed():
    q = sac_queue()
    active, waiting = FakeConsumer(), FakeConsumer()
    q.attach_consumer(active)
    q.attach_consumer(waiting)
    q.publish(pmsg("m"), None)
    grant(q, waiting, 4, drain=True)
    assert waiting.got == [] and waiting.replies == [(4, 0, 1, True)]  # credit used up, 1 message still there
    grant(q, active, 1)
    assert bodies(active) == ["m"]


def test_without_the_argument_every_consumer_is_up():
    q = classic_queue("/", "q", False, None, False, {}, host=FakeHost())
    a, b = FakeConsumer(), FakeConsumer()
    q.attach_consumer(a)
    q.attach_consumer(b)
    for c in (a, b):
        grant(q, c, 1)
    q.publish(pmsg("1"), None)
    q.publish(pmsg("2"), None)
    assert (len(a.got), len(b.got)) == (1, 1)
    assert q.consumer_activity(a) == q.consumer_activity(b) == "up"
    with pytest.raises(QueueArgumentError):
        ClassicQueueConfig.from_arguments({"x-single-active-consumer": "true"})
