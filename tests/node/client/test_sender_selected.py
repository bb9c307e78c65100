"""The x-cc message annotation (sender-selected distribution, RabbitMQ 4.1+): its strings
are more routing keys on the address's exchange, so one publish reaches every queue any
key routes to, once each; the alternate exchange takes the message only when no key
routes it; a malformed x-cc rejects the message (invalid-field)."""

from __future__ import annotations

import pytest
from proton import Delivery, Message, symbol
from proton.utils import BlockingConnection, SendException

pytestmark = pytest.mark.timeout(60)


def queue(api, name: str) -> None:
    assert api.put(f"/api/queues/%2F/{name}", {"durable": True}).status == 201


def bind(api, exchange: str, name: str, key: str) -> None:
    assert api.post(f"/api/bindings/%2F/e/{exchange}/q/{name}", {"routing_key": key}).status == 201


def depths(api, *names: str) -> dict[str, int]:
    return {n: api.get(f"/api/queues/%2F/{n}").body["messages"] for n in names}


def publish(node, address: str, cc) -> None:
    conn = BlockingConnection(node.url, timeout=10)
    try:
        conn.create_sender(address).send(Message(body="m", annotations={symbol("x-cc"): cc}))
    finally:
        conn.close()


def test_x_cc_adds_routing_keys_on_the_addresss_exchange(api, node):
    for name in ("cq1", "cq2", "cq3", "t1", "t2"):
        queue(api, name)
    for name in ("cq1", "cq2", "cq3"):
        bind(api, "amq.direct", name, name)
    bind(api, "amq.topic", "t1", "a.*")
    bind(api, "amq.topic", "t2", "b.#")
    publish(node, "/exchanges/amq.direct/cq1", ["cq3"])
    assert depths(api, "cq1", "cq2", "cq3") == {"cq1": 1, "cq2": 0, "cq3": 1}
    # /queues/NAME is the default exchange: each key names a queue; twice or unknown changes nothing
    publish(node, "/queues/cq1", ["cq2", "cq2", "no-such-queue"])
    assert depths(api, "cq1", "cq2", "cq3") == {"cq1": 2, "cq2": 1, "cq3": 1}
    publish(node, "/exchanges/amq.topic/a.x", ["b.y.z", "a.y"])  # t1 by two keys: once
    assert depths(api, "t1", "t2") == {"t1": 1, "t2": 1}


def test_the_alternate_exchange_takes_the_message_only_when_no_key_routes_it(api, node):
    for name in ("routed", "alternate"):
        queue(api, name)
    assert api.put("/api/exchanges/%2F/ae", {"type": "fanout"}).status == 201
    assert api.put("/api/exchanges/%2F/x", {"type": "direct", "arguments": {"alternate-exchange": "ae"}}).status == 201
    bind(api, "ae", "alternate", "")
    bind(api, "x", "routed", "k")
    publish(node, "/exchanges/x/nothing", ["k"])  # the cc key routes it: not the alternate
    assert depths(api, "routed", "alternate") == {"routed": 1, "alternate": 0}
    publish(node, "/exchanges/x/nothing", ["neither"])
    assert depths(api, "routed", "alternate") == {"routed": 1, "alternate": 1}


@pytest.mark.parametrize("cc", ["cq1", [1, 2], {"k": "v"}])
def test_a_malformed_x_cc_rejects_the_message(api, node, cc):
    queue(api, "cq1")
    with pytest.raises(SendException) as e:
        publish(node, "/queues/cq1", cc)
    assert e.value.state == Delivery.REJECTED
    assert depths(api, "cq1") == {"cq1": 0}
