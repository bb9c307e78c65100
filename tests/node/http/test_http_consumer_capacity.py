"""A queue's consumer_capacity and consumer_utilisation in /api/queues
(RabbitMQ's: whether the queue could deliver to a consumer at once): 0 with
no consumer, 0 while every consumer is out of credit, 1.0 while one has
credit; for classic and quorum queues."""

from __future__ import annotations

import time

import pytest
from proton import Message, Timeout
from proton.utils import BlockingConnection

pytestmark = pytest.mark.timeout(60)


def capacity_becomes(api, queue: str, value: float) -> dict:
    deadline = time.monotonic() + 10
    while True:
        body = api.get(f"/api/queues/%2F/{queue}").body
        if body.get("consumer_capacity") == value:
            assert body["consumer_utilisation"] == value
            return body
        assert time.monotonic() < deadline, (queue, value, body)
        time.sleep(0.05)  # polling the API: no event to wait on from outside the node


def pump(conn: BlockingConnection) -> None:
    """Sends what the client has pending (the FLOW), which only its event loop does."""
    try:
        conn.wait(lambda: False, timeout=0.2)
    except Timeout:
        pass


@pytest.mark.parametrize("arguments", [{}, {"x-queue-type": "quorum"}], ids=["classic", "quorum"])
def test_capacity_follows_the_consumers_credit(api, node, arguments):
    assert api.put("/api/queues/%2F/cap", {"arguments": arguments}).status == 201
    body = capacity_becomes(api, "cap", 0)
    assert body["consumers"] == 0
    conn = BlockingConnection(node.url, timeout=10)
    try:
        receiver = conn.create_receiver("/queues/cap", credit=0)
        body = capacity_becomes(api, "cap", 0)  # a consumer, but no credit: nothing could be delivered
        assert body["consumers"] == 1
        receiver.link.flow(2)
        pump(conn)
        capacity_becomes(api, "cap", 1.0)
        sender = conn.create_sender("/queues/cap")
        for i in range(2):
            sender.send(Message(body=f"m{i}"))
        for _ in range(2):
            receiver.receive(timeout=10)
            receiver.accept()
        capacity_becomes(api, "cap", 0)  # its credit spent
        receiver.close()
    finally:
        conn.close()
    assert capacity_becomes(api, "cap", 0)["consumers"] == 0
