"""The node's uptime (GET /api/nodes `uptime`, rabbitmq_erlang_uptime_seconds) counts real
seconds, not wall-clock ones: a wall clock stepped back (NTP, an operator, the chaos suite's
clock-jump, cluster-tests/chaos_nemesis.py) made it negative, one stepped forward inflated it.
RabbitMQ's is the runtime's wall_clock statistic, which is monotonic."""

from __future__ import annotations

import time

import pytest
from mgmt_client import sample, scrape


@pytest.mark.parametrize("step_s", [-120.0, 600.0])
def test_uptime_ignores_a_wall_clock_step(api, node, monkeypatch, step_s):
    [before] = api.get("/api/nodes").body
    metric_before = sample(scrape(node), "rabbitmq_erlang_uptime_seconds")
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + step_s)  # the node runs in this process
    try:
        [after] = api.get("/api/nodes").body
        metric_after = sample(scrape(node), "rabbitmq_erlang_uptime_seconds")
    finally:
        monkeypatch.undo()
    # a few seconds at most passed between the two reads, on a busy machine
    assert before["uptime"] <= after["uptime"] < before["uptime"] + 30_000
    assert metric_before <= metric_after < metric_before + 30
