"""DurableLog / RaftJournal: pysyncobj's Journal interface on RocksDB, and the flush gate."""

from __future__ import annotations

import asyncio
import inspect

import pytest
from pysyncobj import journal as stock_journal

from raft.journal import DurableLog, JournalError, RaftJournal


def entries(j: RaftJournal) -> list[tuple[bytes, int, int]]:
    return [j[i] for i in range(len(j))]


def fill(j: RaftJournal, first: int, last: int, term: int = 1) -> None:
    for i in range(first, last + 1):
        j.add(b"cmd%d" % i, i, term)


def test_implements_every_method_of_pysyncobj_journal():
    wanted = {n for n, _ in inspect.getmembers(stock_journal.Journal, inspect.isfunction)}
    assert wanted <= set(dir(RaftJournal)), wanted - set(dir(RaftJournal))


def test_entries_term_vote_and_commit_survive_reopen(tmp_path):
    with DurableLog(tmp_path / "raft") as log:
        j = log.journal("meta")
        fill(j, 1, 5)
        j.setCurrentTerm(3, "node-b:25672")
        j.setRaftCommitIndex(4)
        assert log.has_pending()
        log.flush()
    with DurableLog(tmp_path / "raft") as log:
        j = log.journal("meta")
        assert entries(j) == [(b"cmd%d" % i, i, 1) for i in range(1, 6)]
        assert j.getCurrentTerm() == 3
        assert j.getVotedForNodeId() == "node-b:25672"
        assert j.getRaftCommitIndex() == 4
        assert j[-1] == (b"cmd5", 5, 1)
        assert j[1:3] == [(b"cmd2", 2, 1), (b"cmd3", 3, 1)]


def test_unflushed_writes_are_not_on_disk(tmp_path):
    log = DurableLog(tmp_path / "raft")
    j = log.journal("g")
    fill(j, 1, 3)
    log.flush()
    fill(j, 4, 6)
    j.setCurrentTerm(7, "x")
    # Simulate a crash: close the database without flushing the pending batch.
    log._batches.close()
    log.close()
    with DurableLog(tmp_path / "raft") as log:
        j = log.journal("g")
        assert [e[1] for e in entries(j)] == [1, 2, 3]
        assert j.getCurrentTerm() == 0


def test_truncation_from_both_ends_is_a_range_delete(tmp_path):
    with DurableLog(tmp_path / "raft") as log:
        j = log.journal("g")
        fill(j, 1, 10)
        log.flush()
        j.deleteEntriesTo(3)  # compaction: keep positions 3.. (indexes 4..10)
        j.deleteEntriesFrom(4)  # conflict: drop positions 4.. (indexes 8..10)
        assert [e[1] for e in entries(j)] == [4, 5, 6, 7]
        j.add(b"new8", 8, 2)
        log.flush()
    with DurableLog(tmp_path / "raft") as log:
        j = log.journal("g")
        assert entries(j) == [(b"cmd4", 4, 1), (b"cmd5", 5, 1), (b"cmd6", 6, 1), (b"cmd7", 7, 1), (b"new8", 8, 2)]


def test_clear_then_restart_from_snapshot_entries(tmp_path):
    with DurableLog(tmp_path / "raft") as log:
        j = log.journal("g")
        fill(j, 1, 10)
        j.clear()
        j.add(b"s", 41, 3)
        j.add(b"t", 42, 3)
    with DurableLog(tmp_path / "raft") as log:
        assert entries(log.journal("g")) == [(b"s", 41, 3), (b"t", 42, 3)]


def test_groups_are_independent_and_droppable(tmp_path):
    with DurableLog(tmp_path / "raft") as log:
        a, ab = log.journal("a"), log.journal("ab")
        fill(a, 1, 3)
        fill(ab, 1, 5)
        a.setCurrentTerm(2, None)
        log.flush()
        assert log.groups() == ["a", "ab"]
        with pytest.raises(JournalError):
            log.journal("a")  # already open
        a._destroy()
        log.drop_group("a")
        log.flush()
        assert log.groups() == ["ab"]
        a2 = log.journal("a")
        assert len(a2) == 0 and a2.getCurrentTerm() == 0
        assert [e[1] for e in entries(ab)] == [1, 2, 3, 4, 5]


def test_add_must_extend_the_log(tmp_path):
    with DurableLog(tmp_path / "raft") as log:
        j = log.journal("g")
        fill(j, 1, 2)
        with pytest.raises(JournalError):
            j.add(b"x", 4, 1)


