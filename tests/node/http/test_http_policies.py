"""Policies and operator policies over the HTTP API, applied to live queues
and seen by a real AMQP client (python-qpid-proton)."""

from __future__ import annotations

from proton import Message
from proton.utils import BlockingConnection
from rmq_client import connection, request


def publish(node, queue: str, n: int) -> None:
    conn = BlockingConnection(node.url, timeout=10)
    sender = conn.create_sender(f"/queues/{queue}")
    for i in range(n):
        sender.send(Message(body=f"m{i}"))
    conn.close()


def receive(node, queue: str, n: int) -> list:
    conn = BlockingConnection(node.url, timeout=10)
    receiver = conn.create_receiver(f"/queues/{queue}", credit=100)
    bodies = []
    for _ in range(n):
        bodies.append(receiver.receive(timeout=10).body)
        receiver.accept()
    conn.close()
    return bodies


def enable_operator_policies(api) -> None:
    assert api.put("/api/feature_flags/operator_policies/enable", {}).status in (200, 204)


def test_policy_put_get_list_delete(api, node):
    body = {"pattern": "^orders\\.", "definition": {"max-length": 5}, "priority": 3, "apply-to": "queues"}
    assert api.put("/api/policies/%2F/cap", body).status == 201
    assert api.put("/api/policies/%2F/cap", body).status == 204
    want = {"vhost": "/", "name": "cap", "pattern": "^orders\\.", "apply-to": "queues",
            "definition": {"max-length": 5}, "priority": 3}  # fmt: skip
    assert api.get("/api/policies/%2F/cap").body == want
    assert api.get("/api/policies").body == [want]
    assert api.get("/api/policies/%2F").body == [want]
    assert api.get("/api/policies/nosuch").status == 404
    assert api.delete("/api/policies/%2F/cap").status == 204
    assert api.get("/api/policies/%2F/cap").status == 404
    assert api.delete("/api/policies/%2F/cap").status == 404


def test_invalid_policies_are_400_with_a_reason(api, node):
    cases = [
        {"pattern": ".*", "definition": {"max-length": -1}},
        {"pattern": ".*", "definition": {"no-such-key": 1}},
        {"pattern": ".*", "definition": {}},
        {"pattern": ".*", "definition": {"overflow": "explode"}},
        {"pattern": "[", "definition": {"max-length": 1}},
        {"pattern": ".*", "definition": {"max-length": 1}, "apply-to": "everything"},
        {"pattern": ".*", "definition": {"max-length": 1}, "priority": -2},
        {"pattern": ".*", "definition": {"dead-letter-routing-key": "k"}},
    ]
    for body in cases:
        reply = api.put("/api/policies/%2F/bad", body)
        assert reply.status == 400 and reply.body["error"] == "bad_request" and reply.body["reason"], body
    assert api.get("/api/policies").body == []


def test_only_policymakers_and_administrators_change_policies(api, node):
    node.add_user("mon", "pw", ("monitoring",))
    node.add_user("pm", "pw", ("policymaker",))
    node.set_permissions("mon", "/")
    node.set_permissions("pm", "/")
    body = {"pattern": ".*", "definition": {"message-ttl": 1000}}
    assert api.as_user("mon", "pw").put("/api/policies/%2F/p", body).status == 401
    assert api.as_user("pm", "pw").put("/api/policies/%2F/p", body).status == 201
    assert api.as_user("mon", "pw").get("/api/policies/%2F/p").status == 200
    assert api.as_user("pm", "pw").put("/api/operator-policies/%2F/p", body).status == 401


def test_a_policy_applies_to_an_existing_queue_and_is_lifted_when_cleared(api, node):
    assert api.put("/api/queues/%2F/orders.eu", {"durable": True}).status == 201
    publish(node, "orders.eu", 10)
    policy = {"pattern": "^orders\\.", "definition": {"max-length": 3}, "apply-to": "queues"}
    assert api.put("/api/policies/%2F/cap", policy).status == 201
    info = api.get("/api/queues/%2F/orders.eu").body
    assert info["policy"] == "cap" and info["effective_policy_definition"] == {"max-length": 3}
    assert info["messages_ready"] == 3  # drop-head made room at once
    assert api.delete("/api/policies/%2F/cap").status == 204
    publish(node, "orders.eu", 4)
    info = api.get("/api/queues/%2F/orders.eu").body
    assert info["policy"] is None and info["messages_ready"] == 7
    assert receive(node, "orders.eu", 7) == ["m7", "m8", "m9", "m0", "m1", "m2", "m3"]


def test_the_queues_own_arguments_win_over_a_policy(api, node):
    args = {"durable": True, "arguments": {"x-max-length": 2}}
    assert api.put("/api/queues/%2F/own", args).status == 201
    assert api.put("/api/policies/%2F/cap", {"pattern": "own", "definition": {"max-length": 5}}).status == 201
    publish(node, "own", 4)
    assert api.get("/api/queues/%2F/own").body["messages_ready"] == 2


