"""Publish and get over the HTTP API, and the consumers listing, against a
node with real AMQP clients (python-qpid-proton) on the other end."""

from __future__ import annotations

import base64

from proton import Message
from proton.utils import BlockingConnection


def send(node, address: str, *messages: Message) -> None:
    conn = BlockingConnection(node.url, timeout=10)
    sender = conn.create_sender(address)
    for m in messages:
        sender.send(m)
    conn.close()


def test_publish_reaches_an_amqp_consumer_with_its_properties(api, node):
    assert api.put("/api/queues/%2F/inbox", {}).status == 201
    body = {"routing_key": "inbox", "payload": "hello", "payload_encoding": "string",
            "properties": {"content_type": "text/plain", "message_id": "m-1", "correlation_id": "c-1",
                           "delivery_mode": 2, "priority": 7, "headers": {"region": "eu", "n": 3}}}  # fmt: skip
    reply = api.post("/api/exchanges/%2F/amq.default/publish", body)
    assert reply.status == 200 and reply.body == {"routed": True}
    conn = BlockingConnection(node.url, timeout=10)
    receiver = conn.create_receiver("/queues/inbox")
    msg = receiver.receive(timeout=10)
    receiver.accept()
    conn.close()
    assert msg.body == b"hello" and msg.content_type == "text/plain" and msg.id == "m-1"
    assert msg.correlation_id == "c-1" and msg.durable and msg.priority == 7
    assert msg.properties == {"region": "eu", "n": 3}
    binary = {"routing_key": "inbox", "payload": base64.b64encode(b"\x00\xff").decode(), "payload_encoding": "base64",
              "properties": {}}  # fmt: skip
    assert api.post("/api/exchanges/%2F/amq.default/publish", binary).body == {"routed": True}
    got = api.post("/api/queues/%2F/inbox/get", {"count": 1, "ackmode": "ack_requeue_false", "encoding": "auto"})
    assert got.body[0]["payload_encoding"] == "base64" and base64.b64decode(got.body[0]["payload"]) == b"\x00\xff"


def test_publish_unroutable_missing_internal_and_refused(api, node):
    body = {"routing_key": "nowhere", "payload": "x", "payload_encoding": "string", "properties": {}}
    assert api.post("/api/exchanges/%2F/amq.direct/publish", body).body == {"routed": False}
    assert api.post("/api/exchanges/%2F/nosuch/publish", body).status == 404
    assert api.put("/api/exchanges/%2F/inner", {"type": "fanout", "internal": True}).status == 201
    assert api.post("/api/exchanges/%2F/inner/publish", body).status == 401
    assert api.post("/api/exchanges/%2F/amq.direct/publish", {**body, "payload_encoding": "rot13"}).status == 400
    node.add_user("reader", "pw", ("management",))
    node.set_permissions("reader", "/", configure="", write="", read=".*")
    assert api.as_user("reader", "pw").post("/api/exchanges/%2F/amq.direct/publish", body).status == 401


def test_get_requeues_or_takes_as_the_ackmode_says(api, node):
    assert api.put("/api/queues/%2F/work", {}).status == 201
    send(node, "/queues/work", *(Message(body=f"job-{i}", content_type="text/plain", properties={"i": i})
                                 for i in range(3)))  # fmt: skip
    peek = api.post("/api/queues/%2F/work/get", {"count": 2, "ackmode": "ack_requeue_true", "encoding": "auto"})
    assert peek.status == 200
    assert [m["payload"] for m in peek.body] == ["job-0", "job-1"]
    first = peek.body[0]
    assert first["payload_encoding"] == "string" and first["payload_bytes"] == 5 and first["redelivered"] is False
    assert first["exchange"] == "" and first["routing_key"] == "work" and first["message_count"] == 2
    assert first["properties"]["content_type"] == "text/plain" and first["properties"]["headers"] == {"i": 0}
    assert api.get("/api/queues/%2F/work").body["messages_ready"] == 3
    again = api.post("/api/queues/%2F/work/get", {"count": 1, "ackmode": "ack_requeue_true", "encoding": "base64",
                                                  "truncate": 3})  # fmt: skip
    assert again.body[0]["redelivered"] is True and again.body[0]["payload_encoding"] == "base64"
    assert base64.b64decode(again.body[0]["payload"]) == b"job" and again.body[0]["payload_bytes"] == 5
    take = api.post("/api/queues/%2F/work/get", {"count": 10, "ackmode": "ack_requeue_false", "encoding": "auto"})
    assert [m["payload"] for m in take.body] == ["job-0", "job-1", "job-2"]
    assert [m["message_count"] for m in take.body] == [2, 1, 0]
    assert api.get("/api/queues/%2F/work").body["messages"] == 0
    assert api.post("/api/queues/%2F/work/get", {"count": 1, "ackmode": "ack_requeue_false"}).body == []
    assert api.post("/api/queues/%2F/work/get", {"count": 0, "ackmode": "ack_requeue_false"}).status == 400
    assert api.post("/api/queues/%2F/work/get", {"count": 1, "ackmode": "keep"}).status == 400
    assert api.post("/api/queues/%2F/nosuch/get", {"count": 1, "ackmode": "ack_requeue_false"}).status == 404


def test_get_reject_requeue_false_dead_letters(api, node):
    assert api.put("/api/queues/%2F/dlq", {}).status == 201
    assert api.put("/api/queues/%2F/src", {"arguments": {"x-dead-letter-exchange": "",
                                                         "x-dead-letter-routing-key": "dlq"}}).status == 201  # fmt: skip
    send(node, "/queues/src", Message(body="bad"))
    got = api.post("/api/queues/%2F/src/get", {"count": 1, "ackmode": "reject_requeue_false"})
    assert got.body[0]["payload"] == "bad"
    assert api.get("/api/queues/%2F/dlq").body["messages_ready"] == 1


def test_get_from_a_quorum_queue(api, node):
    api.put("/api/feature_flags/quorum_queue_v1/enable", {})
    assert api.put("/api/queues/%2F/qq", {"arguments": {"x-queue-type": "quorum"}}).status == 201
    body = {"routing_key": "qq", "payload": "replicated", "payload_encoding": "string", "properties": {}}
    assert api.post("/api/exchanges/%2F/amq.default/publish", body).body == {"routed": True}
    got = api.post("/api/queues/%2F/qq/get", {"count": 2, "ackmode": "ack_requeue_false", "encoding": "auto"})
    assert [m["payload"] for m in got.body] == ["replicated"]


def test_consumers_are_listed_with_their_channel(api, node):
    assert api.put("/api/queues/%2F/watched", {}).status == 201
    assert api.put("/api/vhosts/other", {}).status == 201
    conn = BlockingConnection(node.url, timeout=10)
    try:
        conn.create_receiver("/queues/watched", name="my-consumer", credit=7)
        consumers = api.get("/api/consumers").body
        assert len(consumers) == 1
        c = consumers[0]
        assert c["queue"] == {"name": "watched", "vhost": "/"} and c["consumer_tag"] == "my-consumer"
        assert c["ack_required"] is True and c["active"] is True and c["prefetch_count"] == 7
        assert c["channel_details"]["user"] == "guest" and c["channel_details"]["connection_name"]
        assert api.get("/api/consumers/%2F").body == consumers
        assert api.get("/api/consumers/other").body == []
    finally:
        conn.close()
    assert api.get("/api/consumers").body == []
