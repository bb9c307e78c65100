"""The one group-commit store protocol: both stores speak it, and one committer drives either."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from raft.journal import DurableLog
from storage.batch_store import BatchStore, GroupCommitStore
from storage.group_commit import GroupCommitter
from storage.message_store import MessageStore, Record

# what a GroupCommitter may call: the protocol's attributes and methods
PROTOCOL = {name for name in (*GroupCommitStore.__annotations__, *vars(GroupCommitStore)) if not name.startswith("_")}


def message_store(path) -> tuple[MessageStore, Callable[[int], int]]:
    store = MessageStore(path)
    return store, lambda n: store.put("q", n, Record(body=b"m%d" % n))


def raft_log(path) -> tuple[DurableLog, Callable[[int], int]]:
    log = DurableLog(path)
    return log, lambda n: log.put_blob("g", b"%08d" % n, b"m%d" % n)


@pytest.mark.parametrize("kind", [MessageStore, DurableLog])
def test_both_stores_are_batch_stores_with_every_call_of_the_protocol(kind):
    assert issubclass(kind, BatchStore)
    assert {"on_pending", "seal", "write", "durable_seq", "reopen"} <= PROTOCOL
    assert [name for name in sorted(PROTOCOL) if not hasattr(kind, name)] == []


@pytest.mark.parametrize("open_store", [message_store, raft_log])
def test_one_committer_drives_either_store(tmp_path, open_store):
    async def main():
        store, write = open_store(tmp_path / "db")
        with store:
            committer = GroupCommitter(store)
            tickets = [write(n) for n in range(10)]
            assert store.durable_seq() == 0 and store.has_pending()
            done = []
            committer.on_durable(tickets[4], lambda: done.append(4))
            await committer.durable(tickets[-1])
            assert done == [4] and store.durable_seq() == tickets[-1] and committer.commits == 1
            await committer.close()
        assert store.closed and store.on_pending is None

    asyncio.run(main())
