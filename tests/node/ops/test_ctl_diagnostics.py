"""`warren ctl`'s health checks (node/ops/ctl_diagnostics.py) against `warren
server` in a subprocess: exit 0 when the check passes, 69 with the node's
reason when it fails, as rabbitmq-diagnostics."""

from __future__ import annotations

import json


def ok(result) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_checks_that_pass(node_process):
    assert ok(node_process.ctl("ping")).startswith("Ping succeeded for node warren@")
    for command in ("check_running", "check_alarms", "check_local_alarms", "check_virtual_hosts",
                    "check_if_node_is_quorum_critical", "check_is_in_service", "check_port_connectivity",
                    "await_online_quorum_plus_one", "check_certificate_expiration"):  # fmt: skip
        ok(node_process.ctl(command))
    ok(node_process.ctl("check_port_listener", str(node_process.amqp_port)))
    ok(node_process.ctl("check_protocol_listener", "amqp1.0", "http"))
    rows = json.loads(ok(node_process.ctl("--json", "listeners")))
    assert {"protocol": "amqp", "port": node_process.amqp_port} in [
        {"protocol": r["protocol"], "port": r["port"]} for r in rows
    ]


def test_failed_checks_exit_69_with_the_reason(node_process):
    r = node_process.ctl("check_port_listener", "1")
    assert r.returncode == 69 and "No active listener (HTTP 503)" in r.stderr
    r = node_process.ctl("check_protocol_listener", "amqps")
    assert r.returncode == 69 and "No active listener" in r.stderr
    r = node_process.ctl("check_certificate_expiration", "--unit", "fortnights")
    assert r.returncode == 2  # argparse: not one of the units
