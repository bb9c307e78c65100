"""RabbitMQ's own rabbitmqadmin (3.10, from Debian's rabbitmq-server package,
installed by bench/setup.sh) against a Warren node: `list` of every object
kind, `show overview`, and declaring a parameter, answer without an error."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from proton.utils import BlockingConnection

REPO = Path(__file__).resolve().parents[3]
KINDS = ("connections", "channels", "consumers", "exchanges", "queues", "bindings", "users", "vhosts",
         "permissions", "nodes", "parameters", "policies", "operator_policies", "vhost_limits")  # fmt: skip

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def rabbitmqadmin() -> str:
    if shutil.which("rabbitmqadmin") is None:
        setup = subprocess.run(["sh", str(REPO / "bench" / "setup.sh")], capture_output=True, text=True, timeout=900)
        if setup.returncode != 0:
            pytest.skip(f"bench/setup.sh could not install rabbitmqadmin: {setup.stderr.strip()[-300:]}")
    path = shutil.which("rabbitmqadmin")
    if path is None:
        pytest.skip("no rabbitmqadmin after bench/setup.sh")
    return path


def test_rabbitmqadmin_lists_every_object_kind(rabbitmqadmin, api, node):
    def admin(*args: str) -> subprocess.CompletedProcess:
        cmd = [rabbitmqadmin, "-H", "127.0.0.1", "-P", str(node.broker.http_port), "-u", "guest", "-p", "guest",
               "-f", "raw_json", *args]  # fmt: skip
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60)

    api.put("/api/queues/%2F/admin-q")
    api.put("/api/policies/%2F/admin-p", {"pattern": "^admin", "definition": {"max-length": 10}})
    api.put("/api/operator-policies/%2F/admin-op", {"pattern": "^admin", "definition": {"max-length": 20}})
    r = admin("declare", "parameter", "component=vhost-limits", "name=limits", 'value={"max-queues": 100}')
    assert r.returncode == 0, r.stderr
    conn = BlockingConnection(f"amqp://guest:guest@127.0.0.1:{node.broker.amqp_port}", timeout=10)
    try:
        conn.create_receiver("/queues/admin-q", credit=1)
        out = {}
        for kind in KINDS:
            r = admin("list", kind)
            assert r.returncode == 0 and not r.stderr, f"list {kind}: {r.stdout} {r.stderr}"
            out[kind] = json.loads(r.stdout)
        r = admin("show", "overview")
        assert r.returncode == 0, r.stderr
    finally:
        conn.close()
    assert out["channels"] == [] and len(out["connections"]) == 1 and len(out["consumers"]) == 1
    assert "admin-q" in [q["name"] for q in out["queues"]]
    assert [p["component"] for p in out["parameters"]] == ["vhost-limits", "operator_policy"]
    assert out["vhost_limits"] == [{"vhost": "/", "value": {"max-queues": 100}}]
    assert [n["name"] for n in out["nodes"]] == ["warren@test"]
