"""Alternate exchanges set by policy (`alternate-exchange`, apply-to
exchanges or all), as RabbitMQ has them: a message an exchange routes
nowhere goes to its alternate exchange, chains are followed and cycles
stopped, the exchange's own `alternate-exchange` argument overrules the
policy, and the node counts a message routed (or unroutable) once, whatever
path it took. Published with RabbitMQ's own AMQP 1.0 client; topology and
policies over the HTTP API."""

from __future__ import annotations

import pytest
from mgmt_client import Api
from rabbitmq_amqp_python_client import AddressHelper, OutcomeState
from rabbitmq_amqp_python_client import Message as ClientMessage
from rabbitmq_amqp_python_client.qpid.proton._utils import SendException
from rmq_client import connection

pytestmark = pytest.mark.timeout(60)


def exchange(api: Api, name: str, type: str = "direct", **arguments) -> None:
    assert api.put(f"/api/exchanges/%2F/{name}", {"type": type, "arguments": arguments}).status in (201, 204)


def queue_bound(api: Api, queue: str, source: str, key: str = "") -> None:
    assert api.put(f"/api/queues/%2F/{queue}", {}).status in (201, 204)
    assert api.post(f"/api/bindings/%2F/e/{source}/q/{queue}", {"routing_key": key}).status == 201


def policy(api: Api, name: str, pattern: str, ae: str, apply_to: str = "exchanges") -> None:
    body = {"pattern": pattern, "apply-to": apply_to, "definition": {"alternate-exchange": ae}}
    assert api.put(f"/api/policies/%2F/{name}", body).status in (201, 204)


def outcome(node, exchange_name: str, key: str) -> str:
    """Publishes one message; "accepted" (routed) or "released" (unroutable)."""
    with connection(node.port) as conn:
        publisher = conn.publisher(AddressHelper.exchange_address(exchange_name, key))
        try:
            state = publisher.publish(ClientMessage(body=key.encode())).remote_state
        except SendException:  # the client raises on released
            return "released"
        finally:
            publisher.close()
    assert state == OutcomeState.ACCEPTED
    return "accepted"


def ready(api: Api, queue: str) -> int:
    return api.get(f"/api/queues/%2F/{queue}").body["messages_ready"]


def test_a_policys_alternate_exchange_takes_what_the_exchange_cannot_route(api, node):
    exchange(api, "ae", "fanout")
    queue_bound(api, "unrouted", "ae")
    policy(api, "AE", "^orders$", "ae")
    exchange(api, "orders")  # declared after the policy: it applies at once
    queue_bound(api, "routed", "orders", "k")
    metrics = node.broker.metrics
    routed, unroutable = metrics.routed, metrics.unroutable
    assert outcome(node, "orders", "k") == "accepted"
    assert outcome(node, "orders", "nobody") == "accepted"
    assert (ready(api, "routed"), ready(api, "unrouted")) == (1, 1)
    assert (metrics.routed - routed, metrics.unroutable - unroutable) == (2, 0)
    assert api.delete("/api/policies/%2F/AE").status == 204
    assert outcome(node, "orders", "nobody") == "released"
    assert metrics.unroutable - unroutable == 1


def test_a_policy_set_later_applies_to_existing_exchanges_and_the_argument_wins(api, node):
    exchange(api, "ae", "fanout")
    queue_bound(api, "from-policy", "ae")
    exchange(api, "own-ae", "fanout")
    queue_bound(api, "from-argument", "own-ae")
    exchange(api, "plain")
    exchange(api, "with-argument", **{"alternate-exchange": "own-ae"})
    exchange(api, "not-matched")
    assert outcome(node, "plain", "k") == "released"
    policy(api, "AE", "^(plain|with-argument)$", "ae", apply_to="all")
    assert outcome(node, "plain", "k") == "accepted"
    assert outcome(node, "with-argument", "k") == "accepted"
    assert outcome(node, "not-matched", "k") == "released"
    assert (ready(api, "from-policy"), ready(api, "from-argument")) == (1, 1)


def test_a_queue_policy_gives_no_exchange_an_alternate(api, node):
    exchange(api, "ae", "fanout")
    queue_bound(api, "unrouted", "ae")
    exchange(api, "orders")
    policy(api, "AE", "^orders$", "ae", apply_to="queues")
    assert outcome(node, "orders", "k") == "released"


