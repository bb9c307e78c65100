"""`warren ctl` end to end: the command in a subprocess against `warren
server` in another, with real AMQP clients on the node."""

from __future__ import annotations

import json
import time

import pytest
from mgmt_client import Api
from proton import Message
from proton.utils import BlockingConnection, ConnectionClosed

from node.ops import ctl_kit
from node.ops.ctl_kit import table


def ok(result) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def as_json(result):
    return json.loads(ok(result))


def test_status(node_process):
    out = ok(node_process.ctl("status"))
    assert out.startswith("Status of node warren@localhost ...")
    assert "Warren" in out and f"http on port {node_process.http_port}" in out and "Alarms: (none)" in out
    s = as_json(node_process.ctl("--json", "status"))
    assert s["node"] == "warren@localhost" and s["product_name"] == "Warren" and s["alarms"] == []
    assert {x["protocol"]: x["port"] for x in s["listeners"]}["amqp"] == node_process.amqp_port


def test_list_connections_shows_amqp_1_0_and_close_connection_closes_it(node_process):
    conn = BlockingConnection(node_process.url, timeout=10)
    try:
        out = ok(node_process.ctl("list_connections"))
        lines = out.splitlines()
        assert lines[0] == "Listing connections ..."
        assert lines[1].split() == ["name", "user", "vhost", "protocol"]
        assert len(lines) == 3 and lines[2].endswith("guest  /      AMQP 1-0")
        [c] = as_json(node_process.ctl("list_connections", "name", "protocol", "peer_host", "--json"))
        assert c["protocol"] == "AMQP 1-0" and c["peer_host"] == "127.0.0.1" and set(c) == {"name", "protocol",
                                                                                            "peer_host"}  # fmt: skip
        assert ok(node_process.ctl("close_connection", c["name"], "go away")).startswith("Closing connection")
        with pytest.raises(ConnectionClosed, match="amqp:connection:forced") as e:
            conn.wait(lambda: False, timeout=10)  # runs the client until the node's CLOSE arrives
        assert e.value.connection.remote_condition.description == "go away"
        conn.close()  # answers the CLOSE: the node drops the connection
        deadline = time.monotonic() + 10
        while as_json(node_process.ctl("--json", "list_connections")) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert as_json(node_process.ctl("--json", "list_connections")) == []
    finally:
        conn.close()


def test_queues_exchanges_and_bindings(node_process):
    api = Api(node_process.http_port)
    api.put("/api/queues/%2F/ctl-q")
    api.put("/api/exchanges/%2F/ctl-x", {"type": "fanout"})
    api.post("/api/bindings/%2F/e/ctl-x/q/ctl-q", {"routing_key": "rk"})
    conn = BlockingConnection(node_process.url, timeout=10)
    sender = conn.create_sender("/exchanges/ctl-x")
    for _ in range(2):
        sender.send(Message(body="x"))
    conn.close()
    lines = ok(node_process.ctl("list_queues")).splitlines()
    assert lines[0] == "Listing queues for vhost / ..."
    assert lines[1].split() == ["name", "messages", "consumers"]
    assert ["ctl-q", "2", "0"] in [line.split() for line in lines[2:]]
    rows = as_json(node_process.ctl("--json", "list_queues", "name", "messages_ready", "durable"))
    assert {"name": "ctl-q", "messages_ready": 2, "durable": True} in rows
    exchanges = as_json(node_process.ctl("list_exchanges", "--json"))
    assert {"name": "ctl-x", "type": "fanout"} in exchanges and {"name": "", "type": "direct"} in exchanges
    bindings = as_json(node_process.ctl("--json", "list_bindings"))
    assert {"source_name": "ctl-x", "source_kind": "exchange", "destination_name": "ctl-q",
            "destination_kind": "queue", "routing_key": "rk", "arguments": {}} in bindings  # fmt: skip
    assert ok(node_process.ctl("purge_queue", "ctl-q")).startswith("Purging queue")
    assert api.get("/api/queues/%2F/ctl-q").body["messages"] == 0
    ok(node_process.ctl("delete_queue", "ctl-q"))
    assert api.get("/api/queues/%2F/ctl-q").status == 404


