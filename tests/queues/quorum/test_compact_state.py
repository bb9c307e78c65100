"""The columns a deep quorum queue is kept in: the ready list as runs of ids
(ready.py), the live counts per raft index (live.py), what they cost per
message, and their snapshots."""

from __future__ import annotations

import tracemalloc

import pytest
from qq_helpers import Q

from queues.quorum import Enqueue, MsgIn, Settle, apply, msg_id, new_state, release_cursor, restore, snapshot_bytes
from queues.quorum.commands import POS_BITS
from queues.quorum.dispatch import release_run
from queues.quorum.live import LiveIndexes
from queues.quorum.ready import _CUT, ReadyList


def tuples(ready: ReadyList) -> list[tuple]:
    return list(ready)


# ---------------------------------------------------------------- ReadyList


def test_consecutive_ids_with_one_expiry_are_one_run_whatever_the_appends():
    a = ReadyList()
    a.add_run(100, [1, 2, 3], None)
    a.add_run(103, [4], None)  # continues the run
    a.add_run(104, [5, 6], 50)  # another expiry: a new run
    a.add_run(110, [7], 50)  # a gap: a new run
    b = ReadyList()
    for mid, size, exp in [(100, 1, None), (101, 2, None), (102, 3, None), (103, 4, None), (104, 5, 50),
                           (105, 6, 50), (110, 7, 50)]:  # fmt: skip
        b.append(mid, size, exp)
    assert list(a.runs()) == list(b.runs()) == [(100, 4, -1), (104, 2, 50), (110, 1, 50)]
    assert a == b and len(a) == 7
    assert [m[0] for m in a] == [100, 101, 102, 103, 104, 105, 110]
    assert a[4] == (104, 5, 50, 0, 0, None) and a[-1] == (110, 7, 50, 0, 0, None)
    with pytest.raises(IndexError):
        a[7]


def test_the_head_moves_across_runs_and_an_emptied_list_starts_afresh():
    r = ReadyList()
    r.add_run(10, [1, 2], None)
    r.add_run(20, [3], 7)
    assert r.head() == (10, 1, None, 0, 0, None) and r.head_expiry() is None
    assert r.popleft() == (10, 1, None, 0, 0, None)
    assert list(r.runs()) == [(11, 1, -1), (20, 1, 7)]
    assert r.popleft()[0] == 11 and r.head_expiry() == 7
    assert r.popleft() == (20, 3, 7, 0, 0, None)
    assert not r and r.head() is None and r.memory_slots() == (0, 0)
    with pytest.raises(IndexError):
        r.popleft()
    # a message continuing the last popped one is a new run of a new list
    r.append(21, 4, 7)
    assert list(r.runs()) == [(21, 1, 7)]


def test_peek_stops_at_the_limit_and_at_the_fresh_boundary():
    r = ReadyList()
    r.add_run(0, list(range(10)), None)
    first, n, exp, sizes = r.peek(4, 1 << 80)
    assert (first, n, exp, list(sizes)) == (0, 4, None, [0, 1, 2, 3]) and len(r) == 10  # left in place
    r.drop(3)
    assert r.peek(100, 6)[:2] == (3, 3)  # ids below 6 only
    r.drop(3)
    assert r.peek(100, 6)[:2] == (6, 4)  # from 6 on
    assert r.peek(100, 0)[:2] == (6, 4)


def test_a_run_split_by_partial_takes_still_equals_one_built_afresh():
    a = ReadyList()
    a.add_run(0, [1] * 10, None)
    a.drop(4)
    a.add_run(10, [1] * 2, None)
    b = ReadyList()
    b.add_run(4, [1] * 8, None)
    assert a == b and a.key() == b.key()


def test_the_consumed_prefix_is_cut_off():
    r = ReadyList()
    for i in range(3 * _CUT):
        r.append(i * 2, 1, None)  # a run per message (gaps)
    for _ in range(2 * _CUT + 10):
        r.popleft()
    runs, sizes = r.memory_slots()
    assert runs < 2 * _CUT and sizes < 2 * _CUT
    assert [m[0] for m in r] == [i * 2 for i in range(2 * _CUT + 10, 3 * _CUT)]


# ---------------------------------------------------------------- LiveIndexes


def test_live_indexes_release_in_any_order_and_the_first_is_the_cursor():
    live = LiveIndexes()
    for idx in (3, 5, 9):
        live.add(idx, 2)
    with pytest.raises(ValueError):
        live.add(9, 1)
    live.release(5, 2)
    assert live.first() == 3 and len(live) == 2 and 5 not in live and live.get(9) == 2
    live.release(3)
    live.release(3)
    assert live.first() == 9 and live.key() == [(9, 2)]
    with pytest.raises(ValueError):
        live.release(9, 3)
    with pytest.raises(KeyError):
        live.release(4)
    live.release(9, 2)
    assert live.first() is None and not live and live.slots() == 0


def test_zeros_behind_a_stuck_head_are_rewritten_away():
    live = LiveIndexes()
    live.add(1, 1)
    for idx in range(2, 5000):
        live.add(idx, 1)
        live.release(idx)
    assert live.first() == 1 and len(live) == 1 and live.slots() < 200


def test_a_run_across_two_full_batches_releases_both_indexes():
    st = new_state()
    st.live.add(7, 1 << POS_BITS)  # a full batch: ids contiguous with the next index's
    st.live.add(8, 3)
    release_run(st, msg_id(7, (1 << POS_BITS) - 2), 4)
    assert st.live.key() == [(7, (1 << POS_BITS) - 2), (8, 1)]


def test_restoring_live_pairs_checks_them():
    for indexes, counts in (([1, 2], [1]), ([2, 1], [1, 1]), ([1], [0])):
        with pytest.raises(ValueError):
            LiveIndexes.from_pairs(indexes, counts)


# ---------------------------------------------------------------- what it costs


def bytes_per_message(total: int, batch: int) -> float:
    msgs = tuple(MsgIn(1000 + i % 7, None, None) for i in range(batch))
    tracemalloc.start()
    try:
        st = new_state()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(total // batch):
            st, _ = apply(Enqueue(msgs, 1000), st)
        return (tracemalloc.get_traced_memory()[0] - before) / total
    finally:
        tracemalloc.stop()


def test_a_deep_queue_costs_a_few_bytes_per_message():
    # a tuple per message and a dict entry per index cost 128 B per message
    # in batches of 300 (221 B with one message per entry)
    assert bytes_per_message(200_000, 300) < 8
    assert bytes_per_message(20_000, 1) < 48


def test_a_snapshot_of_plain_ready_messages_is_their_sizes_and_a_run_per_batch():
    q = Q()
    for _ in range(100):
        q.publish(100)
    data = snapshot_bytes(q.state)
    assert len(data) < 100 * 100 * 4 + 100 * (20 + 12) + 200
    assert restore(data) == q.state


def test_equal_queues_of_different_histories_snapshot_to_equal_bytes():
    # one consumed part of each batch, the other built from the restored copy
    a = Q()
    for _ in range(5):
        a.publish(10)
    a.attach("c", credit=23)
    a.do(Settle("c", tuple(d.msg_id for d in a.delivered("c"))))
    b = Q()
    b.state = restore(snapshot_bytes(a.state))
    for q in (a, b):
        q.publish(4, ttl=100)
        q.publish(1)
    assert a.state == b.state and snapshot_bytes(a.state) == snapshot_bytes(b.state)
    assert release_cursor(a.state) == 3  # batch 3 (index 3) is partly consumed