def test_highest_priority_wins_and_apply_to_is_respected(api, node):
    assert api.put("/api/queues/%2F/q1", {}).status == 201
    assert api.put("/api/policies/%2F/low", {"pattern": "q", "definition": {"max-length": 1}}).status == 201
    assert api.put("/api/policies/%2F/high", {"pattern": "q", "definition": {"max-length": 2},
                                              "priority": 5}).status == 201  # fmt: skip
    assert api.put("/api/policies/%2F/xs", {"pattern": "q", "definition": {"max-length": 3}, "priority": 9,
                                            "apply-to": "exchanges"}).status == 201  # fmt: skip
    assert api.put("/api/policies/%2F/qq", {"pattern": "q", "definition": {"max-length": 4}, "priority": 9,
                                            "apply-to": "quorum_queues"}).status == 201  # fmt: skip
    assert api.get("/api/queues/%2F/q1").body["policy"] == "high"
    publish(node, "q1", 5)
    assert api.get("/api/queues/%2F/q1").body["messages_ready"] == 2


def test_a_policy_dead_letters_expired_messages(api, node):
    assert api.put("/api/queues/%2F/dead", {}).status == 201
    assert api.put("/api/queues/%2F/work", {}).status == 201
    policy = {"pattern": "^work$", "definition": {"message-ttl": 0, "dead-letter-exchange": "",
                                                   "dead-letter-routing-key": "dead"}}  # fmt: skip
    assert api.put("/api/policies/%2F/dl", policy).status == 201
    publish(node, "work", 3)
    assert receive(node, "dead", 3) == ["m0", "m1", "m2"]
    assert api.get("/api/queues/%2F/work").body["messages_ready"] == 0


def test_operator_policy_caps_the_queues_own_limit(api, node):
    enable_operator_policies(api)
    assert api.put("/api/queues/%2F/big", {"arguments": {"x-max-length": 100}}).status == 201
    assert api.put("/api/policies/%2F/p", {"pattern": "big", "definition": {"message-ttl": 60000}}).status == 201
    op = {"pattern": ".*", "definition": {"max-length": 2}, "apply-to": "queues"}
    assert api.put("/api/operator-policies/%2F/cap", op).status == 201
    bad = api.put("/api/operator-policies/%2F/bad", {"pattern": ".*", "definition": {"dead-letter-exchange": "x"}})
    assert bad.status == 400 and "dead-letter-exchange" in bad.body["reason"]
    info = api.get("/api/queues/%2F/big").body
    assert info["policy"] == "p" and info["operator_policy"] == "cap"
    assert info["effective_policy_definition"] == {"message-ttl": 60000, "max-length": 2}
    publish(node, "big", 5)
    assert api.get("/api/queues/%2F/big").body["messages_ready"] == 2
    assert [p["name"] for p in api.get("/api/operator-policies/%2F").body] == ["cap"]
    assert api.get("/api/policies/%2F/cap").status == 404  # a namespace of their own
    assert api.delete("/api/operator-policies/%2F/cap").status == 204
    assert api.get("/api/queues/%2F/big").body["operator_policy"] is None


def test_a_policy_applies_to_a_quorum_queue_through_its_log(api, node):
    for flag in ("quorum_queue_v1", "quorum_queue_policies"):
        assert api.put(f"/api/feature_flags/{flag}/enable", {}).status in (200, 204)
    assert api.put("/api/queues/%2F/qq", {"arguments": {"x-queue-type": "quorum"}}).status == 201
    publish(node, "qq", 5)
    assert api.put("/api/policies/%2F/qp", {"pattern": "^qq$", "definition": {"max-length": 2},
                                            "apply-to": "quorum_queues"}).status == 201  # fmt: skip
    info = api.get("/api/queues/%2F/qq").body
    assert info["policy"] == "qp" and info["effective_policy_definition"] == {"max-length": 2}
    # the get's commands enter the queue's log after the SetConfig the policy proposed
    got = api.post("/api/queues/%2F/qq/get", {"count": 10, "ackmode": "ack_requeue_true"}).body
    assert [m["payload"] for m in got] == ["m3", "m4"]
    assert api.delete("/api/policies/%2F/qp").status == 204
    publish(node, "qq", 3)
    got = api.post("/api/queues/%2F/qq/get", {"count": 10, "ackmode": "ack_requeue_true"}).body
    assert len(got) == 5 and api.get("/api/queues/%2F/qq").body["policy"] is None


def test_policies_are_exported_in_definitions(api, node):
    enable_operator_policies(api)
    assert api.put("/api/policies/%2F/p", {"pattern": "^a", "definition": {"expires": 60000}}).status == 201
    assert api.put("/api/operator-policies/%2F/o", {"pattern": "^b", "definition": {"max-length": 9},
                                                    "apply-to": "queues", "priority": 1}).status == 201  # fmt: skip
    doc = api.get("/api/definitions").body
    assert doc["policies"] == [{"vhost": "/", "name": "p", "pattern": "^a", "apply-to": "all",
                                "definition": {"expires": 60000}, "priority": 0}]  # fmt: skip
    # operator policies are runtime parameters in RabbitMQ's definitions
    assert doc["parameters"] == [{"vhost": "/", "component": "operator_policy", "name": "o", "value": {
        "pattern": "^b", "apply-to": "queues", "definition": {"max-length": 9}, "priority": 1}}]  # fmt: skip


def test_management_node_queue_info_shows_the_policy(api, node):
    assert api.put("/api/queues/%2F/seen", {"arguments": {"x-message-ttl": 1000}}).status == 201
    assert api.put("/api/policies/%2F/p", {"pattern": "^seen$", "definition": {"max-length": 4}}).status == 201
    with connection(node.port) as conn:
        m = conn.management()
        status, body = request(m, "GET", "/queues/seen")
        m.close()
    assert status == 200 and body["policy"] == "p" and body["operator_policy"] is None
    assert body["effective_policy_definition"] == {"max-length": 4}
