"""Resource alarms on a node of several workers (node/workers/alarms.py), with a real
2-worker node and Qpid Proton clients: an alarm of worker 0 blocks the publishers of
worker 1 (another node's reaches it the same way: worker 0 passes on every alarm in
effect), and an alarm of worker 1 is the node's: worker 0's publishers stop, and the
health checks, the API and Prometheus show it."""

from __future__ import annotations

import time

import pytest
import worker_procs
from http_json import HttpError, request_json
from proton import Message
from worker_procs import scrape


def api(node, method: str, path: str, body=None):
    return request_json(f"http://127.0.0.1:{node.http_port}{path}", method, "Basic Z3Vlc3Q6Z3Vlc3Q=", body)


@pytest.fixture
def node(broker_process_factory, tmp_path):
    return broker_process_factory(tmp_path / "data", extra_args=["--workers", "2", "--enable-test-faults"])


def state_on(node, worker: int) -> str:
    """The state the API shows of the (one) client connection on `worker`."""
    return next(c["state"] for c in api(node, "GET", "/api/connections") if c["worker"] == worker)


def wait_for(condition, what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def health(node) -> int:
    try:
        api(node, "GET", "/api/health/checks/alarms")
        return 200
    except HttpError as e:
        return e.status


def test_an_alarm_of_one_worker_blocks_the_publishers_of_every_worker(node):
    api(node, "PUT", "/api/queues/%2F/q", {"durable": True})
    on = {w: worker_procs.connect_on(node.proc.pid, node.port, w, pinned=True, timeout=2) for w in (0, 1)}
    for conn in on.values():
        conn.create_sender("/queues/q").send(Message(body="before"))

    api(node, "POST", "/api/cluster/test/alarm", {"resource": "memory", "on": True})  # worker 0's
    wait_for(lambda: state_on(node, 1) == "blocked", "worker 1 did not hear worker 0's alarm")
    with pytest.raises(Exception, match="timed out"):  # no credit: the send never goes out
        on[1].create_sender("/queues/q", name="during-0").send(Message(body="during"))
    api(node, "POST", "/api/cluster/test/alarm", {"resource": "memory", "on": False})
    wait_for(lambda: state_on(node, 1) == "running", "worker 1 still blocked after worker 0's alarm cleared")

    assert api(node, "POST", "/api/cluster/test/alarm", {"resource": "disk", "on": True, "worker": 1}) == {
        "alarms": ["disk"]}  # worker 1's own
    wait_for(lambda: state_on(node, 0) == "blocked", "worker 0 did not hear worker 1's alarm")
    assert health(node) == 503
    assert api(node, "GET", "/api/nodes")[0]["disk_free_alarm"] is True
    assert scrape(node)["rabbitmq_alarms_free_disk_space_watermark"] == 1
    with pytest.raises(Exception, match="timed out"):
        on[0].create_sender("/queues/q", name="during-1").send(Message(body="during"))
    api(node, "POST", "/api/cluster/test/alarm", {"resource": "disk", "on": False, "worker": 1})
    wait_for(lambda: health(node) == 200 and state_on(node, 0) == "running", "worker 1's alarm did not clear")
    assert api(node, "GET", "/api/nodes")[0]["disk_free_alarm"] is False
    for conn in on.values():
        conn.close()


def test_the_test_hook_names_a_worker_the_node_runs(node):
    with pytest.raises(HttpError) as e:
        api(node, "POST", "/api/cluster/test/alarm", {"resource": "memory", "on": True, "worker": 2})
    assert e.value.status == 400 and "0 to 1" in str(e.value.body)
