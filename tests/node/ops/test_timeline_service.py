"""node/ops/timeline_service.py: the window is checked, and a node computes at most
CONCURRENT timelines at once with MAX_WAITING more in line, refusing beyond."""

from __future__ import annotations

import asyncio
import threading

import pytest

from node.ops import timeline_service
from node.ops.timeline_service import BadWindow, TimelineBusy, local, window_minutes


@pytest.mark.parametrize("raw", ["0", "10081", "x", None, True, "1.5"])
def test_a_window_outside_1_to_10080_minutes_is_refused(raw):
    with pytest.raises(BadWindow, match="minutes"):
        window_minutes(raw)


def test_a_window_in_range():
    assert window_minutes("15") == 15 and window_minutes(10080) == 10080


def test_the_gate_runs_two_queues_eight_and_refuses_the_next(tmp_path, monkeypatch):
    release = threading.Event()
    running = []

    def slow_timeline(*args):
        running.append(args)
        release.wait(10)
        return {"records": 0}

    monkeypatch.setattr(timeline_service.audit_timeline, "timeline", slow_timeline)

    async def scenario():
        n = timeline_service.CONCURRENT + timeline_service.MAX_WAITING
        tasks = [asyncio.ensure_future(local(str(tmp_path), 5, 0.5)) for _ in range(n)]
        while len(running) < timeline_service.CONCURRENT:  # the first two are in their threads
            await asyncio.sleep(0.01)
        with pytest.raises(TimelineBusy):
            await local(str(tmp_path), 5, 0.5)
        assert len(running) == timeline_service.CONCURRENT
        release.set()
        done = await asyncio.gather(*tasks)
        assert [d["snapshot_interval"] for d in done] == [0.5] * n and len(running) == n

    asyncio.run(scenario())
