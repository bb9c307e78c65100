"""Throughput and snapshot cost of the quorum queue machine (not a test).
Times are CPU time of this process (time.process_time), so that a busy
machine disturbs them less.

    .venv/bin/python bench/quorum_machine.py
"""

from __future__ import annotations

import time
import tracemalloc

from queues.quorum import (
    Attach,
    Credit,
    Enqueue,
    MsgIn,
    Settle,
    apply,
    new_state,
    restore,
    snapshot_bytes,
)
from queues.quorum.commands import msg_id


def bench_cycles(batches: int = 5000, batch: int = 100, ttl: bool = False) -> float:
    """µs per message for: Enqueue(100) -> delivered -> Settle(100)."""
    st = new_state({"x-message-ttl": 60000} if ttl else {})
    st, _ = apply(Attach("c"), st)
    st, _ = apply(Credit("c", 0, 1 << 30), st)
    msgs = tuple(MsgIn(100, None, i) for i in range(batch))
    t0 = time.process_time()
    for _ in range(batches):
        st, fx = apply(Enqueue(msgs, 1000), st)
        ids = fx[1].msg_ids
        st, _ = apply(Settle("c", ids), st)
    dt = time.process_time() - t0
    assert st.counters.acknowledged == batches * batch
    return dt / (batches * batch) * 1e6


def bench_cycles_topped_up(batches: int = 5000, batch: int = 100, consumers: int = 1) -> float:
    """µs per message when each consumer's credit is topped up by a Credit
    command per batch (as a link granting 100 credits at a time would), round
    robin among `consumers`."""
    st = new_state()
    cids = [f"c{i}" for i in range(consumers)]
    for cid in cids:
        st, _ = apply(Attach(cid), st)
    msgs = tuple(MsgIn(100, None, i) for i in range(batch))
    t0 = time.process_time()
    for _ in range(batches):
        for cid in cids:
            dc = st.consumers[cid].delivery_count
            st, _ = apply(Credit(cid, dc, batch), st)
        st, fx = apply(Enqueue(msgs, 1000), st)
        for e in fx[1:]:
            st, _ = apply(Settle(e.consumer_id, e.msg_ids), st)
    dt = time.process_time() - t0
    assert st.counters.acknowledged == batches * batch
    return dt / (batches * batch) * 1e6


def bench_enqueue_only(total: int = 1_000_000, batch: int = 100) -> tuple:
    st = new_state()
    msgs = tuple(MsgIn(100, None, i) for i in range(batch))
    t0 = time.process_time()
    for _ in range(total // batch):
        st, _ = apply(Enqueue(msgs, 1000), st)
    dt = time.process_time() - t0
    return st, dt / total * 1e6


def bench_memory(total: int = 1_000_000, batch: int = 300) -> float:
    """Bytes of machine state per ready message (tracemalloc), `batch` per Enqueue."""
    msgs = tuple(MsgIn(1000 + i % 7, None, None) for i in range(batch))
    tracemalloc.start()
    try:
        st = new_state()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(total // batch):
            st, _ = apply(Enqueue(msgs, 1000), st)
        return (tracemalloc.get_traced_memory()[0] - before) / (total // batch * batch)
    finally:
        tracemalloc.stop()


def bench_snapshot(st) -> tuple[int, float, float]:
    t0 = time.process_time()
    data = snapshot_bytes(st)
    t1 = time.process_time()
    st2 = restore(data)
    t2 = time.process_time()
    assert st2.ready_count == st.ready_count
    return len(data), (t1 - t0) * 1e3, (t2 - t1) * 1e3


def main() -> None:
    print(f"enqueue+deliver+settle, batches of 100: {bench_cycles():.3f} µs/msg")
    print(f"  ... with x-message-ttl:               {bench_cycles(ttl=True):.3f} µs/msg")
    print(f"  ... Credit command per batch:         {bench_cycles_topped_up():.3f} µs/msg")
    print(f"  ... 3 consumers, round robin:         {bench_cycles_topped_up(consumers=3):.3f} µs/msg")
    st, us = bench_enqueue_only()
    print(f"enqueue only (no consumer), 1M msgs:     {us:.3f} µs/msg")
    size, ms_dump, ms_load = bench_snapshot(st)
    print(f"snapshot 1M ready refs: {size} bytes, dump {ms_dump:.0f} ms, restore {ms_load:.0f} ms")
    # half of them checked out, some returned
    st, _ = apply(Attach("c"), st)
    st, _ = apply(Credit("c", 0, 500_000), st)
    st, _ = apply(Settle("c", tuple(msg_id(1 + i // 100, i % 100) for i in range(0, 1000, 2))), st)
    size, ms_dump, ms_load = bench_snapshot(st)
    print(f"snapshot 1M refs (500k checked out): {size} bytes, dump {ms_dump:.0f} ms, restore {ms_load:.0f} ms")
    print(f"state per ready message, 1M in Enqueues of 300: {bench_memory():.1f} B")
    print(f"  ... of 1:                                      {bench_memory(200_000, 1):.1f} B")


if __name__ == "__main__":
    main()
