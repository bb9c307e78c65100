"""queues/quorum/queue.py as its Raft group's machine, without Raft: the
records a group would commit are applied in order, as pysyncobj does."""

from __future__ import annotations

from replica_host import batch, make

from amqp import codec
from queues import quorum as qq
from queues.base import Outcome, QueueMessage
from queues.quorum import Publish, PublishBatch
from queues.quorum.message_format import read_stored
from queues.quorum.queue import QuorumQueue
from raft.status import ProposalOutcome


def test_a_batch_proposed_twice_is_applied_once_and_answered_alike():
    queue, _ = make()
    first = queue.apply(batch(3, 1), 1)
    assert queue.message_count == 3
    again = queue.apply(batch(3, 1), 2)  # the leader changed: the proposer could not know it was committed
    assert queue.message_count == 3
    assert [(c.correlations, c.outcome) for c in again] == [(c.correlations, c.outcome) for c in first
                                                            if isinstance(c, qq.Confirm)]  # fmt: skip
    # a later batch applied before an earlier one's retry: both count once
    queue.apply(batch(2, 3), 3)
    queue.apply(batch(2, 2), 4)
    queue.apply(batch(2, 3), 5)
    assert queue.message_count == 7


def test_the_snapshot_keeps_what_was_applied_and_the_bodies_stay_outside():
    queue, host = make()
    queue.apply(batch(5, 1), 1)
    data = queue.snapshot()
    assert b"m4" not in data  # bodies live beside the journal, not in the snapshot
    copy, _ = make()
    copy.restore(data)
    assert copy.state == queue.state and copy.message_count == 5
    assert copy.apply(batch(5, 1), 2) and copy.message_count == 5  # still recognised after the restore


def test_publishes_are_confirmed_once_the_batch_is_applied():
    queue, host = make()
    outcomes = []
    for i in range(3):
        queue.publish(QueueMessage(0, f"b{i}".encode(), True), outcomes.append)
    for fn in host.soon:
        fn()
    ((record, callback),) = host.proposed  # one record for the loop turn
    assert isinstance(record, Publish) and len(record.messages) == 3
    callback(queue.apply(record, 1), ProposalOutcome.SUCCESS)
    assert outcomes == [Outcome.ACCEPTED] * 3


def test_publishes_are_proposed_as_the_version_that_reads_priorities_only_once_every_member_does():
    # (quorum_queue_publish_batch, quorum_queue_priorities): the first depends on the second
    for (packs, flag_on), kind in (((True, True), qq.PublishBatch), ((False, True), qq.PublishPrioritised),
                                   ((False, False), Publish)):  # fmt: skip
        queue, host = make()
        host.packs, host.reads_priorities = packs, flag_on
        queue.publish(QueueMessage(0, b"\x00\x53\x70\xc0\x04\x02\x40\x50\x09\x00\x53\x77\x45", True), None)
        for fn in host.soon:
            fn()
        ((record, _),) = host.proposed
        assert type(record) is kind
        queue.apply(record, 1)
        assert len(queue.state.ready_high) == (1 if flag_on else 0)  # header priority 9


def test_a_snapshot_of_the_queue_before_the_machine_held_the_dedup_tables_restores():
    from pathlib import Path

    queue, _ = make()
    queue.restore((Path(__file__).parent / "fixtures" / "queue_snapshot_v0.bin").read_bytes())
    assert queue.message_count == 5 and queue.unacked_count == 1
    again = Publish(tuple([f"m3.{i}".encode(), True, None, "", ["q"], i, None] for i in range(2)), 1000, "n1#1/1", 3)
    assert [(c.correlations, c.outcome) for c in queue.apply(again, 7)] == [((0, 1), Outcome.ACCEPTED)]
    assert queue.message_count == 5
    # pysyncobj replays an entry it applied already: answered alike, nothing applied
    assert [(c.correlations, c.outcome) for c in queue.apply(again, 7)] == [((0, 1), Outcome.ACCEPTED)]
    assert queue.apply(qq.Purge(), 7) == [] and queue.message_count == 5


def test_bodies_are_stored_for_new_batches_only():
    queue, host = make()
    queue.apply(batch(2, 1), 1)
    queue.apply(batch(2, 1), 2)  # the same batch again
    assert sorted(k for k in host.blobs if len(k) == 8) == [qq.msg_id(1, i).to_bytes(8, "big") for i in (0, 1)]
    assert queue.body(qq.msg_id(1, 1)) is not None and queue.body(qq.msg_id(2, 0)) is None


