"""GET /api/audit/timeline (node/http/audit_routes.py): a node writing snapshots every
0.2 s shows itself, its metadata group's leader and its version on the timeline;
bad windows are 400, a node writing none has an empty timeline, and only
monitoring users may read it."""

from __future__ import annotations

import time

import pytest
from mgmt_client import Api

from node import __version__


def _until(predicate, what: str, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"{what}: never"
        time.sleep(0.05)
    return value


def test_the_timeline_of_a_node_writing_snapshots(broker_factory):
    node = broker_factory(http_port=0, snapshot_interval=0.2)
    api = Api(node.broker.http_port)
    t = _until(lambda: (b := api.get("/api/audit/timeline?minutes=5").body)["records"] >= 3 and b, "three records")
    assert t["node"] == "warren@test" and t["member_id"] == node.broker.cluster.node_id and t["interval_ms"] == 200
    assert t["minutes"] == 5 and t["snapshot_interval"] == 0.2 and t["cut"] is False
    [me] = t["members"]
    assert me["node"] == "warren@test" and [s["state"] for s in me["spans"]] == ["self"]
    meta = t["leaders"][0]
    assert (
        meta["group"] == "metadata" and meta["spans"][-1]["leader"] == "warren@test" and meta["spans"][-1]["term"] >= 1
    )
    [v] = t["versions"]
    assert v["version"] == __version__ and v["end_ms"] > v["start_ms"]
    assert t["partitions"] == [] and t["restarts"] == [] and t["gaps"] == []


def test_a_node_without_snapshots_has_an_empty_timeline(broker_factory):
    node = broker_factory(http_port=0, snapshot_interval=0)
    t = Api(node.broker.http_port).get("/api/audit/timeline").body
    assert t["records"] == 0 and t["members"] == [] and t["snapshot_interval"] == 0 and t["minutes"] == 60


@pytest.mark.parametrize("minutes", ["0", "10081", "x", "-5"])
def test_a_bad_window_is_400(node, api, minutes):
    r = api.get(f"/api/audit/timeline?minutes={minutes}")
    assert r.status == 400 and "minutes" in r.body["reason"]


def test_needs_a_monitoring_user(node, api):
    node.add_user("mgmt", "pw", ("management",))
    assert api.as_user("mgmt", "pw").get("/api/audit/timeline").status == 401


def test_node_names_this_node_or_a_member(broker_factory):
    node = broker_factory(http_port=0, snapshot_interval=0.2)
    api = Api(node.broker.http_port)
    _until(lambda: api.get("/api/audit/timeline?node=warren@test").body["records"] >= 1, "a record")
    by_address = api.get(f"/api/audit/timeline?node={node.broker.cluster.node_id}").body
    assert by_address["node"] == "warren@test" and by_address["snapshot_interval"] == 0.2
    r = api.get("/api/audit/timeline?node=warren@elsewhere")
    assert r.status == 404 and "not a cluster member" in r.body["reason"]
