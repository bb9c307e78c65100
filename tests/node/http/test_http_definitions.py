"""Definitions imported while the node runs (POST /api/definitions), from a
document shaped as RabbitMQ exports it: its users log in with their RabbitMQ
password hashes, kept as they are."""

from __future__ import annotations

import base64
import hashlib
import os

from proton import Message
from proton.utils import BlockingConnection


def rabbit_hash(password: str, fn=hashlib.sha256) -> str:
    salt = os.urandom(4)
    return base64.b64encode(salt + fn(salt + password.encode()).digest()).decode()


def rabbitmq_export() -> dict:
    return {
        "rabbit_version": "4.0.5",
        "rabbitmq_version": "4.0.5",
        "product_name": "RabbitMQ",
        "users": [
            {"name": "alice", "password_hash": rabbit_hash("alice-pw"),
             "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": ["administrator"], "limits": {}},
            {"name": "bob", "password_hash": rabbit_hash("bob-pw", hashlib.sha512),
             "hashing_algorithm": "rabbit_password_hashing_sha512", "tags": "management", "limits": {}},
        ],
        "vhosts": [{"name": "shop", "description": "", "tags": [], "metadata": {"description": "", "tags": []}}],
        "permissions": [{"user": "alice", "vhost": "shop", "configure": ".*", "write": ".*", "read": ".*"},
                        {"user": "bob", "vhost": "shop", "configure": "", "write": ".*", "read": ".*"}],
        "topic_permissions": [],
        "parameters": [],
        "global_parameters": [{"name": "cluster_name", "value": "rabbit@old"}],
        "policies": [{"vhost": "shop", "name": "cap", "pattern": "^orders$", "apply-to": "queues",
                      "definition": {"max-length": 2}, "priority": 0}],
        "queues": [{"name": "orders", "vhost": "shop", "durable": True, "auto_delete": False,
                    "arguments": {"x-queue-type": "classic"}}],
        "exchanges": [{"name": "shop.x", "vhost": "shop", "type": "direct", "durable": True, "auto_delete": False,
                       "internal": False, "arguments": {}}],
        "bindings": [{"source": "shop.x", "vhost": "shop", "destination": "orders", "destination_type": "queue",
                      "routing_key": "new", "arguments": {}}],
    }  # fmt: skip


def test_a_rabbitmq_export_is_imported_online_and_its_users_log_in(api, node):
    doc = rabbitmq_export()
    assert api.post("/api/definitions", doc).status == 204
    alice = api.get("/api/users/alice").body
    assert alice["hashing_algorithm"] == "rabbit_password_hashing_sha256" and alice["tags"] == ["administrator"]
    assert api.get("/api/queues/shop/orders").body["policy"] == "cap"
    assert api.as_user("alice", "wrong").get("/api/whoami").status == 401
    assert api.as_user("alice", "alice-pw").get("/api/whoami").body["name"] == "alice"
    # kept as RabbitMQ wrote it after a login, so an export still logs in on RabbitMQ
    exported = {u["name"]: u for u in api.get("/api/definitions").body["users"]}
    assert exported["alice"]["hashing_algorithm"] == "rabbit_password_hashing_sha256"
    assert exported["alice"]["password_hash"] == doc["users"][0]["password_hash"]
    # bob (SHA-512) logs in over AMQP and publishes through the imported binding
    conn = BlockingConnection(f"amqp://bob:bob-pw@127.0.0.1:{node.port}", timeout=10, virtual_host="vhost:shop")
    sender = conn.create_sender("/exchanges/shop.x/new")
    for i in range(3):
        sender.send(Message(body=f"m{i}"))
    conn.close()
    assert api.get("/api/users/bob").body["hashing_algorithm"] == "rabbit_password_hashing_sha512"
    assert api.get("/api/queues/shop/orders").body["messages_ready"] == 2  # the imported policy's max-length


def test_a_malformed_document_is_400_and_changes_nothing(api, node):
    doc = rabbitmq_export()
    doc["policies"][0]["definition"] = {"max-length": "lots"}
    reply = api.post("/api/definitions", doc)
    assert reply.status == 400 and "cap" in reply.body["reason"]
    assert api.get("/api/users/alice").status == 404 and api.get("/api/vhosts/shop").status == 404
    doc = rabbitmq_export()
    doc["users"][0]["hashing_algorithm"] = "rabbit_password_hashing_md5"
    assert api.post("/api/definitions", doc).status == 400
    assert api.post("/api/definitions", b"[1, 2]").status == 400
    assert api.post("/api/definitions", {"queues": [{"vhost": "/"}]}).status == 400


