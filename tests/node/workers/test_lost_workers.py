"""A worker the node cannot keep running (node/workers/lost_workers.py), end to end: a
node of 3 workers whose worker 2 exits 3 times within 30 s keeps running; worker 2's
classic queues move to the other workers with every confirmed message (worker 0 killed
meanwhile: the one started again moves them), and the node serves them, and places new
queues, without it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
import worker_procs
from http_json import request_json
from proton import Timeout
from worker_procs import consume, placement, publish, scrape, six_queues_on_three_workers

from node.workers.process import WORKER_ENV

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def api(node, method: str, path: str, body=None):
    return request_json(f"http://127.0.0.1:{node.http_port}{path}", method, "Basic Z3Vlc3Q6Z3Vlc3Q=", body)


def worker_process(node, index: int, other_than: int | None = None) -> psutil.Process:
    """Worker `index` as soon as it runs (a new one, when `other_than` is its last pid)."""
    deadline = time.monotonic() + 20
    while True:
        for child in psutil.Process(node.proc.pid).children():
            try:
                if child.environ().get(WORKER_ENV) == str(index) and child.pid != other_than:
                    return child
            except psutil.NoSuchProcess:
                continue
        assert time.monotonic() < deadline, f"worker {index} did not start again"
        time.sleep(0.02)


def test_a_worker_that_keeps_exiting_is_lost_and_its_queues_served_by_the_others(broker_process_factory, tmp_path):
    data_dir = tmp_path / "data"
    node, before = six_queues_on_three_workers(broker_process_factory, data_dir, 50)
    names = sorted(before)

    pid = None
    for _ in range(3):  # three exits within 30 s: the supervisor gives worker 2 up
        victim = worker_process(node, 2, other_than=pid)
        pid = victim.pid
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
    first = worker_process(node, 0)
    first.send_signal(signal.SIGKILL)  # and worker 0 at once: the one started again moves them, once the others are back
    worker_process(node, 0, other_than=first.pid)

    deadline = time.monotonic() + 30
    while 2 in placement(str(data_dir)).values():
        assert time.monotonic() < deadline, "worker 2's queues were not moved"
        assert node.proc.poll() is None, "the node stopped"
        time.sleep(0.1)
    after = placement(str(data_dir))
    assert {n: w for n, w in after.items() if before[n] != 2} == {n: w for n, w in before.items() if w != 2}
    assert sorted(after.values()) == [0, 0, 0, 1, 1, 1]  # one to each: the fewest first
    assert {q["name"]: q["worker"] for q in api(node, "GET", "/api/queues")} == after
    with open(data_dir / "workers" / "lost") as f:
        assert json.load(f) == [2]
    assert 'warren_worker_connections{worker="1"}' in (metrics := scrape(node))
    assert metrics["warren_workers_lost"] == 1 and 'warren_worker_connections{worker="2"}' not in metrics
    shown = api(node, "GET", "/api/nodes")[0]["workers"]
    assert [(w["worker"], w["state"], w["classic_queues"]) for w in shown] == [(0, "running", 3), (1, "running", 3),
                                                                              (2, "lost", 0)]  # fmt: skip
    status = subprocess.run([sys.executable, "-m", "node.cli", "ctl", "--host", "127.0.0.1", "--port",
                             str(node.http_port), "status"], cwd=ROOT, capture_output=True, text=True, timeout=30)  # fmt: skip
    assert "Worker 2: lost, 0 classic queues" in status.stdout and "Worker 1: running, 3 classic queues, pid" in status.stdout

    api(node, "PUT", "/api/queues/%2F/new", {"durable": True})  # placed on a worker that runs
    assert placement(str(data_dir))["new"] in (0, 1)
    for worker in (0, 1):  # a connection on either worker reaches every queue
        conn = worker_procs.connect_on(node.proc.pid, node.port, worker, pinned=True, count=2)
        for name in names[worker::2]:
            publish(conn, name, [f"{name}-after"])
            assert consume(conn, name, 51) == [f"{name}-{j}" for j in range(50)] + [f"{name}-after"]
        conn.close()
    assert not [p for p in psutil.Process(node.proc.pid).children() if p.environ().get(WORKER_ENV) == "2"]
    assert node.terminate() == 0

    again = broker_process_factory(data_dir, extra_args=["--workers", "3"])  # a node restarted runs all 3
    worker_procs.workers(again.proc.pid, again.port, 3)
    with open(data_dir / "workers" / "lost") as f:
        assert json.load(f) == []
    assert {n: w for n, w in placement(str(data_dir)).items() if n != "new"} == after
    conn = worker_procs.connect_on(again.proc.pid, again.port, 2, pinned=True, count=3)
    for name in names:  # every message was taken once: none is back, from any store
        receiver = conn.create_receiver(f"/queues/{name}", credit=10)
        with pytest.raises(Timeout):
            receiver.receive(timeout=0.5)
        receiver.close()
    conn.close()
    assert again.terminate() == 0
