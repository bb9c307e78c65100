"""`warren ctl`'s commands on what runs (node/ops/ctl_runtime.py) against
`warren server` in a subprocess."""

from __future__ import annotations

import json
import time

from mgmt_client import Api
from proton import Message
from proton.utils import BlockingConnection


def ok(result) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def as_json(result):
    return json.loads(ok(result))


def test_parameters_global_parameters_and_cluster_name(node_process):
    ok(node_process.ctl("set_parameter", "vhost-limits", "limits", '{"max-queues": 50}'))
    assert as_json(node_process.ctl("--json", "list_parameters")) == [
        {"component": "vhost-limits", "name": "limits", "value": {"max-queues": 50}}]  # fmt: skip
    ok(node_process.ctl("clear_parameter", "vhost-limits", "limits"))
    assert as_json(node_process.ctl("--json", "list_parameters")) == []
    r = node_process.ctl("set_parameter", "shovel", "s", "{}")
    assert r.returncode == 65 and "src-protocol" in r.stderr
    shovel = {"src-protocol": "local", "src-uri": "amqp://", "src-queue": "ctl-from", "dest-protocol": "local",
              "dest-uri": "amqp://", "dest-queue": "ctl-absent", "reconnect-delay": 60}  # fmt: skip
    ok(node_process.ctl("set_parameter", "shovel", "s", json.dumps(shovel)))
    deadline = time.monotonic() + 20
    while (rows := as_json(node_process.ctl("--json", "shovel_status")))[0]["state"] != "terminated":
        assert time.monotonic() < deadline, rows
        time.sleep(0.1)
    [row] = rows
    assert row["name"] == "s" and row["vhost"] == "/" and row["source_protocol"] == "local"
    assert "ctl-from" in row["termination_reason"] or "ctl-absent" in row["termination_reason"]
    assert "Shovel status" in ok(node_process.ctl("shovel_status"))
    ok(node_process.ctl("clear_parameter", "shovel", "s"))
    assert as_json(node_process.ctl("--json", "shovel_status")) == []
    assert node_process.ctl("set_parameter", "vhost-limits", "limits", "{nope").returncode == 65
    ok(node_process.ctl("set_cluster_name", "east"))
    assert {"name": "cluster_name", "value": "east"} in as_json(node_process.ctl("--json", "list_global_parameters"))
    ok(node_process.ctl("set_global_parameter", "cluster_name", '"west"'))
    assert Api(node_process.http_port).get("/api/cluster-name").body == {"name": "west"}


def test_consumers_channels_peek_quorum_status_and_closing(node_process):
    api = Api(node_process.http_port)
    api.put("/api/queues/%2F/rt-qq", {"arguments": {"x-queue-type": "quorum"}})
    conn = BlockingConnection(node_process.url, timeout=10)
    try:
        sender = conn.create_sender("/queues/rt-qq")
        for body in ("first", "second"):
            sender.send(Message(body=body))
        assert json.loads(ok(node_process.ctl("--json", "peek", "rt-qq", "2")))["payload"] == "second"
        assert json.loads(ok(node_process.ctl("--json", "peek", "rt-qq", "1")))["payload"] == "first"
        assert node_process.ctl("peek", "rt-qq", "3").returncode == 65
        conn.create_receiver("/queues/rt-qq", credit=0)
        rows = as_json(node_process.ctl("--json", "list_consumers"))
        assert [r["queue_name"] for r in rows] == ["rt-qq"]
        assert as_json(node_process.ctl("--json", "list_channels")) == []
        [member] = as_json(node_process.ctl("--json", "quorum_status", "rt-qq"))
        assert member["Raft State"] == "leader" and member["Term"] >= 1
        assert "Closing 1 connection(s)" in ok(node_process.ctl("close_all_connections", "--global", "bye"))
        deadline = time.monotonic() + 10
        while api.get("/api/connections").body and time.monotonic() < deadline:
            time.sleep(0.1)
        assert api.get("/api/connections").body == []
    finally:
        conn.close()


def test_stream_status_and_memory_breakdown(node_process):
    Api(node_process.http_port).put("/api/queues/%2F/rt-s", {"arguments": {"x-queue-type": "stream"}})
    rows = as_json(node_process.ctl("--json", "stream_status", "rt-s"))
    assert [r["role"] for r in rows] == ["writer"]
    out = ok(node_process.ctl("memory_breakdown"))
    assert out.startswith("Reporting memory breakdown on node warren@") and "queue_procs" in out
