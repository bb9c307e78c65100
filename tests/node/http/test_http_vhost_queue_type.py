"""A vhost's default queue type (RabbitMQ 4.2's default_queue_type): set by
PUT /api/vhosts, given to queues declared there without x-queue-type over
the HTTP API and over AMQP 1.0 /management; refused while its feature flag is
off, and refused naming a value that is no queue type."""

from __future__ import annotations

import pytest
from mgmt_client import Api
from rmq_client import connection, request

pytestmark = pytest.mark.timeout(60)

FLAG = "vhost_default_queue_type"


def flag_off_api(broker_factory, monkeypatch) -> Api:
    """A node that reports the flag unsupported, so it stays off (the test knob)."""
    monkeypatch.setenv("WARREN_TEST_UNSUPPORTED_FLAGS", FLAG)
    node = broker_factory(http_port=0, metrics_port=0, enable_test_faults=True)
    assert FLAG not in node.broker.projections.feature_flags
    return Api(node.broker.http_port)


def test_refused_naming_the_flag_while_it_is_off(broker_factory, monkeypatch):
    api = flag_off_api(broker_factory, monkeypatch)
    reply = api.put("/api/vhosts/v2", {"default_queue_type": "quorum"})
    assert reply.status == 400 and FLAG in reply.body["reason"]
    assert api.get("/api/vhosts/v2").status == 404
    assert api.put("/api/vhosts/v2", {"description": "no type"}).status == 201  # version 1 still works


def test_queues_declared_without_a_type_get_the_vhosts(api, node):
    reply = api.put("/api/vhosts/v2", {"default_queue_type": "lazy"})
    assert reply.status == 400 and "'lazy'" in reply.body["reason"]
    reply = api.put("/api/vhosts/v2", {"tracing": True})
    assert reply.status == 400 and "tracing" in reply.body["reason"]
    assert api.get("/api/vhosts/v2").status == 404
    assert api.put("/api/vhosts/v2", {"default_queue_type": "quorum", "description": "d"}).status == 201
    body = api.get("/api/vhosts/v2").body
    assert body["default_queue_type"] == "quorum" and body["metadata"]["default_queue_type"] == "quorum"
    assert api.put("/api/vhosts/v2", {"description": "kept"}).status == 204  # not mentioned: kept
    assert api.get("/api/vhosts/v2").body["default_queue_type"] == "quorum"
    assert api.get("/api/vhosts/%2F").body["default_queue_type"] == "classic"

    assert api.put("/api/queues/v2/over-http", {"durable": True}).status == 201
    assert api.get("/api/queues/v2/over-http").body["type"] == "quorum"
    assert api.put("/api/queues/v2/over-http", {"durable": True}).status == 204  # redeclared alike
    # quorum queues are durable: a transient one falls back to classic, as in RabbitMQ
    assert api.put("/api/queues/v2/transient", {"durable": False}).status == 201
    assert api.get("/api/queues/v2/transient").body["type"] == "classic"
    assert api.put("/api/queues/v2/explicit", {"arguments": {"x-queue-type": "classic"}}).status == 201
    assert api.get("/api/queues/v2/explicit").body["type"] == "classic"

    with connection(node.port, vhost="v2") as conn:
        m = conn.management()
        status, body = request(m, "PUT", "/queues/over-amqp", {"durable": True, "exclusive": False,
                                                                "auto_delete": False, "arguments": {}})  # fmt: skip
        assert status == 201 and body["type"] == "quorum"
        status, body = request(m, "PUT", "/queues/over-amqp", {"durable": True, "exclusive": False,
                                                                "auto_delete": False, "arguments": {}})  # fmt: skip
        assert status == 200 and body["type"] == "quorum"
        status, body = request(m, "PUT", "/queues/mine", {"durable": True, "exclusive": True,
                                                           "auto_delete": False, "arguments": {}})  # fmt: skip
        assert status == 201 and body["type"] == "classic"
        m.close()
    assert api.get("/api/queues/v2/over-amqp").body["type"] == "quorum"
