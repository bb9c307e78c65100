"""RabbitMQ 4.2's health checks on a real node: 200 {"status": "ok"} or 503
{"status": "failed", "reason": ...}, 400 for a malformed argument, as
rabbit_mgmt_wm_health_check_* answer."""

from __future__ import annotations

import time

from mgmt_client import Api
from proton.utils import BlockingConnection

C = "/api/health/checks"


def test_checks_that_pass_on_a_running_node(api, node):
    for check in ("alarms", "local-alarms", "virtual-hosts", "is-in-service", "below-node-connection-limit",
                  "ready-to-serve-clients", "reached-target-cluster-size", "metadata-store/initialized",
                  "metadata-store/initialized/with-data", "quorum-queues-without-elected-leaders/all-vhosts/",
                  "quorum-queues-without-elected-leaders/vhost/%2F/",
                  "quorum-queues-without-elected-leaders/all-vhosts/pattern/q.*"):  # fmt: skip
        r = api.get(f"{C}/{check}")
        assert (r.status, r.body) == (200, {"status": "ok"}), check
    r = api.get(f"{C}/node-is-quorum-critical")
    assert (r.status, r.body) == (200, {"status": "ok", "reason": "single node cluster"})
    assert api.get("/api/aliveness-test/%2F").body == {"status": "ok"}
    assert api.get("/api/aliveness-test/nope").status == 404
    assert api.get(f"{C}/quorum-queues-without-elected-leaders/vhost/nope/").status == 404


def test_port_and_protocol_listeners(api, node):
    port = node.broker.amqp_port
    assert api.get(f"{C}/port-listener/{port}").body == {"status": "ok", "port": port}
    r = api.get(f"{C}/port-listener/1")
    assert r.status == 503 and r.body["reason"] == "No active listener" and r.body["missing"] == 1
    assert port in r.body["ports"] and node.broker.http_port in r.body["ports"]
    assert api.get(f"{C}/port-listener/x").status == 400
    r = api.get(f"{C}/protocol-listener/amqp1.0,http")
    assert r.status == 200 and {"amqp", "http"} <= set(r.body["protocols"])
    r = api.get(f"{C}/protocol-listener/amqps,amqp")
    assert r.status == 503 and r.body["missing"] == ["amqp/ssl"] and "amqp" in r.body["protocols"]


def test_connection_limit(broker_factory):
    node = broker_factory(http_port=0, max_connections=1)
    api = Api(node.broker.http_port)
    assert api.get(f"{C}/below-node-connection-limit").status == 200
    conn = BlockingConnection(f"amqp://127.0.0.1:{node.broker.amqp_port}", timeout=10)
    try:
        r = api.get(f"{C}/below-node-connection-limit")
        assert (r.status, r.body) == (503, {"status": "failed", "reason": "node connection limit is reached"})
        r = api.get(f"{C}/ready-to-serve-clients")
        assert r.status == 503 and r.body["connections"] == 1
    finally:
        conn.close()


def test_certificate_expiration(broker_factory, certs):
    node = broker_factory(http_port=0, **certs.server_settings("none"))
    api = Api(node.broker.http_port)
    assert api.get(f"{C}/certificate-expiration/1/days").body == {"status": "ok"}
    r = api.get(f"{C}/certificate-expiration/200/years")
    assert r.status == 503 and r.body["reason"] == "Certificates expiring"
    assert {x["protocol"] for x in r.body["expired"]} >= {"amqp/ssl"}
    entry = r.body["expired"][0]
    assert entry["certfile"] == certs.server_settings("none")["tls_cert"] and entry["certfile_expires_on"]
    assert entry["cacertfile_expires_on"]  # the CA file's certificate expires within 200 years too
    assert api.get(f"{C}/certificate-expiration/1/fortnights").status == 400
    assert api.get(f"{C}/certificate-expiration/x/days").status == 400


def test_quorum_queue_counts_once_its_leader_is_elected(api, node):
    api.put("/api/queues/%2F/qq", {"durable": True, "arguments": {"x-queue-type": "quorum"}})
    deadline = time.monotonic() + 15
    while (r := api.get(f"{C}/quorum-queues-without-elected-leaders/all-vhosts/")).status != 200:
        assert r.body["queues"] == [{"name": "qq", "virtual_host": "/", "type": "quorum"}]
        assert time.monotonic() < deadline, "no leader elected"
        time.sleep(0.1)
    r = api.get(f"{C}/quorum-queues-without-elected-leaders/vhost/%2F/pattern/^qq$")
    assert r.status == 200
    assert api.get(f"{C}/quorum-queues-without-elected-leaders/all-vhosts/pattern/(").status == 400


def test_is_in_service_follows_maintenance(api, node):
    r = api.post("/api/maintenance/drain", {"timeout": 5})
    assert r.status == 200
    try:
        r = api.get(f"{C}/is-in-service")
        assert r.status == 503 and r.body["status"] == "failed"
        assert api.get(f"{C}/ready-to-serve-clients").status == 503
    finally:
        api.post("/api/maintenance/revive", {})
    assert api.get(f"{C}/is-in-service").status == 200
