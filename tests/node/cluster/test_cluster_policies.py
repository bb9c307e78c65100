"""Policies and the HTTP message API across a cluster: a policy set through
one node applies to a classic queue another node leads, and a get through a
third node takes messages from it over the cross-node data path."""

from __future__ import annotations

import pytest
from proton import Message
from proton.utils import BlockingConnection

pytestmark = pytest.mark.slow


def test_a_policy_set_anywhere_applies_where_the_queue_lives(cluster):
    a, b, c = cluster.nodes
    b.http("PUT", "/api/queues/%2F/far", {"durable": True})  # led by b
    conn = BlockingConnection(f"amqp://guest:guest@127.0.0.1:{b.amqp_port}", timeout=10)
    sender = conn.create_sender("/queues/far")
    for i in range(6):
        sender.send(Message(body=f"m{i}"))
    conn.close()
    a.http("PUT", "/api/policies/%2F/cap", {"pattern": "^far$", "definition": {"max-length": 2}})
    cluster.wait_for(lambda: b.http("GET", "/api/queues/%2F/far").get("policy") == "cap", 10, "the policy on b")
    assert b.http("GET", "/api/queues/%2F/far")["messages_ready"] == 2
    got = c.http("POST", "/api/queues/%2F/far/get", {"count": 5, "ackmode": "ack_requeue_false", "encoding": "auto"})
    assert [m["payload"] for m in got] == ["m4", "m5"]
    assert b.http("GET", "/api/queues/%2F/far")["messages_ready"] == 0
