"""DurableLog on a disk that is full for a while (ENOSPC injected before the
write, storage/faults.py), driven by the node's GroupCommitter: nothing the
failed write held counts as durable, the gate's waiters are told NotDurable,
a group can still be opened, and once the fault clears the same writes land
and survive a reopen."""

from __future__ import annotations

import asyncio

import pytest

from raft.journal import DurableLog, JournalFullError, NotDurable
from storage.faults import DiskFaults
from storage.group_commit import GroupCommitter


def test_a_full_disk_is_waited_out_without_counting_anything_durable(tmp_path):
    asyncio.run(_waited_out(tmp_path))


async def _waited_out(tmp_path) -> None:
    log = DurableLog(tmp_path / "raft")
    faults = DiskFaults()
    log.inject_faults(faults, "raft")
    full_seen = []
    committer = GroupCommitter(log, retry_full=0.01, on_full=lambda: full_seen.append(log.drop_unwritten_turns()),
                               on_written=log.release_durable, name="raft log")  # fmt: skip
    log.on_stall = committer.stall
    j = log.journal("g")
    j.add(b"one", 1, 1)
    await committer.flush()
    assert j.durable_index() == 1

    faults.arm("raft", "write", "ENOSPC", None)
    j.add(b"two", 2, 1)
    gate = log.sync_point()
    released = []
    landed = asyncio.Event()
    log.after_durable(lambda: (released.append("two"), landed.set()))
    with pytest.raises(NotDurable):
        await asyncio.wait_for(gate, 5)
    assert committer.out_of_space and isinstance(log.out_of_space, JournalFullError)
    assert full_seen == [1] and released == [] and j.durable_index() == 1
    j.add(b"three", 3, 1)
    with pytest.raises(NotDurable):  # a gate asked while full fails at once: that turn is dropped
        await log.sync_point()
    with pytest.raises(JournalFullError):  # no waiting on the loop for a write that cannot land
        log.flush()
    other = log.journal("other")  # a group that wrote nothing since opens from disk
    assert len(other) == 0

    faults.clear()
    await asyncio.wait_for(landed.wait(), 5)  # (committer.flush() would raise: it is out of space until then)
    await committer.flush()
    assert not committer.out_of_space and log.out_of_space is None
    assert released == ["two"] and j.durable_index() == 3
    assert log.sync_point() is None
    await committer.close()
    log.close()
    with DurableLog(tmp_path / "raft") as again:
        reopened = again.journal("g")
        assert [reopened[i][0] for i in range(3)] == [b"one", b"two", b"three"]


def test_a_flush_on_the_loop_that_meets_a_full_disk_hands_its_batch_to_the_committer(tmp_path):
    asyncio.run(_flush_handed_over(tmp_path))


async def _flush_handed_over(tmp_path) -> None:
    log = DurableLog(tmp_path / "raft")
    faults = DiskFaults()
    log.inject_faults(faults, "raft")
    committer = GroupCommitter(log, retry_full=0.01, on_written=log.release_durable, name="raft log")
    log.on_stall = committer.stall
    j = log.journal("g")
    j.add(b"one", 1, 1)
    faults.arm("raft", "fsync", "ENOSPC", 2)
    with pytest.raises(JournalFullError):
        log.flush()  # a snapshot's sync: it fails, and pysyncobj tries the snapshot again later
    assert committer.out_of_space and j.durable_index() == 0
    landed = asyncio.Event()
    log.after_durable(landed.set)
    await asyncio.wait_for(landed.wait(), 5)  # the second retry writes it
    assert j.durable_index() == 1 and faults.describe() == {"armed": [], "fired": {"messages": 0, "raft": 2,
                                                                                    "stream": 0}}  # fmt: skip
    await committer.close()
    log.close()


def test_an_io_error_still_fails_the_log_for_good(tmp_path):
    log = DurableLog(tmp_path / "raft")
    faults = DiskFaults()
    log.inject_faults(faults, "raft")
    j = log.journal("g")
    j.add(b"one", 1, 1)
    faults.arm("raft", "write", "EIO", 1)
    with pytest.raises(Exception, match="Input/output error"):
        log.flush()
    assert log.failed is not None and log.out_of_space is None
    log.close()