def test_vhost_definitions_export_and_import(api, node):
    assert api.put("/api/vhosts/src", {}).status == 201
    assert api.put("/api/vhosts/dst", {}).status == 201
    assert api.put("/api/queues/src/q1", {"durable": True}).status == 201
    assert api.put("/api/exchanges/src/x1", {"type": "fanout"}).status == 201
    assert api.post("/api/bindings/src/e/x1/q/q1", {"routing_key": "k"}).status == 201
    assert api.put("/api/policies/src/p", {"pattern": "^q", "definition": {"message-ttl": 5000}}).status == 201
    doc = api.get("/api/definitions/src").body
    assert "users" not in doc and "vhosts" not in doc
    assert [q["name"] for q in doc["queues"]] == ["q1"] and "vhost" not in doc["queues"][0]
    assert api.post("/api/definitions/dst", doc).status == 204
    assert api.get("/api/queues/dst/q1").body["policy"] == "p"
    assert api.get("/api/bindings/dst/e/x1/q/q1").body[0]["routing_key"] == "k"
    assert api.post("/api/definitions/nosuch", doc).status == 404


def test_our_own_export_imports_back(api, node):
    assert api.put("/api/queues/%2F/keep", {"durable": True}).status == 201
    assert api.put("/api/users/carol", {"password": "pw", "tags": "management"}).status == 201
    doc = api.get("/api/definitions").body
    assert api.delete("/api/users/carol").status == 204
    assert api.delete("/api/queues/%2F/keep").status == 204
    assert api.post("/api/definitions", doc).status == 204
    assert api.get("/api/queues/%2F/keep").status == 200
    assert api.as_user("carol", "pw").get("/api/whoami").status == 200


def test_streams_over_the_http_api_and_definitions(api, node):
    body = {"durable": True, "arguments": {"x-queue-type": "stream", "x-max-age": "7D",
                                           "x-stream-max-segment-size-bytes": 1_000_000}}  # fmt: skip
    assert api.put("/api/queues/%2F/events", body).status == 201
    assert api.put("/api/queues/%2F/events", body).status == 204
    assert api.put("/api/queues/%2F/bad", {"arguments": {"x-queue-type": "stream", "x-max-age": "1w"}}).status == 400
    assert api.put("/api/queues/%2F/bad", {"durable": False, "arguments": {"x-queue-type": "stream"}}).status == 400
    qj = api.get("/api/queues/%2F/events").body
    assert qj["type"] == "stream" and qj["arguments"]["x-max-age"] == "7D"
    assert api.delete("/api/queues/%2F/events/contents").status == 400  # streams are not purged
    doc = api.get("/api/definitions").body
    assert api.delete("/api/queues/%2F/events").status == 204
    assert api.post("/api/definitions", doc).status == 204
    assert api.get("/api/queues/%2F/events").body["type"] == "stream"


def test_a_streams_policy_sets_a_streams_retention(api, node):
    body = {"durable": True, "arguments": {"x-queue-type": "stream"}}
    assert api.put("/api/queues/%2F/events", body).status == 201
    assert api.put("/api/queues/%2F/orders", {"durable": True}).status == 201
    assert api.put("/api/policies/%2F/p", {"pattern": ".*", "apply-to": "streams",
                                         "definition": {"max-age": "1h", "max-length-bytes": 10**6}}).status == 201  # fmt: skip
    assert api.put("/api/policies/%2F/bad", {"pattern": ".*", "definition": {"max-age": "soon"}}).status == 400
    assert api.get("/api/queues/%2F/events").body["policy"] == "p"
    assert api.get("/api/queues/%2F/orders").body["policy"] is None
    config = node.queue("events").config
    assert (config.max_age_s, config.max_bytes) == (3600, 10**6)


def test_a_streams_policy_sets_the_bloom_filter_size_of_its_new_chunks(api, node):
    assert api.put("/api/queues/%2F/events", {"durable": True, "arguments": {"x-queue-type": "stream"}}).status == 201
    assert api.put("/api/policies/%2F/p", {"pattern": ".*", "apply-to": "streams",
                                         "definition": {"stream-filter-size-bytes": 64}}).status == 201  # fmt: skip
    bad = api.put("/api/policies/%2F/bad", {"pattern": ".*", "definition": {"stream-filter-size-bytes": 8}})
    assert bad.status == 400 and "stream-filter-size-bytes" in bad.body["reason"]
    assert node.queue("events").config.filter_bytes == 64
