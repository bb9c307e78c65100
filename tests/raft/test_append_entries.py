"""A follower's log never shrinks on a late duplicate AppendEntries (Raft §5.3).

pysyncobj as shipped deletes every entry after prevLogIdx before appending,
conflict or not; raft/patches.py deletes only from a conflicting entry. The
"stock" params run the same scenario on the stock SyncObj and check that the
bug is there (they demonstrate it; they do not test Warren).
"""

from __future__ import annotations

import pytest
from pysyncobj.node import Node
from raft_harness import Cluster, MemNet, MemTransport, build

from raft.patches import SafeSyncObj

STOCK = "stock-mem"
KINDS = ["ours", "safe-mem", pytest.param(STOCK, id="stock-mem-demonstrates-bug")]

# A lone follower that never campaigns: huge election timeouts.
PATIENT = {
    "raftMinTimeout": 100.0,
    "raftMaxTimeout": 200.0,
    "connectionTimeout": 200.0,
    "appendEntriesPeriod": 0.02,
    "leaderFallbackTimeout": 1.0,
}


@pytest.mark.parametrize("kind", KINDS)
def test_late_duplicate_append_entries_does_not_shrink_the_log(kind, tmp_path):
    c = Cluster.start(kind, tmp_path)
    try:
        leader = c.wait_leader()
        follower = next(m for m in c.members if m is not leader)
        c.commit([1, 2, 3])
        captured: list[dict] = []

        def tap(src, dst, msg):
            if dst == follower.name and msg.get("type") == "append_entries" and msg.get("entries"):
                captured.append(msg)

        c.net.taps.append(tap)
        c.commit([4])
        c.net.taps.clear()
        c.commit(list(range(5, 25)))
        c.run_until(lambda: len(follower.values) == 24)
        assert captured, "no AppendEntries with entries reached the follower"
        late = captured[0]
        before = follower.last_index()
        assert late["entries"][-1][1] < before

        follower.transport._onMessageReceived(Node(leader.name), late)
        after = follower.last_index()
        shrunk = after < before
        assert shrunk == (kind == STOCK)

        # Either way the cluster goes on and every member ends with the same values.
        c.commit(list(range(25, 30)))
        c.run_until(lambda: all(m.values == list(range(1, 30)) for m in c.members))
    finally:
        c.destroy()


def lone_follower(kind, tmp_path):
    net = MemNet()
    sink = MemTransport(net, "l")  # stands for the leader: collects what the follower sends
    sink.start(["f"])
    f = build(kind, "f", ["f", "l"], net, tmp_path, conf=PATIENT)
    return f, sink


def ae(term, prev_idx, prev_term, entries, commit):
    return {
        "type": "append_entries",
        "term": term,
        "commit_index": commit,
        "prevLogIdx": prev_idx,
        "prevLogTerm": prev_term,
        "entries": entries,
    }


NOOP = b"\x01"  # pysyncobj's no-op entry: never reaches the application


def acks(sink) -> list[tuple[int, bool]]:
    from pysyncobj import pickle

    out = [pickle.loads(d) for _, d in sink.inbox]
    sink.inbox.clear()
    return [(m["next_node_idx"], m["success"]) for m in out if m["type"] == "next_node_idx"]


def step(f):
    f.obj.doTick(0)
    if f.log is not None:
        f.log.flush()


def terms(f):
    log = f.raft_log
    return [(log[i][1], log[i][2]) for i in range(len(log))]


