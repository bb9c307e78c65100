"""The journal holds terms and lengths, not commands: only the newest
entries' commands (and the first two) stay in memory, the rest is read back
from RocksDB, in ranges, sized without reading."""

from __future__ import annotations

import pytest
from raft_harness import Cluster

from raft.journal import DurableLog, RaftJournal

BODY = 64 << 10  # a quorum queue entry carries a loop turn's bodies


def command(idx: int) -> bytes:
    return bytes([idx % 251]) * BODY


def fill(j: RaftJournal, first: int, last: int, term: int = 1) -> None:
    for i in range(first, last + 1):
        j.add(command(i), i, term)


def test_durable_commands_past_the_tail_budget_leave_memory_and_read_back(tmp_path):
    with DurableLog(tmp_path / "raft", sync=False) as log:
        j = log.journal("q")
        j.tail_bytes = 4 * BODY
        fill(j, 1, 100)
        # nothing is durable yet: RocksDB cannot give these back, memory keeps them
        assert j.held_bytes() >= 100 * BODY
        log.flush()
        j.durable_index()
        assert j.held_bytes() <= 4 * BODY + 2 * BODY  # the tail budget + the first two
        assert j.command_bytes == 100 * BODY  # still counted for compaction by size
        assert len(j) == 100 and j[0][1:] == (1, 1) and j[-1][1] == 100
        assert j[50] == (command(51), 51, 1)
        assert [e[1] for e in j[10:20]] == list(range(11, 21))
        assert all(e[0] == command(e[1]) for e in j[:])
        assert j.term_at(77) == 1 and (j.first_index(), j.last_index()) == (1, 100)


def test_entries_are_sized_from_the_lengths_held(tmp_path):
    with DurableLog(tmp_path / "raft", sync=False) as log:
        j = log.journal("q")
        j.tail_bytes = 0
        fill(j, 1, 30)
        log.flush()
        j.durable_index()
        # pysyncobj's __getEntries: up to the first entry whose bytes reach the limit
        got = j.entries(5, None, 3 * BODY)
        assert [e[1] for e in got] == [5, 6, 7] and got[0][0] == command(5)
        assert [e[1] for e in j.entries(28)] == [28, 29, 30]
        assert [e[1] for e in j.entries(3, 2)] == [3, 4]
        assert j.entries(0) == [] and j.entries(None) == [] and j.entries(31) == []
        assert j.span_end(1, 30, 5 * BODY) == 5 and j.span_end(1, 30, 1) == 1 and j.span_end(29, 30, 10**9) == 30


def test_a_reopened_journal_loads_indexes_and_terms_only(tmp_path):
    with DurableLog(tmp_path / "raft", sync=False) as log:
        fill(log.journal("q"), 1, 200)
    with DurableLog(tmp_path / "raft", sync=False) as log:
        j = log.journal("q")
        assert len(j) == 200 and j.command_bytes == 200 * BODY
        assert j.held_bytes() == 4 * BODY  # the first two entries and the last two, nothing else
        assert j[199] == (command(200), 200, 1)
        fill(j, 201, 203, term=2)
        assert [e[1:] for e in j[197:]] == [(198, 1), (199, 1), (200, 1), (201, 2), (202, 2), (203, 2)]


def test_truncation_and_compaction_keep_the_reads_right(tmp_path):
    with DurableLog(tmp_path / "raft", sync=False) as log:
        j = log.journal("q")
        j.tail_bytes = 3 * BODY
        fill(j, 1, 20)
        log.flush()
        j.durable_index()
        j.deleteEntriesFrom(15)  # a conflict: 16.. go, from disk and from the tail
        fill(j, 16, 18, term=2)
        assert j[-1] == (command(18), 18, 2) and j[14] == (command(15), 15, 1)
        j.deleteEntriesTo(10)  # compaction: the new first two are read from disk (still pending deletion)
        assert (j.first_index(), len(j)) == (11, 8)
        assert j[0] == (command(11), 11, 1) and j[1] == (command(12), 12, 1)
        assert j.command_bytes == 8 * BODY
        log.flush()
        j.durable_index()
        assert [e[1:] for e in j[:]] == [(i, 1) for i in range(11, 16)] + [(i, 2) for i in range(16, 19)]
        j.deleteEntriesFrom(0)
        assert len(j) == 0 and j.held_bytes() == 0 and j.command_bytes == 0
        j.add(b"x", 11, 3)
        assert j[0] == (b"x", 11, 3)
        with pytest.raises(IndexError):
            j[1]


def test_a_follower_far_behind_is_fed_from_the_leaders_disk(tmp_path):
    """With no command of the durable log in memory, a lagging follower's
    AppendEntries are read back from RocksDB (raft/patches.py, patch 9)."""
    c = Cluster.start("ours", tmp_path, logCompactionMinEntries=10**6)
    try:
        for m in c.members:
            m.raft_log.tail_bytes = 0  # only what is not yet durable (and the last two) stays in memory
        leader = c.wait_leader()
        lagging = next(m for m in c.members if m is not leader)
        for other in c.members:
            if other is not lagging:
                c.net.blocked |= {(other.name, lagging.name), (lagging.name, other.name)}
        c.commit(list(range(1, 201)))
        held = leader.raft_log.held_bytes()
        assert held < leader.raft_log.command_bytes / 10  # the 200 commands are on disk only
        c.net.blocked.clear()
        c.run_until(lambda: lagging.values == list(range(1, 201)), timeout=15)
        assert [e[1:] for e in lagging.raft_log[:]] == [e[1:] for e in leader.raft_log[:]]
        assert [e[0] for e in lagging.raft_log[:]] == [e[0] for e in leader.raft_log[:]]
        c.step()  # flushed: the follower's entries are durable
        lagging.raft_log.durable_index()
        assert lagging.raft_log.held_bytes() < lagging.raft_log.command_bytes / 10
    finally:
        c.destroy()