def test_policy_alternates_chain_and_a_cycle_ends_unroutable(api, node):
    for name in ("a", "b", "c"):
        exchange(api, name)
    policy(api, "a-to-b", "^a$", "b")
    policy(api, "b-to-c", "^b$", "c")
    policy(api, "c-to-a", "^c$", "a")
    metrics = node.broker.metrics
    unroutable = metrics.unroutable
    assert outcome(node, "a", "k") == "released"  # a -> b -> c -> a (seen): stop
    assert metrics.unroutable - unroutable == 1
    queue_bound(api, "end", "c", "k")
    assert outcome(node, "a", "k") == "accepted"
    assert ready(api, "end") == 1


def test_a_policys_alternate_exchange_survives_a_restart(broker_factory, tmp_path):
    node = broker_factory(data_dir=tmp_path / "n")
    api = Api(node.broker.http_port)
    exchange(api, "ae", "fanout")
    queue_bound(api, "unrouted", "ae")
    exchange(api, "orders")
    policy(api, "AE", "^orders$", "ae")
    node.stop()
    node = broker_factory(data_dir=tmp_path / "n")
    api = Api(node.broker.http_port)
    assert outcome(node, "orders", "k") == "accepted"
    assert ready(api, "unrouted") == 1


def test_declaring_an_exchange_with_an_alternate_over_http_needs_read_on_it_and_write_on_the_alternate(api, node):
    """As RabbitMQ's exchange.declare, which its HTTP API goes through (its
    AMQP 1.0 /management node checks configure only, and so does Warren's)."""
    node.add_user("dev", "pw", ("management",))
    node.set_permissions("dev", "/", configure=".*", write="^orders$", read=".*")
    dev = api.as_user("dev", "pw")
    body = {"type": "direct", "arguments": {"alternate-exchange": "ae"}}
    r = dev.put("/api/exchanges/%2F/orders", body)
    assert r.status == 401 and "write access to exchange 'ae'" in r.body["reason"]
    assert api.get("/api/exchanges/%2F/orders").status == 404
    node.set_permissions("dev", "/", configure=".*", write=".*", read="^ae$")
    assert dev.put("/api/exchanges/%2F/orders", body).status == 401  # read on the exchange itself
    node.set_permissions("dev", "/")
    assert dev.put("/api/exchanges/%2F/orders", body).status == 201


def test_policy_alternates_wait_for_the_exchange_policies_flag(broker_factory, tmp_path, monkeypatch):
    """A node that does not support the flag (the test knob) keeps it off:
    the key is refused over HTTP, and a policy that still carries it (from
    definitions) routes nothing until the flag is enabled, so nodes of
    both versions route alike during a rolling upgrade."""
    monkeypatch.setenv("WARREN_TEST_UNSUPPORTED_FLAGS", "exchange_policies")
    node = broker_factory(data_dir=tmp_path / "n", enable_test_faults=True)
    api = Api(node.broker.http_port)
    exchange(api, "ae", "fanout")
    queue_bound(api, "unrouted", "ae")
    exchange(api, "orders")
    body = {"pattern": "^orders$", "apply-to": "exchanges", "definition": {"alternate-exchange": "ae"}}
    r = api.put("/api/policies/%2F/AE", body)
    assert r.status == 400 and "feature flag exchange_policies" in r.body["reason"]
    imported = {"policies": [{"vhost": "/", "name": "AE", **body, "priority": 0}]}
    assert api.post("/api/definitions", imported).status == 204
    assert outcome(node, "orders", "k") == "released"
    node.stop()
    monkeypatch.delenv("WARREN_TEST_UNSUPPORTED_FLAGS")
    node = broker_factory(data_dir=tmp_path / "n")  # upgraded: supports the flag, an old cluster keeps it off
    api = Api(node.broker.http_port)
    assert outcome(node, "orders", "k") == "released"
    assert api.put("/api/feature_flags/exchange_policies/enable", {}).status in (200, 204)
    assert outcome(node, "orders", "k") == "accepted"
    assert ready(api, "unrouted") == 1