def test_vhosts_users_tags_and_permissions(node_process):
    assert ok(node_process.ctl("add_vhost", "ctl-vh")) == 'Adding vhost "ctl-vh" ...\n'
    assert {"name": "ctl-vh"} in as_json(node_process.ctl("--json", "list_vhosts"))
    ok(node_process.ctl("add_user", "carol", "pw1"))
    r = node_process.ctl("add_user", "carol", "pw1")
    assert r.returncode == 65 and "already exists" in r.stderr
    ok(node_process.ctl("set_user_tags", "carol", "monitoring", "management"))
    assert {"name": "carol", "tags": ["monitoring", "management"]} in as_json(node_process.ctl("--json", "list_users"))
    ok(node_process.ctl("set_permissions", "-p", "ctl-vh", "carol", "^c-", ".*", ".*"))
    perms = as_json(node_process.ctl("--json", "list_permissions", "-p", "ctl-vh"))
    assert {"user": "carol", "configure": "^c-", "write": ".*", "read": ".*"} in perms
    r = node_process.ctl("set_permissions", "carol", "(", ".*", ".*")
    assert r.returncode == 65 and r.stderr.startswith("Error: invalid permission pattern")
    # carol (monitoring) can log in, read, and not write
    as_carol = ["--user", "carol", "--password", "pw1"]
    assert as_json(node_process.ctl(*as_carol, "--json", "status"))["node"] == "warren@localhost"
    r = node_process.ctl(*as_carol, "add_vhost", "nope")
    assert r.returncode == 77 and "Not administrator user" in r.stderr
    ok(node_process.ctl("change_password", "carol", "pw2"))
    assert node_process.ctl(*as_carol, "status").returncode == 77
    ok(node_process.ctl("clear_permissions", "-p", "ctl-vh", "carol"))
    ok(node_process.ctl("delete_user", "carol"))
    ok(node_process.ctl("delete_vhost", "ctl-vh"))
    assert {"name": "ctl-vh"} not in as_json(node_process.ctl("--json", "list_vhosts"))
    r = node_process.ctl("delete_vhost", "ctl-vh")
    assert r.returncode == 65 and r.stderr.startswith("Error:")


def test_errors_and_environment(node_process):
    r = node_process.ctl("--password", "wrong", "list_queues")
    assert r.returncode == 77 and r.stderr == "Error: Login failed (HTTP 401)\n"
    r = node_process.ctl("list_queues", "no_such_column")
    assert r.returncode == 64 and "unknown column" in r.stderr
    r = node_process.ctl("list_queues", env={"WARREN_CTL_PORT": "1"}, port=False)
    assert r.returncode == 69 and "unable to connect" in r.stderr
    env = {"WARREN_CTL_PORT": str(node_process.http_port), "WARREN_CTL_USER": "guest", "WARREN_CTL_PASSWORD": "guest"}
    assert as_json(node_process.ctl("--json", "list_vhosts", env=env, port=False))
    r = node_process.ctl("no_such_command")
    assert r.returncode == 2 and "invalid choice" in r.stderr


def test_table_aligns_columns():
    rows = [
        {"name": "a", "n": 1, "t": ["x", "y"]},
        {"name": "longer", "n": 22, "t": None},
        {"name": "m", "t": {"k": 1}},
    ]
    assert table(rows, ["name", "n", "t"]).splitlines() == [
        "name    n   t",
        "a       1   [x, y]",
        "longer  22",
        'm           {"k":1}',
    ]


def test_policies_and_operator_policies(node_process):
    api = Api(node_process.http_port)
    api.put("/api/feature_flags/operator_policies/enable", {})
    api.put("/api/queues/%2F/ctl-pol")
    out = ok(node_process.ctl("set_policy", "--priority", "2", "--apply-to", "queues", "lim", "^ctl-pol$",
                              '{"max-length": 7}'))  # fmt: skip
    assert out.startswith('Setting policy "lim" for pattern "^ctl-pol$"')
    rows = as_json(node_process.ctl("--json", "list_policies"))
    assert rows == [{"vhost": "/", "name": "lim", "pattern": "^ctl-pol$", "apply-to": "queues",
                     "definition": {"max-length": 7}, "priority": 2}]  # fmt: skip
    ok(node_process.ctl("set_operator_policy", "cap", ".*", '{"max-length": 3}'))
    assert [r["name"] for r in as_json(node_process.ctl("--json", "list_operator_policies"))] == ["cap"]
    rows = as_json(node_process.ctl("--json", "list_queues", "name", "policy", "operator_policy"))
    assert {"name": "ctl-pol", "policy": "lim", "operator_policy": "cap"} in rows
    bad = node_process.ctl("set_policy", "bad", ".*", '{"max-length": "many"}')
    assert bad.returncode == ctl_kit.EX_DATAERR and "max-length" in bad.stderr
    ok(node_process.ctl("clear_policy", "lim"))
    ok(node_process.ctl("clear_operator_policy", "cap"))
    assert as_json(node_process.ctl("--json", "list_policies")) == []
    assert node_process.ctl("clear_policy", "lim").returncode == ctl_kit.EX_DATAERR


