"""GET and DELETE /api/auth/attempts/{node}[/source] (RabbitMQ's auth attempt
tracking): logins over AMQP and the HTTP API counted by protocol; by remote
address and user name only with track_auth_attempt_source on (off by
default, as RabbitMQ's); DELETE resets the counts, the Prometheus counters
with them; monitoring to read, administrator to reset; another node's name
is 404."""

from __future__ import annotations

import pytest
from mgmt_client import Api, sample, scrape
from proton import ProtonException
from proton.utils import BlockingConnection

pytestmark = pytest.mark.timeout(60)

ATTEMPTS = "/api/auth/attempts/warren@test"


def logins(node, api: Api) -> None:
    """One good and one refused AMQP login, one refused HTTP request."""
    BlockingConnection(node.url, timeout=10).close()
    with pytest.raises(ProtonException):
        BlockingConnection(node.url.replace("guest:guest", "guest:wrong"), timeout=10)
    assert api.as_user("nobody", "x").get("/api/overview").status == 401


def by_protocol(api: Api) -> dict[str, dict]:
    reply = api.get(ATTEMPTS)
    assert reply.status == 200
    return {entry.pop("protocol"): entry for entry in reply.body}


def test_attempts_by_protocol_and_their_reset(api, node):
    logins(node, api)
    counts = by_protocol(api)
    assert counts["amqp10"] == {"auth_attempts": 2, "auth_attempts_failed": 1, "auth_attempts_succeeded": 1}
    http = counts["http"]  # every request authenticates, the ones above included
    assert http["auth_attempts_failed"] == 1 and http["auth_attempts_succeeded"] >= 1
    assert http["auth_attempts"] == http["auth_attempts_failed"] + http["auth_attempts_succeeded"]
    assert api.get(ATTEMPTS + "/source").body == []  # not tracked by default
    assert api.delete(ATTEMPTS).status == 204
    after = by_protocol(api)  # only this request, counted as it authenticated
    assert "amqp10" not in after and after["http"]["auth_attempts_succeeded"] == 1
    text = scrape(node)
    assert sample(text, "rabbitmq_auth_attempts_total", protocol="amqp10") == 0
    assert "rabbitmq_auth_attempts_detailed_total{" not in text  # nothing by source untracked


def test_by_source_when_tracked(broker_factory):
    node = broker_factory(http_port=0, metrics_port=0, track_auth_attempt_source=True)
    api = Api(node.broker.http_port)
    logins(node, api)
    entries = api.get(ATTEMPTS + "/source").body
    amqp = {e["username"]: e for e in entries if e["protocol"] == "amqp10"}
    assert amqp["guest"] == {"remote_address": "127.0.0.1", "username": "guest", "protocol": "amqp10",
                             "auth_attempts": 2, "auth_attempts_failed": 1, "auth_attempts_succeeded": 1}  # fmt: skip
    http = {e["username"]: e for e in entries if e["protocol"] == "http"}
    assert http["nobody"]["auth_attempts_failed"] == 1 and http["nobody"]["remote_address"] == "127.0.0.1"
    per_object, aggregated = scrape(node), scrape(node, "/metrics")
    labels = {"remote_address": "127.0.0.1", "username": "guest", "protocol": "amqp10"}
    assert sample(per_object, "rabbitmq_auth_attempts_detailed_failed_total", **labels) == 1
    assert "rabbitmq_auth_attempts_detailed" not in aggregated  # RabbitMQ's aggregated page leaves them out
    assert api.delete(ATTEMPTS + "/source").status == 204
    assert [e for e in api.get(ATTEMPTS + "/source").body if e["protocol"] == "amqp10"] == []


def test_who_may_read_and_reset_and_which_node(api):
    assert api.put("/api/users/mon", {"password": "p", "tags": "monitoring"}).status == 201
    assert api.put("/api/users/mgmt", {"password": "p", "tags": "management"}).status == 201
    monitor, management = api.as_user("mon", "p"), api.as_user("mgmt", "p")
    assert monitor.get(ATTEMPTS).status == 200 and monitor.get(ATTEMPTS + "/source").status == 200
    assert management.get(ATTEMPTS).status == 401
    assert monitor.delete(ATTEMPTS).status == 401
    assert api.get("/api/auth/attempts/rabbit@elsewhere").status == 404
    assert api.delete("/api/auth/attempts/rabbit@elsewhere").status == 404
