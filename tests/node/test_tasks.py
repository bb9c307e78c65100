"""node/tasks.py: a background task's failure is logged, and its owner's stop cancels it;
the answer gate (node/vhosts/answer_gate.py) is such an owner."""

from __future__ import annotations

import asyncio
import logging

from node.tasks import BackgroundTasks
from node.vhosts import answer_gate
from node.vhosts.answer_gate import AnswerGate

log = logging.getLogger("warren.test.tasks")


def test_a_failure_is_logged_with_its_traceback_and_a_cancellation_is_not(caplog):
    async def fails() -> None:
        await asyncio.sleep(0)
        raise RuntimeError("boom")

    async def main() -> BackgroundTasks:
        tasks = BackgroundTasks(asyncio.get_running_loop(), log)
        tasks.spawn(fails(), "failing on purpose")
        tasks.spawn(asyncio.sleep(3600), "sleeping")
        assert len(tasks) == 2
        for _ in range(3):
            await asyncio.sleep(0)
        assert len(tasks) == 1  # the failed one is gone, not kept
        tasks.cancel()
        await asyncio.sleep(0)
        return tasks

    with caplog.at_level(logging.ERROR, logger=log.name):
        tasks = asyncio.run(main())
    assert len(tasks) == 0
    [record] = caplog.records
    assert record.getMessage() == "failing on purpose failed"
    assert isinstance(record.exc_info[1], RuntimeError) and "boom" in caplog.text


def test_stop_cancels_what_runs_and_nothing_runs_after_it():
    async def main() -> None:
        tasks = BackgroundTasks(asyncio.get_running_loop(), log)
        started, cancelled = asyncio.Event(), asyncio.Event()

        async def waits() -> None:
            started.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        tasks.spawn(waits(), "waiting")
        await started.wait()
        tasks.cancel()
        await asyncio.wait_for(cancelled.wait(), 1)
        ran = []

        async def late() -> None:
            ran.append(True)

        tasks.spawn(late(), "too late")  # closed unstarted: no "never awaited" warning either
        await asyncio.sleep(0.01)
        assert ran == [] and len(tasks) == 0

    asyncio.run(main())


class Transport:
    """A stream from every peer; one back to them once `back` is set."""

    back: int | None = None

    def epoch_from(self, peer: str) -> int:
        return 1

    def epoch_to(self, peer: str) -> int | None:
        return self.back


def test_a_closed_answer_gate_releases_nothing():
    async def main() -> None:
        transport, handled = Transport(), {}
        gates = {}
        for name in ("open", "closed"):
            handled[name] = []
            gates[name] = AnswerGate(transport, asyncio.get_running_loop(),
                                     lambda peer, m, name=name: handled[name].append(m), lambda peer: None)  # fmt: skip
            assert not gates[name].admit("b", ["m1"])  # held until there is a stream back to b
        gates["closed"].close()
        transport.back = 1
        await asyncio.sleep(answer_gate.POLL * 5)
        assert handled == {"open": ["m1"], "closed": []}

    asyncio.run(main())