def test_one_flush_covers_every_group(tmp_path):
    with DurableLog(tmp_path / "raft") as log:
        journals = [log.journal(f"q{i}") for i in range(20)]
        for j in journals:
            fill(j, 1, 5)
        before = log.flushes
        log.flush()
        assert log.flushes == before + 1
        assert all(j.durable_index() == 5 for j in journals)


def test_durable_index_follows_flushes_and_truncation(tmp_path):
    with DurableLog(tmp_path / "raft") as log:
        j = log.journal("g")
        fill(j, 1, 3)
        assert j.durable_index() == 0
        log.flush()
        assert j.durable_index() == 3
        fill(j, 4, 6)
        assert j.durable_index() == 3
        j.deleteEntriesFrom(1)  # drops 2..6: what is durable and kept is index 1
        assert j.durable_index() == 1
        j.add(b"x", 2, 2)
        log.flush()
        assert j.durable_index() == 2


# -- the gate: messages wait for the flush that covers what they reflect ------


def test_after_durable_holds_until_flush_in_order(tmp_path):
    with DurableLog(tmp_path / "raft") as log:
        j = log.journal("g")
        out: list[str] = []
        log.after_durable(lambda: out.append("clean"))  # nothing pending: at once
        assert out == ["clean"]
        j.add(b"a", 1, 1)
        log.after_durable(lambda: out.append("ack1"))
        j.add(b"b", 2, 1)
        log.after_durable(lambda: out.append("ack2"))
        log.after_durable(lambda: out.append("heartbeat"))  # nothing new, but must not overtake ack2
        assert out == ["clean"] and log.held() == 3
        log.flush()
        assert out == ["clean", "ack1", "ack2", "heartbeat"]
        assert log.held() == 0


def test_sync_point_for_the_transport_gate(tmp_path):
    async def main():
        with DurableLog(tmp_path / "raft") as log:
            j = log.journal("g")
            assert log.sync_point() is None
            j.add(b"a", 1, 1)
            fut = log.sync_point()
            assert fut is not None and not fut.done()
            log.flush_every_turn(asyncio.get_running_loop())
            await asyncio.wait_for(fut, 5)
            assert j.durable_index() == 1
            # every later write schedules one flush for the turn
            j.add(b"b", 2, 1)
            j.add(b"c", 3, 1)
            fut = log.sync_point()
            await asyncio.wait_for(fut, 5)
            assert j.durable_index() == 3

    asyncio.run(main())


def test_a_failed_write_fails_stop(tmp_path):
    async def main():
        log = DurableLog(tmp_path / "raft")
        j = log.journal("g")
        j.add(b"a", 1, 1)
        released: list[int] = []
        log.after_durable(lambda: released.append(1))
        fut = log.sync_point()

        class Broken:
            def sync(self):
                raise OSError(5, "EIO")

            def close(self):
                pass

        log._batches._wal = Broken()
        with pytest.raises(JournalError):
            log.flush()
        with pytest.raises(JournalError):
            await fut
        assert released == []
        with pytest.raises(JournalError):
            j.add(b"b", 2, 1)
        log._batches._wal = None
        log.close()

    asyncio.run(main())


def test_flush_fsyncs_the_wal(tmp_path, monkeypatch):
    import os

    calls: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (calls.append(fd), real(fd))[1])
    with DurableLog(tmp_path / "raft") as log:
        j = log.journal("g")
        fill(j, 1, 3)
        n = len(calls)
        log.flush()
        assert len(calls) > n
        n = len(calls)
        log.flush()  # nothing pending: no sync
        assert len(calls) == n


def test_blobs_put_at_once_are_kept_per_group_flushed_with_the_journal_and_survive_reopen(tmp_path):
    """put_blobs (a quorum queue's batch of bodies) is put_blob of each, in one pending batch."""
    with DurableLog(tmp_path / "raft") as log:
        log.put_blobs("g1", [(b"\x00" * 7 + bytes([i]), b"body%d" % i) for i in range(3)])
        log.put_blob("g2", b"\x00" * 7 + b"\x01", b"other")
        assert log.get_blob("g1", b"\x00" * 7 + b"\x01") is None  # pending: not readable before the flush
        log.flush()
        assert log.blobs_from("g1", b"\x00" * 8, 10, 8) == [(b"\x00" * 7 + bytes([i]), b"body%d" % i)
                                                           for i in range(3)]  # fmt: skip
    with DurableLog(tmp_path / "raft") as log:
        assert log.get_blob("g1", b"\x00" * 7 + b"\x02") == b"body2"
        assert log.blobs_from("g2", b"\x00" * 8, 10, 8) == [(b"\x00" * 7 + b"\x01", b"other")]
