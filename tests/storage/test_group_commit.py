"""GroupCommitter over a real MessageStore: grouping, ordering, off-loop fsync.

Some tests gate the worker thread with a MessageStore subclass whose write()
waits on a threading.Event before the real synced write, so they can look at
the state while a commit is in flight without depending on timing.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from storage.group_commit import GroupCommitter
from storage.message_store import MessageStore, Record, StoreError


def rec(n: int) -> Record:
    return Record(body=b"body-%d" % n, enqueued_at=n)


class GatedStore(MessageStore):
    """A real store whose writes wait for `gate` and count concurrency."""

    def __init__(self, path) -> None:
        super().__init__(path)
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.fail_with: Exception | None = None
        self._active = 0
        self.max_active = 0
        self.batch_sizes: list[int] = []

    def write(self, batch) -> None:
        self._active += 1
        self.max_active = max(self.max_active, self._active)
        try:
            self.entered.set()
            assert self.gate.wait(10), "test never opened the gate"
            if self.fail_with is not None:
                raise self.fail_with
            self.batch_sizes.append(batch.writes)
            super().write(batch)
        finally:
            self._active -= 1


async def until(predicate, turns: int = 10_000) -> None:
    for _ in range(turns):
        if predicate():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("condition never became true")


@pytest.fixture
def store(tmp_path):
    s = MessageStore(tmp_path / "messages")
    yield s
    s.close()


@pytest.fixture
def gated(tmp_path):
    s = GatedStore(tmp_path / "messages")
    yield s
    s.gate.set()
    s.close()


def test_many_writes_in_one_turn_share_one_commit(store):
    async def main():
        gc = GroupCommitter(store, asyncio.get_running_loop())
        fired = []
        for seq in range(1000):
            t = store.put("q", seq, rec(seq))
            gc.on_durable(t, lambda seq=seq: fired.append(seq))
        store.delete("q", 0)
        await gc.flush()
        assert store.commits == 1 and gc.commits == 1
        assert fired == list(range(1000))
        assert store.durable_seq() == 1001
        await gc.close()

    asyncio.run(main())
    assert [s for s, _ in store.iter_queue("q")] == list(range(1, 1000))


def test_callbacks_fire_only_after_the_covering_commit(gated):
    async def main():
        gc = GroupCommitter(gated)
        fired = []

        def confirm(seq, ticket):
            # On the loop, after the fsync: the data is readable and durable.
            assert gated.durable_seq() >= ticket
            assert gated.get("q", seq) == rec(seq)
            fired.append(seq)

        for seq in range(100):
            gc.on_durable(gated.put("q", seq, rec(seq)), lambda s=seq, t=seq + 1: confirm(s, t))
        await asyncio.to_thread(gated.entered.wait, 5)
        # The worker is stuck in write(); the loop is not.
        await asyncio.sleep(0.01)
        assert gc.in_flight and fired == [] and gated.durable_seq() == 0
        gated.gate.set()
        await until(lambda: len(fired) == 100)
        assert fired == list(range(100))
        await gc.close()

    asyncio.run(main())


def test_writes_during_a_commit_form_the_next_group(gated):
    async def main():
        gc = GroupCommitter(gated)
        order = []
        for seq in range(10):
            gc.on_durable(gated.put("q", seq, rec(seq)), lambda s=seq: order.append(s))
        await asyncio.to_thread(gated.entered.wait, 5)
        # Five more loop turns of writes while the first commit is in flight.
        for turn in range(5):
            for i in range(20):
                seq = 10 + turn * 20 + i
                gc.on_durable(gated.put("q", seq, rec(seq)), lambda s=seq: order.append(s))
            await asyncio.sleep(0)
        assert gated.commits == 0 and gated.has_pending()
        gated.gate.set()
        await gc.flush()
        assert gated.batch_sizes == [10, 100]
        assert gated.max_active == 1
        assert order == list(range(110))
        await gc.close()

    asyncio.run(main())


def test_exactly_one_commit_in_flight_under_load(gated):
    gated.gate.set()

    async def main():
        gc = GroupCommitter(gated)
        seq = 0
        for _turn in range(200):
            for _ in range(1 + _turn % 7):
                gated.put("q", seq, rec(seq))
                seq += 1
            await asyncio.sleep(0)
        await gc.flush()
        assert gated.max_active == 1
        assert sum(gated.batch_sizes) == seq
        assert len(gated.batch_sizes) < 200  # grouped, not one commit per turn
        await gc.close()

    asyncio.run(main())


def test_waiters_run_in_ticket_order_whatever_the_registration_order(store):
    async def main():
        gc = GroupCommitter(store)
        tickets = [store.put("q", seq, rec(seq)) for seq in range(50)]
        order = []
        for t in reversed(tickets):
            gc.on_durable(t, lambda t=t: order.append(t))
        futs = [asyncio.ensure_future(gc.durable(t)) for t in tickets[::-1]]
        done_order = []
        for f, t in zip(futs, tickets[::-1], strict=True):
            f.add_done_callback(lambda _f, t=t: done_order.append(t))
        await asyncio.gather(*futs)
        assert order == tickets
        assert sorted(done_order) == tickets
        await gc.close()

    asyncio.run(main())


def test_already_durable_ticket_and_bad_tickets(store):
    async def main():
        gc = GroupCommitter(store)
        t = store.put("q", 1, rec(1))
        await gc.durable(t)
        calls = []
        gc.on_durable(t, lambda: calls.append("late"))
        assert calls == []  # never re-entrant: runs from the loop
        await asyncio.sleep(0)
        assert calls == ["late"]
        await gc.durable(0)
        with pytest.raises(ValueError):
            await gc.durable(store.pending_seq() + 1)
        with pytest.raises(ValueError):
            gc.on_durable(store.pending_seq() + 1, lambda: None)
        await gc.close()

    asyncio.run(main())


def test_callbacks_may_write_and_their_writes_are_committed(store):
    async def main():
        gc = GroupCommitter(store)
        done = asyncio.Event()

        def settle():
            # e.g. a consumer's ack arriving right after the confirm
            gc.on_durable(store.delete("q", 1), done.set)

        gc.on_durable(store.put("q", 1, rec(1)), settle)
        await asyncio.wait_for(done.wait(), 5)
        assert store.commits == 2
        assert store.get("q", 1) is None
        await gc.close()

    asyncio.run(main())


def test_one_failing_callback_does_not_stop_the_others(store):
    errors = []

    async def main():
        asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: errors.append(ctx["exception"]))
        gc = GroupCommitter(store)
        fired = []
        gc.on_durable(store.put("q", 1, rec(1)), lambda: 1 / 0)
        gc.on_durable(store.put("q", 2, rec(2)), lambda: fired.append(2))
        await gc.flush()
        assert fired == [2]
        await gc.close()

    asyncio.run(main())
    assert len(errors) == 1 and isinstance(errors[0], ZeroDivisionError)


def test_a_failed_commit_fails_waiters_and_stays_failed(gated):
    gated.fail_with = OSError(5, "Input/output error")
    gated.gate.set()
    reported = []

    async def main():
        gc = GroupCommitter(gated, on_error=reported.append)
        called = []
        t = gated.put("q", 1, rec(1))
        gc.on_durable(t, lambda: called.append(t))
        with pytest.raises(StoreError):
            await gc.durable(t)
        assert called == [] and len(reported) == 1
        assert isinstance(reported[0].__cause__, OSError)
        t2 = gated.put("q", 2, rec(2))
        with pytest.raises(StoreError):
            await gc.durable(t2)
        with pytest.raises(StoreError):
            gc.on_durable(t2, lambda: None)
        await gc.close()

    asyncio.run(main())
    assert len(reported) == 1
    # The failed batch was never written, so the store cannot commit past it.
    gated.fail_with = None
    with pytest.raises(StoreError, match="sealed but not written"):
        gated.close()
    assert gated.closed


def test_close_commits_pending_writes_and_detaches(store):
    async def main():
        gc = GroupCommitter(store)
        for seq in range(10):
            store.put("q", seq, rec(seq))
        await gc.close()
        await gc.close()
        assert store.durable_seq() == store.pending_seq() == 10
        assert store.on_pending is None

    asyncio.run(main())


def test_writes_made_before_the_committer_exists_are_committed(store):
    store.put("q", 1, rec(1))

    async def main():
        gc = GroupCommitter(store)
        await asyncio.wait_for(until(lambda: store.durable_seq() == 1), 5)
        await gc.close()

    asyncio.run(main())
