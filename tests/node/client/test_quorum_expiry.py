"""x-expires and the `expires` policy key on quorum queues (issue 31): the queue is
deleted through the metadata once it had no consumer for that long, as a classic
queue is; a consumer keeps it."""

from __future__ import annotations

import time

import pytest
from proton.utils import BlockingConnection, LinkDetached

pytestmark = pytest.mark.timeout(60)


def declare(api, name: str, **arguments) -> None:
    body = {"durable": True, "arguments": {"x-queue-type": "quorum", **arguments}}
    assert api.put(f"/api/queues/%2F/{name}", body).status == 201


def exists(api, name: str) -> bool:
    return api.get(f"/api/queues/%2F/{name}").status == 200


def wait_until_deleted(api, name: str, timeout: float = 10.0) -> float:
    """Polls (a timer inside the node has no event to await); returns the seconds it took."""
    start = time.monotonic()
    while exists(api, name):
        assert time.monotonic() - start < timeout, f"queue {name} still exists"
        time.sleep(0.05)
    return time.monotonic() - start


def test_an_unused_quorum_queue_expires_and_a_consumer_keeps_one(api, node):
    conn = BlockingConnection(node.url, timeout=10)
    declare(api, "held", **{"x-expires": 400})
    receiver = conn.create_receiver("/queues/held", credit=1)
    declare(api, "unused", **{"x-expires": 400})
    assert wait_until_deleted(api, "unused") >= 0.35
    assert exists(api, "held")  # its own countdown ended long ago, with a consumer attached
    receiver.close()  # unused from now on
    assert wait_until_deleted(api, "held") >= 0.35
    with pytest.raises(LinkDetached, match="not-found"):
        conn.create_receiver("/queues/held")
    conn.close()


def test_the_expires_policy_key_expires_a_quorum_queue(api):
    declare(api, "by-policy")
    body = {"pattern": "^by-policy$", "apply-to": "queues", "definition": {"expires": 300}}
    assert api.put("/api/policies/%2F/short", body).status == 201
    wait_until_deleted(api, "by-policy")


def test_a_bad_x_expires_on_a_quorum_queue_is_refused(api):
    r = api.put("/api/queues/%2F/bad", {"durable": True, "arguments": {"x-queue-type": "quorum", "x-expires": 0}})
    assert r.status == 400 and "x-expires" in r.body["reason"], r.body
