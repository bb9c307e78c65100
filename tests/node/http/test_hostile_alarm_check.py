"""The resource alarm check cannot die: a run that raises (here a real
FileNotFoundError from a data directory that vanished) is logged, the check
keeps running every period, and the health check says unhealthy while it
fails; once it works again, alarms are raised and cleared as before."""

from __future__ import annotations

import time

from mgmt_client import Api


def _until(predicate, what: str, timeout: float = 10.0):
    """Polls `predicate` (an HTTP read) until it holds; the check runs every 50 ms."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_a_failing_alarm_check_keeps_running_and_the_health_check_reports_it(broker_factory, tmp_path):
    node = broker_factory(http_port=0, alarm_check_interval=0.05)
    api = Api(node.broker.http_port)
    alarms = node.broker.alarms
    assert api.get("/api/health/checks/alarms").body == {"status": "ok"}

    real_dir = alarms.data_dir
    node.call(setattr, alarms, "data_dir", str(tmp_path / "gone"))  # disk_usage raises FileNotFoundError
    failed = _until(lambda: (r := api.get("/api/health/checks/alarms")).status == 503 and r, "health never said 503")
    assert failed.body["status"] == "failed"
    assert "FileNotFoundError" in failed.body["reason"]
    runs = node.call(lambda: node.broker.alarm_check.runs)
    _until(lambda: node.call(lambda: node.broker.alarm_check.runs) >= runs + 3, "the check stopped running")

    # it works again: healthy, and a real disk alarm is still raised and cleared
    node.call(setattr, alarms, "data_dir", real_dir)
    _until(lambda: api.get("/api/health/checks/alarms").status == 200, "health never recovered")
    node.call(setattr, alarms, "disk_free_limit", 1 << 62)
    raised = _until(lambda: (r := api.get("/api/health/checks/alarms")).status == 503 and r, "no disk alarm")
    assert raised.body["alarms"] == [{"node": "warren@test", "resource": "disk"}]
    node.call(setattr, alarms, "disk_free_limit", 0)
    _until(lambda: api.get("/api/health/checks/alarms").status == 200, "the disk alarm never cleared")
