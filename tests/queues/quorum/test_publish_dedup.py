"""The quorum.publish command in the pure machine: bodies left to the host
(StoreBodies), each (publisher, seq) batch applied once, and the dedup
tables kept in the state and its snapshots."""

from __future__ import annotations

from qq_helpers import Q, conservation_holds

from queues.quorum import (
    Attach,
    Confirm,
    Credit,
    Deliver,
    Enqueue,
    MsgIn,
    Outcome,
    Publish,
    StoreBodies,
    msg_id,
    overview,
    publish_outcome,
    restore,
    snapshot_bytes,
)
from queues.quorum.state import REMEMBERED_BATCHES

ACCEPTED, REJECTED = Outcome.ACCEPTED, Outcome.REJECTED


def batch(seq: int, n: int = 3, publisher: str = "n1#1/1", ttl: int | None = None, size: int = 4) -> Publish:
    return Publish(tuple((b"x" * size, True, ttl, "", ("q",), i, None) for i in range(n)), 1000, publisher, seq)


def test_a_new_batch_asks_the_host_to_store_its_bodies_then_enqueues_like_enqueue():
    q, twin = Q(), Q()
    fx = q.do(batch(1, n=3, size=7))
    assert fx == [StoreBodies(q.state.last_index, 3), Confirm((0, 1, 2), ACCEPTED)]
    twin.do(Enqueue(tuple(MsgIn(7, None, i) for i in range(3)), 1000))
    twin.state.publishers = q.state.publishers  # all the Publish adds is the dedup table
    assert q.state == twin.state
    assert overview(q.state)["ready_bytes"] == 21


def test_a_batch_proposed_again_is_answered_alike_and_changes_nothing_else():
    q = Q({"x-max-length": 2, "x-overflow": "reject-publish"})
    first = q.do(batch(1, n=3))
    assert first[1:] == [Confirm((0, 1), ACCEPTED), Confirm((2,), REJECTED)]
    before = overview(q.state)
    again = q.do(batch(1, n=3))  # the leader changed: the proposer could not know it was committed
    assert again == first[1:]  # no StoreBodies: its bodies are stored already
    after = overview(q.state)
    assert {k: v for k, v in after.items() if k != "last_index"} == {k: v for k, v in before.items()
                                                                      if k != "last_index"}  # fmt: skip
    assert publish_outcome(q.state, "n1#1/1", 1) == first[1:]
    assert publish_outcome(q.state, "n1#1/1", 2) is None


def test_batches_applied_out_of_order_count_once_each():
    q = Q()
    q.do(batch(1, n=2))
    q.do(batch(3, n=2))  # committed before the retry of 2
    ps = q.state.publishers["n1#1/1"]
    assert (ps.low, ps.above) == (1, {3})
    assert q.do(batch(2, n=2))[0] == StoreBodies(q.state.last_index, 2)
    assert (ps.low, ps.above) == (3, set())
    q.do(batch(3, n=2))
    q.do(batch(1, n=2))
    assert overview(q.state)["ready"] == 6 and conservation_holds(q.state)


def test_publishers_are_told_apart_and_an_anonymous_batch_is_never_deduplicated():
    q = Q()
    q.do(batch(1, publisher="n1#1/1"))
    assert q.do(batch(1, publisher="n2#5/1"))[0] == StoreBodies(q.state.last_index, 3)
    q.do(batch(0, publisher=""))
    assert q.do(batch(0, publisher=""))[0] == StoreBodies(q.state.last_index, 3)
    assert overview(q.state)["ready"] == 12 and set(q.state.publishers) == {"n1#1/1", "n2#5/1"}


def test_only_recent_outcomes_are_kept_but_old_batches_still_apply_once():
    q = Q()
    for seq in range(1, REMEMBERED_BATCHES + 11):
        q.do(batch(seq, n=1))
    ps = q.state.publishers["n1#1/1"]
    assert len(ps.outcomes) == REMEMBERED_BATCHES and min(ps.outcomes) == 11
    assert q.do(batch(3, n=1)) == []  # too old to be remembered: applied, not again, no confirm
    assert q.do(batch(11, n=1)) == [Confirm((0,), ACCEPTED)]
    assert overview(q.state)["ready"] == REMEMBERED_BATCHES + 10


def test_a_new_batch_is_delivered_at_once_after_its_store_effect():
    q = Q()
    q.do(Attach("c", 0, 1000))
    q.do(Credit("c", 0, 5))
    fx = q.do(batch(1, n=2))
    index = q.state.last_index
    assert isinstance(fx[0], StoreBodies) and isinstance(fx[-1], Deliver)
    assert fx[-1].msg_ids == (msg_id(index, 0), msg_id(index, 1))


def test_the_dedup_tables_are_snapshotted_with_the_state():
    q = Q()
    q.do(batch(1))
    q.do(batch(3, n=1, ttl=50))
    q.do(batch(1, publisher="other"))
    data = snapshot_bytes(q.state)
    copy = Q()
    copy.state = restore(data)
    assert copy.state == q.state and snapshot_bytes(copy.state) == data
    assert copy.do(batch(3, n=1, ttl=50)) == [Confirm((0,), ACCEPTED)]
    assert copy.do(batch(2, n=1))[0] == StoreBodies(copy.state.last_index, 1)
