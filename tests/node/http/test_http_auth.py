"""Who may use the management API, as RabbitMQ's management plugin decides:
basic auth, management tags, vhost access and AMQP permissions. RabbitMQ 4
answers every refusal with 401 (error "not_authorised"), a failed login with
401 (error "not_authorized") and a challenge."""

from __future__ import annotations

import socket
from urllib.parse import quote

import pytest
from mgmt_client import Api
from proton.utils import BlockingConnection


@pytest.fixture
def users(api, node):
    """monitor (monitoring), mgmt (management, permissions in / only on
    mgmt-* names), plain (no tags), and vhost v2."""
    api.put("/api/users/monitor", {"password": "m", "tags": "monitoring"})
    api.put("/api/users/mgmt", {"password": "g", "tags": ["management"]})
    api.put("/api/users/plain", {"password": "p", "tags": ""})
    api.put("/api/permissions/%2F/mgmt", {"configure": "^mgmt-", "write": "^mgmt-", "read": "^mgmt-"})
    api.put("/api/vhosts/v2")
    return {"monitor": api.as_user("monitor", "m"), "mgmt": api.as_user("mgmt", "g"),
            "plain": api.as_user("plain", "p")}  # fmt: skip


def test_missing_or_wrong_credentials_are_401_with_a_challenge(api):
    for r in (api.get("/api/overview", auth=False), api.as_user("guest", "wrong").get("/api/overview"),
              api.as_user("nobody", "x").get("/api/overview")):  # fmt: skip
        assert r.status == 401
        assert r.body == {"error": "not_authorized", "reason": "Login failed"}
        assert r.headers["WWW-Authenticate"].startswith("Basic realm=")
    r = api.get("/api/overview", headers={"Authorization": "Basic !!notbase64"}, auth=False)
    assert r.status == 401


def test_users_without_a_management_tag_are_refused(users):
    r = users["plain"].get("/api/overview")
    assert r.status == 401 and r.body == {"error": "not_authorised", "reason": "Not management user"}


def test_monitoring_users_read_everything_and_change_nothing(users, node):
    mon = users["monitor"]
    conn = BlockingConnection(node.url, timeout=10)  # guest's connection
    try:
        assert mon.get("/api/overview").status == 200
        assert mon.get("/api/nodes").status == 200
        assert [c["user"] for c in mon.get("/api/connections").body] == ["guest"]
        assert [v["name"] for v in mon.get("/api/vhosts").body] == ["/", "v2"]
        assert mon.get("/api/vhosts/v2").status == 200
        name = mon.get("/api/connections").body[0]["name"]
        r = mon.delete(f"/api/connections/{quote(name, safe='')}")
        assert r.status == 401 and r.body["error"] == "not_authorised"
    finally:
        conn.close()
    for method, path in (("PUT", "/api/vhosts/v3"), ("DELETE", "/api/vhosts/v2"), ("GET", "/api/users"),
                         ("PUT", "/api/users/x"), ("GET", "/api/permissions"), ("GET", "/api/definitions"),
                         ("PUT", "/api/permissions/v2/monitor")):  # fmt: skip
        r = mon.request(method, path, {} if method == "PUT" else None)
        assert r.status == 401, (method, path)
        assert r.body == {"error": "not_authorised", "reason": "Not administrator user"}
    assert "v3" not in node.broker.vhosts


def test_management_users_see_only_their_vhosts_and_own_connections(users, node, api):
    mgmt = users["mgmt"]
    assert [v["name"] for v in mgmt.get("/api/vhosts").body] == ["/"]
    r = mgmt.get("/api/queues/v2")
    assert r.status == 401 and r.body["reason"] == "User not authorised to access virtual host"
    assert mgmt.get("/api/nodes").body["reason"] == "Not monitor user"
    conn = BlockingConnection(node.url, timeout=10)  # guest's
    try:
        assert mgmt.get("/api/connections").body == []
        assert api.get("/api/overview").body["object_totals"]["connections"] == 1
    finally:
        conn.close()


def test_resource_operations_need_the_amqp_permission(users, node, api):
    mgmt = users["mgmt"]
    assert mgmt.put("/api/queues/%2F/mgmt-q").status == 201
    r = mgmt.put("/api/queues/%2F/other-q")
    assert r.status == 401 and r.body["error"] == "not_authorised"
    assert "configure access to queue 'other-q'" in r.body["reason"]
    assert "other-q" not in node.vhost.queues
    node.declare_queue("guest-q")
    assert mgmt.delete("/api/queues/%2F/guest-q").status == 401
    assert mgmt.delete("/api/queues/%2F/guest-q/contents").status == 401
    assert [q["name"] for q in mgmt.get("/api/queues").body] == ["guest-q", "mgmt-q"]
    # binding needs write on the queue and read on the exchange (amq.direct: refused)
    assert mgmt.post("/api/bindings/%2F/e/amq.direct/q/mgmt-q").status == 401
    assert mgmt.put("/api/exchanges/%2F/mgmt-x", {"type": "direct"}).status == 201
    assert mgmt.post("/api/bindings/%2F/e/mgmt-x/q/mgmt-q", {"routing_key": "k"}).status == 201
    assert mgmt.delete("/api/queues/%2F/mgmt-q").status == 204
    # administrators are held to their permissions too: guest has none in a vhost it did not create
    api.put("/api/users/root", {"password": "r", "tags": "administrator"})
    root = api.as_user("root", "r")
    assert root.put("/api/vhosts/rootvh").status == 201
    assert root.put("/api/queues/rootvh/q").status == 201
    assert api.put("/api/queues/rootvh/q2").status == 401


def _non_loopback_address() -> str | None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing interface
        address = s.getsockname()[0]
    except OSError:
        return None
    finally:
        s.close()
    return None if address.startswith("127.") else address


def test_guest_is_loopback_only_over_http_too(broker_factory):
    address = _non_loopback_address()
    if address is None:
        pytest.skip("no non-loopback IPv4 address on this host")
    b = broker_factory(http_port=0, metrics_port=0, listen_host="0.0.0.0")
    guest = Api(b.broker.http_port)
    assert guest.get("/api/whoami").status == 200  # over loopback
    guest.put("/api/users/alice", {"password": "a", "tags": "administrator"})
    remote = Api(b.broker.http_port, host=address)
    r = remote.get("/api/whoami")
    assert r.status == 401 and r.body["error"] == "not_authorized"
    assert remote.as_user("alice", "a").get("/api/whoami").status == 200
