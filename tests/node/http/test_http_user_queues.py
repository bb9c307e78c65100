"""GET /api/users/{user}/queues (RabbitMQ's rabbit_mgmt_wm_user_queues): the
queues a user declared, over the HTTP API or AMQP 1.0 /management, in the
vhosts the asker may see; a redeclaration by another user keeps the first;
queues declared while the queue_declaring_user flag is off name no user."""

from __future__ import annotations

import pytest
from mgmt_client import Api
from rmq_client import connection, request

pytestmark = pytest.mark.timeout(60)

FLAG = "queue_declaring_user"


def names(api: Api, user: str) -> list[str]:
    reply = api.get(f"/api/users/{user}/queues")
    assert reply.status == 200, reply.body
    return [f"{q['vhost']}:{q['name']}" for q in reply.body]


def test_the_queues_each_user_declared(api, node):
    assert api.put("/api/users/bob", {"password": "pw", "tags": "management"}).status == 201
    assert api.put("/api/vhosts/other").status == 201
    for vhost in ("%2F", "other"):
        assert api.put(f"/api/permissions/{vhost}/bob", {"configure": ".*", "write": ".*", "read": ".*"}).status == 201
    bob = api.as_user("bob", "pw")
    assert api.put("/api/queues/%2F/by-guest").status == 201
    assert bob.put("/api/queues/%2F/by-bob").status == 201
    assert bob.put("/api/queues/other/by-bob-too", {"arguments": {"x-queue-type": "quorum"}}).status == 201
    assert api.put("/api/queues/%2F/by-bob").status == 204  # a redeclaration: still bob's
    with connection(node.port, user="bob", password="pw") as conn:
        status, _ = request(conn.management(), "PUT", "/queues/over-amqp", {"durable": True})
        assert status == 201
    assert names(api, "bob") == ["/:by-bob", "/:over-amqp", "other:by-bob-too"]
    assert names(api, "guest") == ["/:by-guest"]
    assert names(api, "nobody") == []
    (entry,) = [q for q in api.get("/api/users/bob/queues").body if q["name"] == "by-bob"]
    assert entry["vhost"] == "/" and entry["durable"] is True and "messages" in entry  # /api/queues' shape
    # paginated as the other listings
    page = api.get("/api/users/bob/queues?page=1&page_size=2").body
    assert page["total_count"] == 3 and len(page["items"]) == 2
    # what a user may see: bob without permissions in "other" no longer sees its queue
    assert api.delete("/api/permissions/other/bob").status == 204
    assert names(bob, "bob") == ["/:by-bob", "/:over-amqp"]


def test_queues_declared_while_the_flag_is_off_name_no_user(broker_factory, monkeypatch):
    monkeypatch.setenv("WARREN_TEST_UNSUPPORTED_FLAGS", FLAG)
    node = broker_factory(http_port=0, metrics_port=0, enable_test_faults=True)
    assert FLAG not in node.broker.projections.feature_flags
    api = Api(node.broker.http_port)
    assert api.put("/api/queues/%2F/old").status == 201
    assert names(api, "guest") == []
    assert api.get("/api/queues/%2F/old").status == 200
