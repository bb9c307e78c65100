"""Topic authorisation where RabbitMQ has it beyond plain publishing:
- address-v1 sources (`/topic/:key`, `/exchange/:x/:key`) bind a queue to a
  topic exchange, which needs topic read on the binding key, and v1 targets
  publish with topic write on the routing key (node/client/v1_termini.py);
- an OAuth 2 token's topic scopes (`write:<vhost>/<exchange>/<routing key>`,
  `read:...`) decide topic access instead of a user's topic permissions,
  over AMQP, the /management node and HTTP, as RabbitMQ's OAuth 2 backend
  does: a token without a three-part scope has no access to a topic
  exchange's routing keys at all.
Real clients (python-qpid-proton, RabbitMQ's own) and real signed JWTs."""

from __future__ import annotations

import pytest
from jwt_tokens import Issuer
from mgmt_client import Api
from proton import Message
from proton.utils import BlockingConnection, LinkDetached, SendException
from rabbitmq_amqp_python_client import (
    AddressHelper,
    AmqpMessageRejectedException,
    ExchangeToQueueBindingSpecification,
    ValidationCodeException,
)
from rabbitmq_amqp_python_client import Message as ClientMessage
from rmq_client import connection

pytestmark = pytest.mark.timeout(60)


def proton(port: int, user: str, password: str) -> BlockingConnection:
    return BlockingConnection(f"amqp://127.0.0.1:{port}", user=user, password=password, allowed_mechs="PLAIN",
                              timeout=10)  # fmt: skip


def topic_bindings(api: Api) -> list[str]:
    return sorted(b["routing_key"] for b in api.get("/api/exchanges/%2F/amq.topic/bindings/source").body)


# ---------------------------------------------------------------- address v1, users


@pytest.fixture
def eu(api, node) -> str:
    """User "eu" may do anything in "/" but only publish and bind under "eu." on amq.topic."""
    assert api.put("/api/feature_flags/topic_permissions/enable", {}).status in (200, 204)
    node.add_user("eu", "pw")
    node.set_permissions("eu", "/")
    body = {"exchange": "amq.topic", "write": "^eu\\.", "read": "^eu\\."}
    assert api.put("/api/topic-permissions/%2F/eu", body).status == 201
    return "eu"


@pytest.mark.parametrize("address", ["/topic/us.#", "/exchange/amq.topic/us.#"])
def test_a_v1_source_on_a_topic_exchange_needs_topic_read_on_its_binding_key(api, node, eu, address):
    conn = proton(node.port, eu, "pw")
    try:
        with pytest.raises(LinkDetached, match="unauthorized-access.*read access to topic 'us.#'"):
            conn.create_receiver(address)
        assert topic_bindings(api) == []  # refused before binding
        conn.create_receiver(address.replace("us.", "eu."))
        assert topic_bindings(api) == ["eu.#"]
    finally:
        conn.close()


def test_a_v1_target_on_a_topic_exchange_needs_topic_write_on_its_routing_key(api, node, eu):
    assert api.put("/api/queues/%2F/all", {}).status == 201
    assert api.post("/api/bindings/%2F/e/amq.topic/q/all", {"routing_key": "#"}).status == 201
    conn = proton(node.port, eu, "pw")
    try:
        conn.create_sender("/topic/eu.orders").send(Message(body="mine"))
        with pytest.raises(SendException):  # rejected: unauthorized-access
            conn.create_sender("/topic/us.orders").send(Message(body="theirs"))
        with pytest.raises(SendException):
            conn.create_sender("/exchange/amq.topic/us.orders").send(Message(body="theirs"))
    finally:
        conn.close()
    assert api.get("/api/queues/%2F/all").body["messages_ready"] == 1


# ---------------------------------------------------------------- OAuth 2 topic scopes


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return Issuer()


@pytest.fixture
def oauth_node(broker_factory, issuer):
    node = broker_factory(**issuer.settings())
    admin = Api(node.broker.http_port)
    assert admin.put("/api/queues/%2F/all", {}).status == 201
    assert admin.post("/api/bindings/%2F/e/amq.topic/q/all", {"routing_key": "#"}).status == 201
    assert admin.post("/api/bindings/%2F/e/amq.direct/q/all", {"routing_key": "invoices.eu"}).status == 201
    return node