@pytest.mark.parametrize("kind", ["ours", "safe-mem", pytest.param(STOCK, id="stock-mem-demonstrates-bug")])
def test_stale_heartbeat_and_duplicates_keep_the_log(kind, tmp_path):
    f, sink = lone_follower(kind, tmp_path)
    try:
        leader = Node("l")
        deliver = f.transport._onMessageReceived
        entries = [(NOOP, i, 1) for i in range(2, 7)]
        deliver(leader, ae(1, 1, 0, entries, commit=1))
        step(f)
        assert terms(f) == [(1, 0)] + [(i, 1) for i in range(2, 7)]
        assert acks(sink) == [(7, True)]

        deliver(leader, ae(1, 1, 0, entries[:2], commit=1))  # late duplicate of 2..3
        step(f)
        dup_len = f.last_index()
        dup_acks = acks(sink)
        deliver(leader, ae(1, 1, 0, entries, commit=1))  # the whole log again
        step(f)
        assert f.last_index() == 6
        acks(sink)
        deliver(leader, ae(1, 3, 1, [], commit=1))  # late heartbeat, prevLogIdx 3
        step(f)
        hb_len = f.last_index()
        if kind == STOCK:
            assert (dup_len, hb_len) == (3, 3)  # each cut the log back to what it carried
            return
        assert (dup_len, hb_len) == (6, 6)
        assert dup_acks == [(4, True)]  # acks what the message verified, not the whole log
        assert acks(sink) == [(4, True)]
    finally:
        f.destroy()


@pytest.mark.parametrize("kind", ["ours", "safe-mem"])
def test_conflicts_still_truncate(kind, tmp_path):
    f, sink = lone_follower(kind, tmp_path)
    try:
        leader = Node("l")
        deliver = f.transport._onMessageReceived
        deliver(leader, ae(1, 1, 0, [(NOOP, i, 1) for i in range(2, 8)], commit=1))
        step(f)
        # A new leader at term 2 agrees up to 3 and has different entries from 4.
        deliver(leader, ae(2, 1, 0, [(NOOP, 2, 1), (NOOP, 3, 1), (NOOP, 4, 2)], commit=1))
        step(f)
        assert terms(f) == [(1, 0), (2, 1), (3, 1), (4, 2)]
        assert acks(sink)[-1] == (5, True)
        # A mismatching prevLogTerm is refused and changes nothing.
        deliver(leader, ae(2, 4, 1, [(NOOP, 5, 2)], commit=1))
        step(f)
        assert terms(f) == [(1, 0), (2, 1), (3, 1), (4, 2)]
        assert acks(sink)[-1] == (4, False)
    finally:
        f.destroy()


@pytest.mark.parametrize("kind", ["ours", "safe-mem"])
def test_commit_index_is_capped_at_what_the_message_verified(kind, tmp_path):
    f, sink = lone_follower(kind, tmp_path)
    try:
        leader = Node("l")
        deliver = f.transport._onMessageReceived
        # Entries 2..6 from term 1 that the term-2 leader does not have past 3.
        deliver(leader, ae(1, 1, 0, [(NOOP, i, 1) for i in range(2, 7)], commit=1))
        step(f)
        # The term-2 leader has committed up to 10 in its own log and only
        # verified our prefix up to 3: we must not commit our 4..6.
        deliver(leader, ae(2, 3, 1, [], commit=10))
        step(f)
        assert f.obj.raftCommitIndex == 3
        assert f.last_index() == 6
    finally:
        f.destroy()


def test_large_entries_sent_in_chunks_are_deduplicated_too(tmp_path):
    f, sink = lone_follower("ours", tmp_path)
    try:
        from pysyncobj import pickle

        leader = Node("l")
        deliver = f.transport._onMessageReceived
        deliver(leader, ae(1, 1, 0, [(NOOP, i, 1) for i in range(2, 6)], commit=1))
        step(f)
        blob = pickle.dumps((NOOP, 2, 1))
        for part, kind in ((blob[:5], "start"), (blob[5:10], "process"), (blob[10:], "finish")):
            msg = ae(1, 1, 0, [], commit=1)
            del msg["entries"]
            msg.update(transmission=kind, data=part)
            deliver(leader, msg)
        step(f)
        assert f.last_index() == 5
        assert acks(sink)[-1] == (3, True)
        assert isinstance(f.obj, SafeSyncObj)
    finally:
        f.destroy()
