"""The cross-node queue path through a rolling upgrade (three `warren server`
processes): while one member lacks feature flag queue_proxy_records, every
node sends the old form (one AMQP list per message) and a client on one node
publishes to and consumes from a queue on another; once that member is
upgraded and the flag enabled, the same works with the batched records, and
what was queued before the switch is still delivered."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from cluster_procs import HttpError
from proton import Message
from proton.utils import BlockingConnection

pytestmark = pytest.mark.slow

FLAG = "queue_proxy_records"


def url(node) -> str:
    return f"amqp://guest:guest@127.0.0.1:{node.amqp_port}"


def flag_state(node) -> str:
    return {f["name"]: f for f in node.http("GET", "/api/feature_flags")}[FLAG]["state"]


def ready(node, name: str) -> int | None:
    try:
        info = node.http("GET", f"/api/queues/%2F/{quote(name, safe='')}")
    except HttpError as e:
        if e.status == 404:  # not declared on this node yet
            return None
        raise
    return info.get("messages_ready")


def publish(node, address: str, ids: range) -> None:
    conn = BlockingConnection(url(node), timeout=10)
    sender = conn.create_sender(address)
    for i in ids:  # returns once the queue's node confirmed it
        sender.send(Message(id=i, body=f"m{i}" * 50, durable=True))
    conn.close()


def consume(node, address: str, n: int) -> list:
    conn = BlockingConnection(url(node), timeout=10)
    receiver = conn.create_receiver(address, credit=7)
    got = []
    for _ in range(n):
        m = receiver.receive(timeout=10)
        got.append((m.id, m.body))
        receiver.accept()
    conn.close()
    return got


def test_the_remote_queue_path_works_before_and_after_the_flag(cluster_factory):
    cluster = cluster_factory(3)
    for i in range(3):  # a cluster of a build without the records
        cluster.node_env[i] = {"WARREN_TEST_UNSUPPORTED_FLAGS": FLAG}
    cluster.start()
    owner, client = cluster[1], cluster[0]
    assert flag_state(owner) == "unavailable"
    owner.http("PUT", "/api/queues/%2F/upgrade-q", {"durable": True})
    cluster.wait_for(lambda: ready(client, "upgrade-q") is not None, 10, "the queue on node 0")
    publish(client, "/queues/upgrade-q", range(0, 30))
    assert ready(owner, "upgrade-q") == 30

    # nodes 0 and 2 upgraded, node 1 (the queue's) not yet: the old form, both ways
    for i in (0, 2):
        cluster.node_env.pop(i)
        cluster.restart(i)
    assert flag_state(client) == "unavailable"
    publish(cluster[2], "/queues/upgrade-q", range(30, 60))
    assert ready(owner, "upgrade-q") == 60
    assert consume(client, "/queues/upgrade-q", 10) == [(i, f"m{i}" * 50) for i in range(10)]

    # node 1 upgraded too, the flag enabled: the records
    cluster.node_env.pop(1)
    cluster.restart(1)
    cluster.wait_for(lambda: flag_state(owner) == "disabled", 20, "node 1's report of the flag")
    owner.http("PUT", f"/api/feature_flags/{FLAG}/enable", {})
    for i in range(3):
        cluster.wait_for(lambda i=i: flag_state(cluster[i]) == "enabled", 20, f"node {i} to see the flag")
    publish(client, "/queues/upgrade-q", range(60, 90))
    assert ready(owner, "upgrade-q") == 80
    assert consume(cluster[2], "/queues/upgrade-q", 80) == [(i, f"m{i}" * 50) for i in range(10, 90)]
    cluster.wait_for(lambda: ready(owner, "upgrade-q") == 0, 10, "the queue drained")