def test_topic_permissions(node_process):
    api = Api(node_process.http_port)
    api.put("/api/feature_flags/topic_permissions/enable", {})
    ok(node_process.ctl("add_user", "topical", "pw"))
    ok(node_process.ctl("set_topic_permissions", "topical", "amq.topic", "^a", "^b"))
    ok(node_process.ctl("set_topic_permissions", "topical", "logs", ".*", ".*"))
    rows = as_json(node_process.ctl("--json", "list_topic_permissions"))
    assert {"user": "topical", "exchange": "amq.topic", "write": "^a", "read": "^b"} in rows
    ok(node_process.ctl("clear_topic_permissions", "topical", "logs"))
    assert [r["exchange"] for r in as_json(node_process.ctl("--json", "list_topic_permissions"))] == ["amq.topic"]
    ok(node_process.ctl("clear_topic_permissions", "topical"))
    assert as_json(node_process.ctl("--json", "list_topic_permissions")) == []


def test_known_columns_cover_the_api_fields(api, node):
    """The columns `warren ctl` accepts are the fields the API returns."""
    node.declare_queue("q")
    api.post("/api/bindings/%2F/e/amq.direct/q/q", {"routing_key": "k"})
    conn = BlockingConnection(node.url, timeout=10)
    try:
        for path, known in (("/api/connections", ctl_kit.CONNECTION_COLUMNS), ("/api/queues/%2F", ctl_kit.QUEUE_COLUMNS),
                            ("/api/exchanges/%2F", ctl_kit.EXCHANGE_COLUMNS), ("/api/bindings/%2F", ctl_kit.BINDING_COLUMNS),
                            ("/api/vhosts", ctl_kit.VHOST_COLUMNS), ("/api/users", ctl_kit.USER_COLUMNS),
                            ("/api/vhosts/%2F/permissions", ctl_kit.PERMISSION_COLUMNS)):  # fmt: skip
            rows = api.get(path).body
            assert rows, path
            fields = {k for row in rows for k in row} - {"user_who_performed_action"}
            assert fields <= set(known.split()), (path, fields - set(known.split()))
    finally:
        conn.close()


def test_export_and_import_definitions(node_process, tmp_path):
    api = Api(node_process.http_port)
    assert api.put("/api/vhosts/defs", {"description": "exported"}).status == 201
    assert api.put("/api/vhost-limits/defs/max-connections", {"value": 4}).status == 204
    path = tmp_path / "defs.json"
    assert "defs.json" in ok(node_process.ctl("export_definitions", str(path)))
    doc = json.loads(path.read_text())
    assert doc["rabbit_version"] and {"vhost": "defs", "component": "vhost-limits", "name": "limits",
                                      "value": {"max-connections": 4}} in doc["parameters"]  # fmt: skip
    assert json.loads(ok(node_process.ctl("export_definitions", "-"))) == doc
    assert api.delete("/api/vhosts/defs").status == 204
    assert "Imported" in ok(node_process.ctl("import_definitions", str(path)))
    assert api.get("/api/vhosts/defs").body["description"] == "exported"
    assert api.get("/api/vhost-limits/defs").body == [{"vhost": "defs", "value": {"max-connections": 4}}]
    path.write_text(json.dumps({"parameters": [{"vhost": "defs", "component": "shovel", "name": "s", "value": {}}]}))
    refused = node_process.ctl("import_definitions", str(path))
    assert refused.returncode == 65 and "shovel" in refused.stderr
    assert node_process.ctl("import_definitions", str(tmp_path / "none.json")).returncode == 66
    assert api.delete("/api/vhosts/defs").status == 204
