"""Per-vhost and per-user connection limits (RabbitMQ's `max-connections`
vhost and user limits): set over the HTTP API or `warren ctl`, stored as
cluster metadata, and enforced at OPEN with the condition and description
RabbitMQ's AMQP 1.0 reader uses."""

from __future__ import annotations

import json

import pytest
from mgmt_client import Api
from raw_client import RawClient

from amqp import definitions as d
from amqp import events as ev
from amqp.errors import Condition


@pytest.fixture
def clients():
    made: list[RawClient] = []
    yield made
    for c in made:
        c.close()


def login(clients: list, port: int, user: str = "guest", password: str = "guest", vhost: str | None = None):
    """Connects with SASL PLAIN; returns (client, the error of the broker's CLOSE or None)."""
    client = RawClient(port)
    clients.append(client)
    engine = client.engine
    engine.start(sasl=True)
    client.wait_event(ev.SaslMechanismsReceived)
    engine.sasl_init("PLAIN", b"\0" + user.encode() + b"\0" + password.encode())
    assert client.wait_event(ev.SaslOutcomeReceived).code == d.SASL_OK
    engine.open(hostname=f"vhost:{vhost}" if vhost else None)
    client.wait_event(ev.ConnectionOpened)
    if not any(type(e) is ev.ConnectionClosed for e in client.events):
        client.begin()  # a round trip: a CLOSE would have come before the BEGIN's answer
    closed = [e for e in client.events if type(e) is ev.ConnectionClosed]
    return client, (closed[0].error if closed else None)


def test_vhost_limits_over_the_http_api(broker_factory, clients):
    node = broker_factory(http_port=0)
    api = Api(node.broker.http_port)
    api.put("/api/vhosts/limited")
    api.put("/api/permissions/limited/guest", {"configure": ".*", "write": ".*", "read": ".*"})
    assert api.put("/api/vhost-limits/limited/max-connections", {"value": 2}).status == 204
    assert api.get("/api/vhost-limits").body == [{"vhost": "limited", "value": {"max-connections": 2}}]
    assert api.get("/api/vhost-limits/limited").body == [{"vhost": "limited", "value": {"max-connections": 2}}]
    assert api.put("/api/vhost-limits/limited/max-connections", {"value": "2"}).status == 400
    assert api.put("/api/vhost-limits/limited/max-bananas", {"value": 2}).status == 400
    assert api.put("/api/vhost-limits/nowhere/max-connections", {"value": 2}).status == 404

    assert login(clients, node.port, vhost="limited")[1] is None
    assert login(clients, node.port, vhost="limited")[1] is None
    _, error = login(clients, node.port, vhost="limited")
    assert error.condition == Condition.RESOURCE_LIMIT_EXCEEDED
    assert error.description == ("access to vhost 'limited' refused for user 'guest': "
                                 "vhost connection limit (2) is reached")  # fmt: skip
    assert login(clients, node.port)[1] is None  # another vhost is not limited

    # 0 allows none; a negative value, or no limit, allows any number
    api.put("/api/vhost-limits/%2F/max-connections", {"value": 0})
    assert login(clients, node.port)[1].condition == Condition.RESOURCE_LIMIT_EXCEEDED
    api.put("/api/vhost-limits/%2F/max-connections", {"value": -1})
    assert login(clients, node.port)[1] is None
    assert api.delete("/api/vhost-limits/limited/max-connections").status == 204
    assert login(clients, node.port, vhost="limited")[1] is None
    assert api.get("/api/vhost-limits").body == [{"vhost": "/", "value": {"max-connections": -1}}]


def test_user_limits_over_the_http_api(broker_factory, clients):
    node = broker_factory(http_port=0)
    api = Api(node.broker.http_port)
    api.put("/api/users/alice", {"password": "pw", "tags": ""})
    api.put("/api/permissions/%2F/alice", {"configure": ".*", "write": ".*", "read": ".*"})
    assert api.put("/api/user-limits/alice/max-connections", {"value": 1}).status == 204
    assert api.get("/api/user-limits").body == [{"user": "alice", "value": {"max-connections": 1}}]
    assert api.put("/api/user-limits/bob/max-connections", {"value": 1}).status == 404

    assert login(clients, node.port, "alice", "pw")[1] is None
    _, error = login(clients, node.port, "alice", "pw")
    assert error.condition == Condition.RESOURCE_LIMIT_EXCEEDED
    assert error.description == "connection refused for user 'alice': user connection limit (1) is reached"
    assert login(clients, node.port)[1] is None  # guest is not limited
    api.delete("/api/users/alice")
    assert api.get("/api/user-limits").body == []  # gone with the user


def _ok(r) -> str:
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_limits_with_warren_ctl(node_process):
    _ok(node_process.ctl("set_vhost_limits", "-p", "/", '{"max-connections": 64}'))
    listing = json.loads(_ok(node_process.ctl("--json", "list_vhost_limits")))
    assert {"vhost": "/", "limits": '{"max-connections": 64}'} in listing
    _ok(node_process.ctl("clear_vhost_limits", "-p", "/"))
    assert json.loads(_ok(node_process.ctl("--json", "list_vhost_limits"))) == []

    _ok(node_process.ctl("set_user_limits", "guest", '{"max-connections": 10}'))
    assert json.loads(_ok(node_process.ctl("--json", "list_user_limits"))) == [
        {"user": "guest", "limits": '{"max-connections": 10}'}]  # fmt: skip
    _ok(node_process.ctl("clear_user_limits", "guest", "all"))
    assert json.loads(_ok(node_process.ctl("--json", "list_user_limits"))) == []
    r = node_process.ctl("set_user_limits", "guest", "not json")
    assert r.returncode != 0 and "not JSON" in r.stderr
