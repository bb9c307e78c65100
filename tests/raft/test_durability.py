"""Persist before send, persist before confirm.

- A follower's ack of new entries leaves only after the flush that makes
  them durable (the transport holds it: DurableLog.after_durable).
- A vote leaves only after the flush that makes the term and vote durable.
- A leader counts itself toward a commit only for entries on disk
  (SafeSyncObj's override of the commit count).

"stock" params run the same steps on pysyncobj's own pieces and check that
the bug is there.
"""

from __future__ import annotations

import os
import time

import pytest
from pysyncobj import pickle
from pysyncobj.node import Node
from raft_harness import Cluster, MemNet, MemTransport, build

from raft.status import ProposalOutcome


def inbox_messages(t: MemTransport) -> list[dict]:
    return [pickle.loads(d) for _, d in t.inbox]


@pytest.fixture
def syncs(monkeypatch):
    """Records every fsync/fdatasync/msync the process makes."""
    calls: list[str] = []
    for name in ("fsync", "fdatasync"):
        real = getattr(os, name)
        monkeypatch.setattr(os, name, lambda fd, real=real, name=name: (calls.append(name), real(fd))[1])
    import mmap

    real_flush = mmap.mmap.flush

    class Spy(mmap.mmap):
        def flush(self, *a):
            calls.append("msync")
            return real_flush(self, *a)

    monkeypatch.setattr(mmap, "mmap", Spy)
    return calls


@pytest.mark.parametrize("kind", ["ours", pytest.param("stock", id="stock-demonstrates-bug")])
def test_follower_acks_entries_only_after_they_are_durable(kind, tmp_path, syncs):
    c = Cluster.start(kind, tmp_path)
    try:
        leader = c.wait_leader()
        c.commit([1, 2, 3])
        follower = next(m for m in c.members if m is not leader)
        c.run_until(lambda: len(follower.values) == 3)
        last = follower.last_index()
        leader.propose(4)

        def entry_in_inbox():
            return any(m["type"] == "append_entries" and m.get("entries") for m in inbox_messages(follower.transport))

        deadline = time.monotonic() + 5
        while not entry_in_inbox():  # move the leader alone until its entries reach the follower
            assert time.monotonic() < deadline
            leader.transport.deliver_inbox()
            leader.obj.doTick(0)
            if leader.log is not None:
                leader.log.flush()

        sent = len(follower.transport.sent)
        del syncs[:]
        follower.transport.deliver_inbox()
        follower.obj.doTick(0)
        assert follower.last_index() == last + 1

        def acks():
            return [
                m
                for _, m in follower.transport.sent[sent:]
                if m["type"] == "next_node_idx" and m["success"] and m["next_node_idx"] > last + 1
            ]

        acked_before_sync = bool(acks()) and not syncs
        assert acked_before_sync == (kind == "stock")
        if kind == "ours":
            assert follower.log.held() > 0
            assert follower.raft_log.durable_index() == last
            follower.log.flush()
            assert "fdatasync" in syncs
            assert [m["next_node_idx"] for m in acks()] == [last + 2]
            assert follower.raft_log.durable_index() == last + 1
    finally:
        c.destroy()


def test_vote_leaves_only_after_term_and_vote_are_durable(tmp_path, syncs):
    net = MemNet()
    sink = MemTransport(net, "cand")
    sink.start(["v"])
    voter = build(
        "ours",
        "v",
        ["v", "cand"],
        net,
        tmp_path,
        conf={"raftMinTimeout": 100.0, "raftMaxTimeout": 200.0, "connectionTimeout": 200.0},
    )
    try:
        voter.obj.doTick(0)
        voter.log.flush()
        sink.inbox.clear()
        del syncs[:]
        msg = {"type": "request_vote", "term": 5, "last_log_index": 1, "last_log_term": 0}
        voter.transport._onMessageReceived(Node("cand"), msg)
        assert voter.raft_log.getVotedForNodeId() == "cand"
        assert sink.inbox == [] and voter.log.held() == 1
        voter.log.flush()
        assert "fdatasync" in syncs
        assert inbox_messages(sink) == [{"type": "response_vote", "term": 5}]
    finally:
        voter.destroy()
    # and the vote survived
    from raft.journal import DurableLog

    with DurableLog(tmp_path / "v" / "raft") as log:
        j = log.journal("g")
        assert (j.getCurrentTerm(), j.getVotedForNodeId()) == (5, "cand")


@pytest.mark.parametrize("kind", ["ours", pytest.param("stock-durable", id="stock-syncobj-demonstrates-bug")])
def test_leader_counts_itself_only_for_durable_entries(kind, tmp_path):
    c = Cluster.start(kind, tmp_path, names=["a"])
    try:
        leader = c.wait_leader()
        c.commit([1])
        commit_before = leader.obj.raftCommitIndex
        done: list[int] = []
        leader.propose(2, callback=lambda res, err: done.append(err))
        for _ in range(30):  # ticks, no flush: the entry is only in the pending batch
            leader.obj.doTick(0)
            time.sleep(0.001)
        assert leader.last_index() == commit_before + 1
        committed_unsynced = leader.obj.raftCommitIndex > commit_before or bool(done)
        assert committed_unsynced == (kind == "stock-durable")
        if kind == "ours":
            assert leader.log.has_pending()
            leader.log.flush()
            c.run_until(lambda: done == [ProposalOutcome.SUCCESS], timeout=5)
            assert leader.obj.raftCommitIndex == commit_before + 1
            assert leader.values == [1, 2]
    finally:
        c.destroy()