ORDERS_ONLY = ["rabbitmq.configure:*/*", "rabbitmq.read:*/*", "rabbitmq.write:*/all",
               "rabbitmq.write:*/amq.direct", "rabbitmq.write:*/amq.topic/orders.*"]  # fmt: skip


def test_a_tokens_write_scope_decides_the_routing_keys_it_publishes_to_a_topic_exchange(oauth_node, issuer):
    with connection(oauth_node.port, "ignored", issuer.token(ORDERS_ONLY)) as conn:
        allowed = conn.publisher(AddressHelper.exchange_address("amq.topic", "orders.eu"))
        allowed.publish(ClientMessage(body=b"order"))
        allowed.close()
        denied = conn.publisher(AddressHelper.exchange_address("amq.topic", "invoices.eu"))
        with pytest.raises(AmqpMessageRejectedException, match="write access to topic 'invoices.eu'"):
            denied.publish(ClientMessage(body=b"invoice"))
        denied.close()
        direct = conn.publisher(AddressHelper.exchange_address("amq.direct", "invoices.eu"))  # not a topic exchange
        direct.publish(ClientMessage(body=b"unrestricted"))
        direct.close()
    admin = Api(oauth_node.broker.http_port)
    assert admin.get("/api/queues/%2F/all").body["messages_ready"] == 2


def test_a_token_without_a_topic_scope_cannot_publish_to_a_topic_exchange(oauth_node, issuer):
    """`write:*/*` covers the exchange (the link attaches) but, as in
    RabbitMQ, names no routing key: every message is refused."""
    with connection(oauth_node.port, "ignored", issuer.token(["rabbitmq.write:*/*", "rabbitmq.read:*/*"])) as conn:
        publisher = conn.publisher(AddressHelper.exchange_address("amq.topic", "orders.eu"))
        with pytest.raises(AmqpMessageRejectedException, match="write access to topic 'orders.eu'"):
            publisher.publish(ClientMessage(body=b"order"))
        publisher.close()


def test_a_tokens_read_scope_decides_the_binding_keys_on_a_topic_exchange(oauth_node, issuer):
    token = issuer.token(["rabbitmq.configure:*/*", "rabbitmq.write:*/*", "rabbitmq.read:*/*",
                          "rabbitmq.read:*/amq.topic/orders.*"])  # fmt: skip
    admin = Api(oauth_node.broker.http_port)
    with connection(oauth_node.port, "ignored", token) as conn:
        m = conn.management()
        with pytest.raises(ValidationCodeException, match="403"):
            m.bind(ExchangeToQueueBindingSpecification(source_exchange="amq.topic", destination_queue="all",
                                                       binding_key="invoices.*"))  # fmt: skip
        m.bind(ExchangeToQueueBindingSpecification(source_exchange="amq.topic", destination_queue="all",
                                                   binding_key="orders.*"))  # fmt: skip
        m.close()
    assert topic_bindings(admin) == ["#", "orders.*"]
    conn = proton(oauth_node.port, "ignored", token)
    try:
        with pytest.raises(LinkDetached, match="read access to topic 'invoices'"):
            conn.create_receiver("/topic/invoices")
    finally:
        conn.close()


def test_a_bearer_tokens_topic_scopes_apply_over_http(oauth_node, issuer):
    token = issuer.token(["rabbitmq.tag:management", *ORDERS_ONLY, "rabbitmq.read:*/amq.topic/orders.*"])
    api = Api(oauth_node.broker.http_port)

    def as_token(method: str, path: str, body):
        return api.request(method, path, body, headers={"Authorization": "Bearer " + token}, auth=False)

    message = {"routing_key": "orders.eu", "payload": "p", "payload_encoding": "string", "properties": {}}
    assert as_token("POST", "/api/exchanges/%2F/amq.topic/publish", message).body == {"routed": True}
    r = as_token("POST", "/api/exchanges/%2F/amq.topic/publish", {**message, "routing_key": "invoices.eu"})
    assert r.status == 401 and "write access to topic 'invoices.eu'" in r.body["reason"]
    assert as_token("POST", "/api/bindings/%2F/e/amq.topic/q/all", {"routing_key": "invoices.#"}).status == 401
    assert as_token("POST", "/api/bindings/%2F/e/amq.topic/q/all", {"routing_key": "orders.#"}).status == 201
