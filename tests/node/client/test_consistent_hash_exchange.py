"""The x-consistent-hash exchange on a node: declared over the HTTP API, fed
by a proton client, each message reaching exactly one bound queue, the same
one after the node restarts; hashing on a message property; the plugin's
refusals as 400s."""

from __future__ import annotations

import pytest
from mgmt_client import Api
from proton import Message
from proton.utils import BlockingConnection

pytestmark = pytest.mark.timeout(90)
QUEUES = ("h1", "h2", "h3")


def declare(api: Api, **arguments) -> None:
    assert api.put("/api/exchanges/%2F/chx", {"type": "x-consistent-hash", "arguments": arguments}).status == 201
    for q in QUEUES:
        assert api.put(f"/api/queues/%2F/{q}", {"durable": True}).status == 201
        assert api.post(f"/api/bindings/%2F/e/chx/q/{q}", {"routing_key": "1"}).status == 201


def publish(url: str, messages: list[tuple[str, Message]]) -> None:
    conn = BlockingConnection(url, timeout=10)
    try:
        senders = {}
        for key, msg in messages:
            address = f"/exchanges/chx/{key}" if key else "/exchanges/chx"
            sender = senders.get(address) or senders.setdefault(address, conn.create_sender(address))
            sender.send(msg)  # waits for the outcome: accepted once routed
    finally:
        conn.close()


def where(api: Api) -> dict[str, str]:
    """Message body -> the queue holding it."""
    out = {}
    for q in QUEUES:
        got = api.post(f"/api/queues/%2F/{q}/get", {"count": 1000, "ackmode": "ack_requeue_true", "encoding": "auto"})
        for m in got.body:
            out[m["payload"]] = q
    return out


def test_each_message_reaches_one_queue_and_the_same_one_after_a_restart(broker_factory, tmp_path):
    node = broker_factory(tmp_path / "data")
    api = Api(node.broker.http_port)
    declare(api)
    keys = [f"customer-{i}" for i in range(60)]
    publish(node.url, [(k, Message(body=f"{k}/1", durable=True)) for k in keys])
    first = where(api)
    assert len(first) == 60 and set(first.values()) == set(QUEUES)
    node.stop()
    node = broker_factory(tmp_path / "data")
    api = Api(node.broker.http_port)
    publish(node.url, [(k, Message(body=f"{k}/2", durable=True)) for k in keys])
    second = where(api)
    assert all(second[f"{k}/2"] == first[f"{k}/1"] for k in keys)


def test_hashing_on_the_message_id(api, node):
    declare(api, **{"hash-property": "message_id"})
    publish(node.url, [(f"k{i}", Message(id=f"order-{i % 5}", body=f"m{i}")) for i in range(40)])
    placed = where(api)
    by_id: dict[int, set[str]] = {}
    for i in range(40):
        by_id.setdefault(i % 5, set()).add(placed[f"m{i}"])
    assert all(len(queues) == 1 for queues in by_id.values())  # the id decides, not the key


def test_the_plugins_refusals(api):
    reply = api.put("/api/exchanges/%2F/bad", {"type": "x-consistent-hash",
                                               "arguments": {"hash-header": "a", "hash-property": "message_id"}})  # fmt: skip
    assert reply.status == 400 and "mutually exclusive" in str(reply.body)
    declare(api)
    reply = api.post("/api/bindings/%2F/e/chx/q/h1", {"routing_key": "heavy"})
    assert reply.status == 400 and "must be an integer" in str(reply.body)
    overview = api.get("/api/overview").body
    assert "x-consistent-hash" in [t["name"] for t in overview["exchange_types"]]
