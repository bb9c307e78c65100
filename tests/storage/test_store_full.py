"""The message store on a full filesystem (a real tmpfs, real ENOSPC):
RocksDB's error is sticky, and the GroupCommitter waits it out without
losing or reordering a write."""

from __future__ import annotations

import asyncio
import os

import pytest
from tmpfs import fill, mount_tmpfs  # tests/support/

from storage.group_commit import GroupCommitter
from storage.message_store import MessageStore, Record, StoreFullError

BODY = b"x" * 16 * 1024


@pytest.fixture
def small_fs(tmp_path):
    with mount_tmpfs(tmp_path / "fs", 16 * 1024 * 1024) as path:
        yield path


def test_a_full_disk_fails_the_write_and_reopen_lets_it_through(small_fs):
    store = MessageStore(os.path.join(small_fs, "db"))
    store.put("q", 0, Record(BODY))
    store.commit()
    filler = fill(small_fs)
    store.put("q", 1, Record(BODY))
    batch = store.seal()
    with pytest.raises(StoreFullError):
        store.write(batch)
    assert store.needs_reopen
    os.remove(filler)
    with pytest.raises(StoreFullError):  # sticky until reopened, even with space back
        store.write(batch)
    store.reopen()
    store.write(batch)
    assert store.durable_seq() == batch.ticket
    assert [r.body for r in store.read("q", [0, 1])] == [BODY, BODY]
    store.close()


def test_committer_holds_callbacks_while_full_and_runs_them_in_order_once_space_returns(small_fs):
    asyncio.run(_committer_waits_out_a_full_disk(small_fs))


async def _committer_waits_out_a_full_disk(small_fs) -> None:
    store = MessageStore(os.path.join(small_fs, "db"))
    full = asyncio.Event()
    committer = GroupCommitter(store, retry_full=0.02, on_full=full.set)
    await committer.durable(store.put("q", 0, Record(BODY)))
    filler = fill(small_fs)

    written: list[int] = []
    t1 = store.put("q", 1, Record(BODY))
    committer.on_durable(t1, lambda: written.append(1))
    t2 = store.put("q", 2, Record(BODY))
    committer.on_durable(t2, lambda: written.append(2))
    await asyncio.wait_for(full.wait(), 10)
    assert committer.out_of_space
    with pytest.raises(StoreFullError):  # a future hears the failure: it has no later to wait for
        await committer.durable(t2)
    t3 = store.put("q", 3, Record(BODY))  # a write made while out of space waits too
    all_durable = asyncio.Event()
    committer.on_durable(t3, lambda: (written.append(3), all_durable.set()))
    for _ in range(5):  # several retries meet the full disk: no callback runs meanwhile
        await asyncio.sleep(0.02)
        assert written == [] and committer.out_of_space

    os.remove(filler)
    await asyncio.wait_for(all_durable.wait(), 10)
    assert not committer.out_of_space
    assert written == [1, 2, 3]  # each confirmed once, in order, after its write
    assert [r.body for r in store.read("q", [0, 1, 2, 3])] == [BODY] * 4  # nothing buffered was dropped
    await committer.durable(store.put("q", 4, Record(BODY)))
    await committer.close()
    store.close()
    store = MessageStore(os.path.join(small_fs, "db"))
    assert [seq for seq, _ in store.iter_queue("q")] == [0, 1, 2, 3, 4]
    store.close()