def test_a_restart_does_not_write_again_the_bodies_of_batches_it_replays():
    queue, host = make()
    queue.apply(batch(2, 1), 1)
    queue.apply(batch(1, 2), 2)
    snapshot = queue.snapshot()  # taken at index 2 ...
    queue.apply(batch(3, 3), 3)  # ... and the log goes on
    # the restart: a new replica object over the same store, from the snapshot, then the log after it
    writes = []
    restarted = QuorumQueue("/", "q", {"x-queue-type": "quorum"}, ("n1",), host=host, quorum_host=host, group="g")
    restarted.restore(snapshot)
    real_put = host.put_blobs
    host.put_blobs = lambda group, items: (writes.extend(k for k, _ in items), real_put(group, items))
    restarted.apply(batch(3, 3), 3)
    assert writes == [] and restarted.message_count == 6
    assert restarted.body(qq.msg_id(3, 2)) is not None
    restarted.apply(batch(1, 4), 4)  # a new batch is written, and moves the mark
    assert sorted(writes) == [qq.msg_id(4, 0).to_bytes(8, "big"), b"\xff" * 8 + b"\x00"]
    queue.bodies.release_below(4)
    assert host.blobs[b"\xff" * 8 + b"\x00"] == (4).to_bytes(8, "big")  # compaction keeps the mark


def _publish_turn(queue, host, messages):
    for m in messages:
        queue.publish(m, None)
    for fn in host.soon:
        fn()
    host.soon.clear()
    return host.proposed.pop()[0]


def test_a_batch_is_stored_as_the_entry_carries_it_and_delivers_the_bytes_published():
    queue, host = make()
    sent = [QueueMessage(0, b"\x00Sw\xa1\x02hi", True, None, exchange="amq.direct", routing_keys=["q"]),
            QueueMessage(0, bytes(range(256)), False, annotations={"x-opt-reason": "x"})]  # fmt: skip
    record = _publish_turn(queue, host, sent)
    assert type(record) is PublishBatch and records_round_trip(record) == record
    queue.apply(record, 1)
    for pos, m in enumerate(sent):
        mid = qq.msg_id(1, pos)
        assert host.blobs[mid.to_bytes(8, "big")] is record.stored[pos]  # no copy made for the store
        out = queue.bodies.message(mid)
        assert (out.payload, out.durable, out.exchange, out.routing_keys, out.annotations) == (
            m.payload, m.durable, m.exchange, m.routing_keys, m.annotations)


def test_the_window_delivers_the_fields_the_record_holds_without_reading_the_stored_bytes(monkeypatch):
    """With a consumer on this node, a new batch's messages wait in the window as the fields
    the record already holds (the leader's own object, or what a follower decoded from the
    entry), so that a delivery does not unpack the stored bytes again; what it hands out is
    what the store would give."""
    from queues.quorum import bodies

    sent = [QueueMessage(0, b"\x00Sw\xa1\x02hi", True, None, exchange="amq.direct", routing_keys=["q", "r"]),
            QueueMessage(0, bytes(range(256)), False, annotations={"x-opt-reason": "x"})]  # fmt: skip
    for own in (True, False):
        queue, host = make()
        queue.links.consumers["c"] = object()  # a consumer attached through this node
        record = _publish_turn(queue, host, sent)
        queue.apply(record if own else records_round_trip(record), 1)
        unpacked: list[bytes] = []
        monkeypatch.setattr(bodies, "read_stored", lambda v, seen=unpacked: seen.append(v) or read_stored(v))
        for pos, m in enumerate(sent):
            out = queue.bodies.message(qq.msg_id(1, pos))
            assert (out.payload, out.durable, out.exchange, out.routing_keys, out.annotations) == (
                m.payload, m.durable, m.exchange, m.routing_keys, m.annotations)
        assert unpacked == [] and not queue.bodies._window and queue.bodies._window_bytes == 0
        again = queue.bodies.message(qq.msg_id(1, 1), annotations={"x-opt-more": 1})  # a redelivery: the store
        assert len(unpacked) == 1 and again.annotations == {"x-opt-reason": "x", "x-opt-more": 1}
        monkeypatch.undo()


def test_without_the_feature_flags_batches_stay_version_1_and_old_bodies_still_deliver():
    queue, host = make()
    host.packs = host.reads_priorities = False
    record = _publish_turn(queue, host, [QueueMessage(0, b"abc", True, routing_keys=["q"])])
    assert type(record) is Publish
    queue.apply(record, 1)
    assert queue.bodies.message(qq.msg_id(1, 0)).payload == b"abc"
    # a body stored before the binary layout, by an earlier version
    host.blobs[qq.msg_id(1, 0).to_bytes(8, "big")] = codec.dumps([b"old", True, "ex", ["k"], None])
    out = queue.bodies.message(qq.msg_id(1, 0))
    assert (out.payload, out.durable, out.exchange, out.routing_keys) == (b"old", True, "ex", ["k"])


