"""Topic permissions: managed over the HTTP API and enforced as RabbitMQ
does, on the routing keys of topic exchanges: write when publishing (over
AMQP 1.0 with RabbitMQ's own client, and over HTTP), read when binding
(over HTTP and the /management node)."""

from __future__ import annotations

import pytest
from rabbitmq_amqp_python_client import (
    AddressHelper,
    AmqpMessageRejectedException,
    ExchangeToQueueBindingSpecification,
    ValidationCodeException,
)
from rabbitmq_amqp_python_client import Message as ClientMessage
from rmq_client import connection

pytestmark = pytest.mark.timeout(60)


def setup_eu(api, node) -> None:
    """User "eu" may do anything in "/" but only publish and bind under its own name on amq.topic."""
    assert api.put("/api/feature_flags/topic_permissions/enable", {}).status in (200, 204)
    node.add_user("eu", "pw", ("management",))
    node.set_permissions("eu", "/")
    body = {"exchange": "amq.topic", "write": "^{username}\\.", "read": "^{username}\\."}
    assert api.put("/api/topic-permissions/%2F/eu", body).status == 201


def test_topic_permissions_put_get_list_delete(api, node):
    setup_eu(api, node)
    want = {"user": "eu", "vhost": "/", "exchange": "amq.topic", "write": "^{username}\\.", "read": "^{username}\\."}
    assert api.get("/api/topic-permissions").body == [want]
    assert api.get("/api/topic-permissions/%2F/eu").body == [want]
    assert api.get("/api/users/eu/topic-permissions").body == [want]
    assert api.get("/api/vhosts/%2F/topic-permissions").body == [want]
    assert api.put("/api/topic-permissions/%2F/eu", {**want, "write": "("}).status == 400
    assert api.put("/api/topic-permissions/%2F/eu", {"write": ".*"}).status == 400  # no exchange
    assert api.put("/api/topic-permissions/%2F/nobody", want).status == 404
    assert api.as_user("eu", "pw").get("/api/topic-permissions").status == 401
    assert api.get("/api/definitions").body["topic_permissions"] == [want]
    assert api.delete("/api/topic-permissions/%2F/eu").status == 204
    assert api.get("/api/topic-permissions/%2F/eu").status == 404
    assert api.delete("/api/topic-permissions/%2F/eu").status == 404


def test_amqp_publishes_to_a_topic_exchange_are_checked_on_the_routing_key(api, node):
    setup_eu(api, node)
    assert api.put("/api/queues/%2F/all", {}).status == 201
    assert api.post("/api/bindings/%2F/e/amq.topic/q/all", {"routing_key": "#"}).status == 201
    assert api.post("/api/bindings/%2F/e/amq.direct/q/all", {"routing_key": "us.orders"}).status == 201
    with connection(node.port, "eu", "pw") as conn:
        fixed = conn.publisher(AddressHelper.exchange_address("amq.topic", "eu.orders"))
        fixed.publish(ClientMessage(body=b"mine"))
        fixed.close()
        denied = conn.publisher(AddressHelper.exchange_address("amq.topic", "us.orders"))
        with pytest.raises(AmqpMessageRejectedException, match="write access to topic 'us.orders'"):
            denied.publish(ClientMessage(body=b"theirs"))
        denied.close()
        anonymous = conn.publisher()
        with pytest.raises(AmqpMessageRejectedException, match="topic 'us.x'"):
            anonymous.publish(AddressHelper.message_to_address_helper(
                ClientMessage(body=b"theirs"), AddressHelper.exchange_address("amq.topic", "us.x")))  # fmt: skip
        anonymous.close()
        # another exchange has no topic permissions: not restricted
        direct = conn.publisher(AddressHelper.exchange_address("amq.direct", "us.orders"))
        direct.publish(ClientMessage(body=b"unrestricted"))
        direct.close()
    assert api.get("/api/queues/%2F/all").body["messages_ready"] == 2
    http = {"routing_key": "us.x", "payload": "p", "payload_encoding": "string", "properties": {}}
    assert api.as_user("eu", "pw").post("/api/exchanges/%2F/amq.topic/publish", http).status == 401
    http["routing_key"] = "eu.x"
    assert api.as_user("eu", "pw").post("/api/exchanges/%2F/amq.topic/publish", http).body == {"routed": True}


def test_binding_to_a_topic_exchange_needs_topic_read_on_the_key(api, node):
    setup_eu(api, node)
    eu = api.as_user("eu", "pw")
    assert eu.put("/api/queues/%2F/eu-q", {}).status == 201
    assert eu.post("/api/bindings/%2F/e/amq.topic/q/eu-q", {"routing_key": "us.#"}).status == 401
    assert eu.post("/api/bindings/%2F/e/amq.topic/q/eu-q", {"routing_key": "eu.#"}).status == 201
    with connection(node.port, "eu", "pw") as conn:
        m = conn.management()
        with pytest.raises(ValidationCodeException, match="403"):
            m.bind(ExchangeToQueueBindingSpecification(source_exchange="amq.topic", destination_queue="eu-q",
                                                       binding_key="us.*"))  # fmt: skip
        m.bind(ExchangeToQueueBindingSpecification(source_exchange="amq.topic", destination_queue="eu-q",
                                                   binding_key="eu.*"))  # fmt: skip
        m.close()
    keys = sorted(b["routing_key"] for b in api.get("/api/queues/%2F/eu-q/bindings").body)
    assert keys == ["eu-q", "eu.#", "eu.*"]
