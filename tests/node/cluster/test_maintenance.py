"""Maintenance mode on one node (node/cluster/maintenance.py): drain refuses new client
connections, closes open ones with connection-forced and reports; revive serves again on
the same port. Several nodes: tests/node/cluster/test_upgrade_tools.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
from mgmt_client import Api
from proton import Message
from proton.utils import BlockingConnection, ConnectionClosed

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def ctl(node, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "node.cli", "ctl", "--host", "127.0.0.1", "--port", str(node.broker.http_port), *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=60)


def test_drain_closes_connections_with_connection_forced_and_refuses_new_ones(node, api: Api):
    port = node.port
    node.declare_queue("q")
    conn = BlockingConnection(node.url, timeout=10)
    conn.create_sender("/queues/q").send(Message(body="before"))
    r = api.post("/api/maintenance/drain", {"timeout": 5})
    assert r.status == 200, r.body
    report = r.body
    assert report["state"] == "drained" and report["connections_closed"] == 1 and report["done"] is True
    assert report["still_leading"] == [] and report["no_successor"] == ["metadata"]  # a single node: nobody to hand to
    with pytest.raises(ConnectionClosed, match="amqp:connection:forced") as e:
        conn.wait(lambda: False, timeout=10)  # runs the client until the node's CLOSE arrives
    assert "maintenance" in e.value.connection.remote_condition.description
    conn.close()
    assert refused(port)
    status = api.get("/api/maintenance").body
    assert status["state"] == "drained" and status["being_drained"] is True and status["last_drain"] == report
    assert node.queue("q").message_count == 1  # the queues stay: only clients are turned away

    r = api.post("/api/maintenance/revive")
    assert r.status == 200 and r.body["state"] == "serving"
    assert node.port == port and not refused(port)
    conn = BlockingConnection(node.url, timeout=10)
    conn.create_sender("/queues/q").send(Message(body="after"))
    conn.close()
    assert node.queue("q").message_count == 2
    assert api.get("/api/maintenance").body["state"] == "serving"


def test_ctl_drain_and_revive(node):
    out = ctl(node, "drain")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"Drained node {node.broker.node_id} in ") and "0 client connections closed" in out.stdout
    s = json.loads(ctl(node, "--json", "maintenance_status").stdout)
    assert s["state"] == "drained"
    assert refused(node.port)
    out = ctl(node, "revive")
    assert out.returncode == 0 and "serving clients again" in out.stdout, out.stderr
    assert not refused(node.port)


def test_drain_needs_an_administrator_and_a_sane_timeout(node, api: Api):
    node.add_user("watcher", "pw", ("monitoring",))
    assert api.as_user("watcher", "pw").post("/api/maintenance/drain").status == 401  # RabbitMQ's "not administrator"
    assert api.as_user("watcher", "pw").get("/api/maintenance").status == 200
    assert api.post("/api/maintenance/drain", {"timeout": -1}).status == 400
    assert api.post("/api/maintenance/drain", {"timeout": "soon"}).status == 400
    assert not refused(node.port)  # refused requests changed nothing
