"""HTTPS for the management API and Prometheus, with the node's TLS
settings: basic auth over TLS, listeners, client certificates under
tls_verify=require, and the reload endpoint `warren ctl reload_tls` calls."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
import tls_certs
from mgmt_client import Api

from node import cli


@pytest.fixture
def https_node(broker_factory, own_certs):
    return broker_factory(**own_certs.server_settings("peer"))


def test_management_api_over_https_with_basic_auth(https_node, own_certs):
    api = Api(https_node.broker.https_port, tls=own_certs.client_context(None), host="localhost")
    overview = api.get("/api/overview")
    assert overview.status == 200
    listeners = {entry["protocol"]: entry["port"] for entry in overview.body["listeners"]}
    assert listeners["https"] == https_node.broker.https_port
    assert listeners["amqp/ssl"] == https_node.broker.amqps_port
    assert listeners["https/prometheus"] == https_node.broker.metrics_tls_port
    assert api.as_user("guest", "wrong").get("/api/overview").status == 401
    assert api.get("/api/overview", auth=False).status == 401


def test_plain_http_and_https_serve_the_same_api(https_node, own_certs):
    https_node.add_vhost("seen-on-both")
    plain = Api(https_node.broker.http_port).get("/api/vhosts/seen-on-both")
    tls = Api(https_node.broker.https_port, tls=own_certs.client_context(None), host="localhost")
    assert plain.status == tls.get("/api/vhosts/seen-on-both").status == 200


def test_prometheus_over_https(https_node, own_certs):
    url = f"https://localhost:{https_node.broker.metrics_tls_port}/metrics"
    with urllib.request.urlopen(url, timeout=10, context=own_certs.client_context(None)) as resp:
        assert resp.status == 200
        assert b"rabbitmq_connections" in resp.read()


def test_https_requires_a_client_certificate_under_require(broker_factory, own_certs):
    node = broker_factory(**own_certs.server_settings("require"))
    port = node.broker.https_port
    assert Api(port, tls=own_certs.client_context("client"), host="localhost").get("/api/overview").status == 200
    for client in (None, "client-expired", "other-client"):
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            Api(port, tls=own_certs.client_context(client), host="localhost").get("/api/overview")


def test_reload_endpoint_serves_the_renewed_certificate(https_node, own_certs):
    api = Api(https_node.broker.https_port, tls=own_certs.client_context(None), host="localhost")
    own_certs.renew_server("renewed-over-http")
    reply = api.post("/api/tls/reload")
    assert (reply.status, reply.body["reloads"]) == (200, 1)
    assert tls_certs.server_certificate_cn(https_node.broker.https_port, own_certs.ca) == "renewed-over-http"
    assert tls_certs.server_certificate_cn(https_node.broker.amqps_port, own_certs.ca) == "renewed-over-http"
    assert api.get("/api/overview").status == 200  # urllib's new connection: a new handshake


def test_reload_is_for_administrators_and_reports_broken_files(https_node, own_certs):
    https_node.add_user("watcher", "pw", tags=("monitoring",))
    api = Api(https_node.broker.http_port)
    refused = api.as_user("watcher", "pw").post("/api/tls/reload")
    assert (refused.status, refused.body["reason"]) == (401, "Not administrator user")  # as RabbitMQ answers
    (own_certs.dir / "server.pem").write_text("garbage")
    reply = api.post("/api/tls/reload")
    assert reply.status == 400 and "cannot load" in reply.body["reason"]
    assert tls_certs.server_certificate_cn(https_node.broker.https_port, own_certs.ca) == "localhost"


def test_reload_without_tls_is_not_found(node):
    assert Api(node.broker.http_port).post("/api/tls/reload").status == 404


def test_ctl_reload_tls_over_https(https_node, own_certs, capsys):
    own_certs.renew_server("renewed-by-ctl")
    code = cli.main(["ctl", "--host", "localhost", "--port", str(https_node.broker.https_port), "--cacert",
                     own_certs.ca, "reload_tls"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert tls_certs.server_certificate_cn(https_node.broker.amqps_port, own_certs.ca) == "renewed-by-ctl"