def test_deliveries_to_this_replicas_consumers_come_from_a_read_ahead_window(monkeypatch):
    from queues.quorum import bodies

    queue, host = make()
    store = queue.bodies
    gets = []
    real_get = host.get_blob
    host.get_blob = lambda group, key: (len(key) == 8 and gets.append(key), real_get(group, key))[1]
    queue.apply(batch(3, 1), 1)  # no consumer here: nothing kept
    assert not store._window
    queue.links.consumers["c"] = object()  # a consumer attached through this node
    queue.apply(batch(3, 2), 2)
    assert sorted(store._window) == [qq.msg_id(2, i) for i in range(3)]
    assert store.message(qq.msg_id(2, 1)).payload == b"m1" and qq.msg_id(2, 1) not in store._window
    assert gets == [] and host.range_reads == 0
    # a miss (the batch applied before the consumer came) reads ahead with one iterator
    assert store.message(qq.msg_id(1, 0)).payload == b"m0"
    assert host.range_reads == 1 and {qq.msg_id(1, 1), qq.msg_id(1, 2)} <= set(store._window)
    assert [store.message(qq.msg_id(1, i)).payload for i in (1, 2)] == [b"m1", b"m2"]
    assert host.range_reads == 1 and gets == []
    # a message settled by a consumer on another node leaves the window unread
    queue.apply(batch(2, 9), 9)
    queue.apply(qq.Settle("elsewhere", (qq.msg_id(9, 0),)), 10)
    assert qq.msg_id(9, 0) not in store._window and qq.msg_id(9, 1) in store._window
    size = store._window[qq.msg_id(9, 1)][0]  # each of these batches' messages is as long
    store.release_below(10)
    # the window is bounded: what does not fit is left to the store, and the messages kept (the
    # first to be delivered) stay; a miss reads ahead, making room by dropping what was kept longest
    monkeypatch.setattr(bodies, "READ_AHEAD_BYTES", 2 * size)
    queue.apply(batch(3, 3), 11)
    assert list(store._window) == [qq.msg_id(11, 0), qq.msg_id(11, 1)]
    queue.apply(batch(3, 4), 12)  # the window is full: none kept
    assert list(store._window) == [qq.msg_id(11, 0), qq.msg_id(11, 1)]
    reads = host.range_reads
    assert store.message(qq.msg_id(12, 0)).payload == b"m0"  # the consumer is past 11 (settled elsewhere, say)
    assert host.range_reads == reads + 1 and list(store._window) == [qq.msg_id(12, 1), qq.msg_id(12, 2)]
    assert [store.message(qq.msg_id(12, i)).payload for i in (1, 2)] == [b"m1", b"m2"]
    assert host.range_reads == reads + 1 and store._window_bytes == 0
    queue.apply(batch(3, 5), 13)
    store.release_below(14)
    assert not store._window and store._window_bytes == 0


def test_a_consumer_behind_the_window_misses_it_once_per_read_ahead_not_per_message(monkeypatch):
    """A backlog larger than the window: new batches must not push out the messages the
    consumer needs next, or every delivery would miss and read the store."""
    from queues.quorum import bodies

    queue, host = make()
    store = queue.bodies
    queue.links.consumers["c"] = object()
    queue.apply(batch(1, 1), 1)
    size = store._window[qq.msg_id(1, 0)][0]
    store.message(qq.msg_id(1, 0))
    monkeypatch.setattr(bodies, "READ_AHEAD_BYTES", 10 * size)
    monkeypatch.setattr(bodies, "READ_AHEAD_COUNT", 10)
    delivered = []
    for index in range(2, 12):  # ten batches of 4 arrive while the consumer takes one message per batch
        queue.apply(batch(4, index), index)
        delivered.append(store.message(msg_ids(2, 12)[len(delivered)]))
    # batch 5's second message did not fit: from then on new messages were left to the read-aheads,
    # although deliveries made room (kept, they would only be dropped unread by the read-aheads)
    assert list(store._window) == [qq.msg_id(4, 2), qq.msg_id(4, 3), qq.msg_id(5, 0)]
    while len(delivered) < 40:
        delivered.append(store.message(msg_ids(2, 12)[len(delivered)]))
    assert [m.payload for m in delivered] == [f"m{i}".encode() for _ in range(10) for i in range(4)]
    assert host.range_reads <= 4  # 30 messages not kept at first, read 10 at a time
    # the last read-ahead found the newest stored message: new ones are kept again
    assert not store._window
    queue.apply(batch(2, 12), 12)
    assert list(store._window) == [qq.msg_id(12, 0), qq.msg_id(12, 1)]


