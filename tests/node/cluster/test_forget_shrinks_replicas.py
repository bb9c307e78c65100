"""forget_cluster_node takes the forgotten member's replicas out of every quorum queue and
replicated stream, as RabbitMQ's does (three `warren server` processes). Found while planning
the chaos suite's forget-and-rejoin fault: left in, a forgotten node stays a voter of each
group, so the group's majority counts a node that is gone, and the node, wiped and started
again at its address, would vote with an empty log."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from confirmed_sends import send_numbered
from proton.utils import BlockingConnection
from received import receive_ids

pytestmark = pytest.mark.slow


def url(node) -> str:
    return f"amqp://guest:guest@127.0.0.1:{node.amqp_port}"


def members(node, queue: str) -> list[str] | None:
    """The queue's replicas as `node` names them (None: it names none)."""
    info = node.http("GET", f"/api/queues/%2F/{quote(queue, safe='')}")
    return sorted(info["members"]) if "members" in info else None


def test_forgetting_a_node_removes_its_replicas_and_the_queues_go_on(cluster):
    first = cluster[0]
    first.http("PUT", "/api/queues/%2F/qq", {"durable": True, "arguments": {"x-queue-type": "quorum"}})
    first.http("PUT", "/api/queues/%2F/st", {"durable": True, "arguments": {"x-queue-type": "stream"}})
    names = sorted(cluster[i].http("GET", "/api/overview")["node"] for i in range(3))
    cluster.wait_for(lambda: members(first, "qq") == names and members(first, "st") == names, 20, "three replicas")
    send_numbered(url(first), "/queues/qq", 10)

    gone = 2
    gone_name = cluster[gone].http("GET", "/api/overview")["node"]
    assert cluster.stop(gone) == 0
    rest = [0, 1]
    cluster.wait_ready(30, among=rest)
    out = cluster.ctl(rest[0], "forget_cluster_node", cluster[gone].id)
    assert out.returncode == 0, out.stderr
    assert "quorum 'qq' in vhost '/': replica removed" in out.stdout
    assert "stream 'st' in vhost '/': replica removed" in out.stdout
    left = sorted(n for n in names if n != gone_name)
    for i in rest:
        cluster.wait_for(lambda i=i: members(cluster[i], "qq") == left, 20, f"node {i} naming the quorum replicas left")
    # a stream's replicas are named by its leader's node (a follower's answer names none)
    cluster.wait_for(lambda: {str(members(cluster[i], "st")) for i in rest} == {str(left), "None"}, 20,
                     "the stream's leader naming the replicas left")  # fmt: skip
    # the queue goes on with the two replicas left: what was confirmed is there
    conn = BlockingConnection(url(cluster[1]), timeout=10)
    assert receive_ids(conn.create_receiver("/queues/qq", credit=10), 10, timeout=10) == list(range(10))
    conn.close()
