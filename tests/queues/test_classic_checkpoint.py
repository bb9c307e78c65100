"""A durable classic queue's checkpoints (queues/classic/checkpoint.py): after
a crash at any point, its newest durable checkpoint plus the bounded part of
the index it names rebuild exactly the messages the store holds, in order,
and reading that part is what a restart costs, not the depth.

A real RocksDB store; a crash is the store closed without writing its
pending batch (what a kill -9 leaves: only written batches)."""

from __future__ import annotations

import random

import pytest

from queues.base import ACCEPT, RELEASE, Settlement
from queues.classic import FLAG_PAGE_COPY, ClassicQueue, StorePersistence
from storage.message_store import MessageStore

from .classic_fakes import FakeConsumer, FakeHost, grant, msg

LIMIT = 40  # checkpoint_every in the random runs: several checkpoints per run
WINDOW = 4


class CountingPersistence(StorePersistence):
    """Counts the index entries a recovery reads."""

    def __init__(self, store) -> None:
        super().__init__(store, None)  # no confirms asked for: no committer
        self.index_read = 0

    def iter_index(self, queue, first=0, end=None):
        for entry in super().iter_index(queue, first, end):
            self.index_read += 1
            yield entry


def queue_on(persistence, every: int) -> ClassicQueue:
    return ClassicQueue("/", "q", True, None, False, {}, host=FakeHost(), persistence=persistence,
                        memory_window=WINDOW, memory_bytes=None, checkpoint_every=every)  # fmt: skip


def crash(store: MessageStore) -> None:
    store._batches.close()  # the pending batch is lost, as in a kill -9


def run_until_crash(path, rng: random.Random, steps: int) -> tuple[str, int]:
    """Publishes, consumes out of order, releases, modifies, purges, with
    commits at random points; then crashes. Returns the queue's store key and
    how many messages were published."""
    store = MessageStore(path, sync=False)
    q = queue_on(StorePersistence(store, None), LIMIT)
    consumer = FakeConsumer()
    q.attach_consumer(consumer)
    unacked: set[int] = set()
    consumer.on_deliver = lambda _q, m: unacked.add(m.seq)
    published = 0
    for _ in range(steps):
        roll = rng.random()
        if roll < 0.55:
            for _ in range(rng.randint(1, 30)):
                size = rng.choice((3, 3, 3, 5))
                q.publish(msg(b"x" * size, durable=rng.random() > 0.1), None)
                published += 1
        elif roll < 0.75:
            grant(q, consumer, rng.randint(0, 25))
        elif roll < 0.97 and unacked:
            seqs = rng.sample(sorted(unacked), rng.randint(1, len(unacked)))
            unacked.difference_update(seqs)
            how = rng.random()
            settlement = (ACCEPT if how < 0.8 else RELEASE if how < 0.9
                          else Settlement("modified", True, False, None))  # fmt: skip
            q.settle(consumer, seqs, settlement)
        elif roll > 0.995:
            q.purge()
        if rng.random() < 0.3:
            store.commit()
    crash(store)
    return q.store_key, published


def stored_positions(store: MessageStore, key: str) -> list[tuple[int, int]]:
    return [(seq, size) for seq, size, flags, _ in store.iter_index(key) if not flags & FLAG_PAGE_COPY]


def recovered_positions(q: ClassicQueue) -> list[tuple[int, int]]:
    return [(first + i, size) for first, count, size, _ in q._messages.tail.positions.iter_runs()
            for i in range(count)]  # fmt: skip


@pytest.mark.parametrize("seed", range(12))
def test_checkpoint_and_bounded_index_read_rebuild_exactly_what_the_store_holds(tmp_path, seed):
    rng = random.Random(seed)
    path = tmp_path / "messages"
    key, published = run_until_crash(path, rng, steps=rng.randint(100, 600))

    store = MessageStore(path, sync=False)
    expected = stored_positions(store, key)
    snapshot = store.take_positions().get(key)
    persistence = CountingPersistence(store)
    q = queue_on(persistence, LIMIT)
    q.recover_stored(snapshot)
    assert recovered_positions(q) == expected
    assert q.message_count == len(expected) and q.ready_bytes == sum(size for _, size in expected)
    assert store.body_reads == 0
    if expected:
        assert q._next_seq > expected[-1][0]
    store.commit()
    assert stored_positions(store, key) == expected  # page copies deleted, nothing else
    assert [s for s, _, flags, _ in store.iter_index(key) if flags & FLAG_PAGE_COPY] == []

    # and the bodies come back in that order
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, len(expected) + 1)
    assert [(m.seq, len(m.payload)) for m in c.got] == expected
    store.close()


def test_a_deep_queue_recovers_reading_a_bounded_part_of_its_index(tmp_path):
    """10,000 messages, a consumer part way through with some unacked, a
    crash after further publishes: the restart reads about 2 x the limit
    entries of the index, not 10,000."""
    path = tmp_path / "messages"
    store = MessageStore(path, sync=False)
    q = queue_on(StorePersistence(store, None), 500)
    for i in range(10_000):
        q.publish(msg(b"%05d" % i, durable=True), None)
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 1_200)
    q.settle(c, [m.seq for m in c.got if m.seq % 3], ACCEPT)  # every third stays unacked
    for i in range(10_000, 10_300):
        q.publish(msg(b"%05d" % i, durable=True), None)
    store.commit()
    crash(store)

    store = MessageStore(path, sync=False)
    expected = stored_positions(store, q.store_key)
    assert len(expected) == 10_300 - 800
    persistence = CountingPersistence(store)
    back = queue_on(persistence, 500)
    back.recover_stored(store.take_positions()[q.store_key])
    assert recovered_positions(back) == expected
    assert persistence.index_read <= 2 * 500 + 400 + WINDOW  # the unacked third, two limits
    got = FakeConsumer()
    back.attach_consumer(got)
    grant(back, got, 20_000)
    assert [int(m.payload) for m in got.got] == [seq for seq, _ in expected]
    store.close()


def test_a_purge_is_never_undone_by_an_older_checkpoint(tmp_path):
    path = tmp_path / "messages"
    store = MessageStore(path, sync=False)
    q = queue_on(StorePersistence(store, None), 50)
    for _ in range(500):
        q.publish(msg(b"abc", durable=True), None)
    store.commit()  # a checkpoint with 496 paged positions is on disk
    q.purge()
    q.publish(msg(b"new", durable=True), None)
    store.commit()
    crash(store)

    store = MessageStore(path, sync=False)
    back = queue_on(StorePersistence(store, None), 50)
    back.recover_stored(store.take_positions()[q.store_key])
    assert recovered_positions(back) == [(500, 3)]
    store.close()


def test_a_backlog_with_no_consumer_recovers_reading_a_bounded_part_of_its_index(tmp_path):
    path = tmp_path / "messages"
    store = MessageStore(path, sync=False)
    q = queue_on(StorePersistence(store, None), 500)
    for i in range(10_250):
        q.publish(msg(b"%05d" % i, durable=True), None)
    store.commit()
    crash(store)

    store = MessageStore(path, sync=False)
    persistence = CountingPersistence(store)
    back = queue_on(persistence, 500)
    back.recover_stored(store.take_positions()[q.store_key])
    assert back.message_count == 10_250 and recovered_positions(back) == [(seq, 5) for seq in range(10_250)]
    assert persistence.index_read <= 2 * 500 + WINDOW  # the head readers may have taken, the publishes since
    store.close()