def msg_ids(first: int, end: int) -> list[int]:
    return [qq.msg_id(index, pos) for index in range(first, end) for pos in range(4)]


def records_round_trip(record):
    from raft import records

    return records.decode(records.encode(record))


def test_proposals_wait_for_the_first_leader_in_the_order_they_came():
    """Two links attach to a new queue whose group is still electing, a third
    once it has a leader: the log gets them in that order (the first one is
    the single active consumer), not the third before the retried two."""
    from queues.quorum.proposals import Proposer

    class Electing:
        leader = None

        def __init__(self):
            self.proposed, self.timers = [], []

        def leader_of(self, group):
            return self.leader

        def submit(self, group, record, answer):
            if self.leader is None:
                return False  # refused: no leader yet
            self.proposed.append(record)
            return True

        def call_later(self, delay, fn):
            self.timers.append(fn)
            return type("Handle", (), {"cancel": lambda self: None})()

    group = Electing()
    proposer = Proposer(group, "g", group)
    proposer.for_consumer("first", "attach first")
    proposer.for_consumer("second", "attach second")
    group.leader = "n1"
    proposer.for_consumer("third", "attach third")
    assert group.proposed == []  # behind the two still waiting
    group.timers.pop(0)()  # the wait for a leader ends
    assert group.proposed == ["attach first", "attach second", "attach third"]


class Consumer:
    """A link attached through this replica's node: what it was handed."""

    presettled = False

    def __init__(self):
        self.got: list[bytes] = []

    def deliver(self, queue, message):
        self.got.append(message.payload)

    def credit_reply(self, *args):
        pass


def test_a_replica_that_installed_a_snapshot_fetches_every_body_its_consumer_needs_even_while_a_fetch_is_out():
    # the rolling-upgrade stall (docs/chaos.md): a body missed while an earlier fetch was out
    # was never asked for, and no fetch was ever scheduled again: the consumer stopped for good
    leader, _ = make()
    leader.apply(batch(3, 1), 1)
    follower, host = make()
    follower.restore(leader.snapshot())  # the snapshot stands for the log that carried the bodies
    assert not host.blobs
    fetches: list[tuple[list[int], object]] = []
    host.fetch_bodies = lambda group, mids, callback: fetches.append((list(mids), callback))

    def answer(fetch):
        mids, callback = fetch
        callback({m: leader.body(m) for m in mids}, mids)

    def end_of_turn():
        while host.soon:
            host.soon.pop(0)()

    consumer = Consumer()
    cid = follower.links.add(consumer)
    follower.apply(qq.Attach(cid, 0, 1000, host.incarnation), 2)
    follower.apply(qq.Credit(cid, 0, 1), 3)  # delivers message 0: its body is fetched
    end_of_turn()
    assert [mids for mids, _ in fetches] == [[qq.msg_id(1, 0)]]
    follower.apply(qq.Credit(cid, 1, 1), 4)  # message 1 misses its body while that fetch is out
    end_of_turn()
    answer(fetches[0])
    end_of_turn()
    assert consumer.got == [b"m0"]
    assert [mids for mids, _ in fetches] == [[qq.msg_id(1, 0)], [qq.msg_id(1, 1)]]
    answer(fetches[1])
    assert consumer.got == [b"m0", b"m1"]
    follower.apply(qq.Credit(cid, 2, 1), 5)  # later misses are fetched too
    end_of_turn()
    answer(fetches[2])
    assert consumer.got == [b"m0", b"m1", b"m2"]


def test_a_replica_started_again_in_the_same_node_life_names_its_consumers_afresh():
    """A member taken off the queue and added back (the replica-remove nemesis) starts a new
    replica in the same node life, and the group may still hold the consumers of the one before
    (the leader detaches them soon after): a new link must not take one of their ids, as an Attach
    of a known id is ignored and the link would inherit what the old one held and never got."""
    before, host = make()
    old = before.links.add(object())
    before.apply(qq.Attach(old, 0, 1000, host.incarnation, 0), 1)
    again = QuorumQueue("/", "q", {"x-queue-type": "quorum"}, ("n1",), host=host, quorum_host=host, group="g")
    again.restore(before.snapshot())
    assert again.links.add(object()) not in again.state.consumers
