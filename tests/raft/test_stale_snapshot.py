"""A follower keeps its log when a leader sends it a snapshot it has passed already.

pysyncobj installs every snapshot a leader sends: it clears the journal down to the
snapshot's last two entries and clamps its commit index there ("raftCommitIndex exceeds
journal end after loading dump"), so a follower that had gone further forgets entries it
had acknowledged. A leader sends such a snapshot whenever an old "reset" answer lowers
its next index for the follower: a member added to a busy group answers every entry sent
before its snapshot arrived with one, and the leader sends the snapshot again for each
(the chaos suite's replica-remove nemesis saw a re-added member install it dozens of
times). Raft §7 keeps the entries that follow a snapshot the log already has; so does
raft/patches.py (patch 12). The "stock" param runs the same scenario on the stock SyncObj
with Warren's journal and shows the bug there.
"""

from __future__ import annotations

import logging

import pytest
from pysyncobj.node import Node
from raft_harness import Cluster

STOCK = "stock-durable"


@pytest.mark.parametrize("kind", ["ours", pytest.param(STOCK, id="stock-durable-demonstrates-bug")])
def test_a_snapshot_the_follower_has_passed_leaves_its_log_alone(kind, tmp_path, caplog):
    c = Cluster.start(kind, tmp_path)
    try:
        leader = c.wait_leader()
        follower = next(m for m in c.members if m is not leader)
        c.net.blocked |= {(leader.name, follower.name), (follower.name, leader.name)}
        c.commit(list(range(1, 31)))
        leader.obj.forceLogCompaction()
        c.run_until(lambda: leader.raft_log[0][1] > follower.last_index())  # the follower needs the snapshot
        snapshot: list[dict] = []

        def tap(src, dst, msg):
            if dst == follower.name and msg.get("serialized") is not None:
                snapshot.append(msg)

        c.net.taps.append(tap)
        c.net.blocked.clear()
        c.run_until(lambda: follower.values == list(range(1, 31)))
        c.net.taps.clear()
        assert snapshot and snapshot[-1]["serialized"][2], "the leader sent no whole snapshot"
        snapshot_end = leader.raft_log[0][1]
        c.commit(list(range(31, 41)))
        c.run_until(lambda: follower.values == list(range(1, 41)) and follower.last_index() == leader.last_index())
        before = follower.last_index()
        assert before > snapshot_end

        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="pysyncobj.syncobj"):
            for msg in snapshot:  # the same snapshot again, as a late reset makes the leader send it
                follower.transport._onMessageReceived(Node(leader.name), msg)
            follower.obj.doTick(0)
        clamped = "exceeds journal end" in caplog.text
        after = follower.last_index()
        if kind == STOCK:
            assert clamped and after < before  # the acknowledged entries after the snapshot are gone
        else:
            assert not clamped and after == before
            assert follower.obj._SyncObj__raftCommitIndex >= before - 1

        # Either way the group goes on and every member ends with the same values.
        c.commit(list(range(41, 46)))
        c.run_until(lambda: all(m.values == list(range(1, 46)) for m in c.members))
    finally:
        c.destroy()
