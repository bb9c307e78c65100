"""A cluster of three `warren server --workers 2` nodes (issue 36): worker 0 of each node is
the node's one endpoint in the cluster and relays the queue proxy between the node's other
worker and the other nodes, so a connection on either worker of any node uses every queue of
the cluster: a classic queue on either worker of another node (relayed at both ends), a
quorum queue whose replicas run on the nodes' workers 0. A connection whose first link names
another node's queue moves to its node's worker 0, one relay fewer. A Direct Reply-To reply
reaches a requester on worker 1 of another node through both nodes' workers 0."""

from __future__ import annotations

import pytest
from cluster_procs import ClusterProcesses  # tests/support/
from volatile_clients import round_trip
from worker_procs import connect_on, consume, peers_of, publish, workers


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = ClusterProcesses(tmp_path_factory.mktemp("workers") / "cluster", 3, extra_args=["--workers", "2"])
    try:
        c.start(timeout=60)
        yield c
    finally:
        c.close()


def test_either_worker_of_any_node_uses_every_queue_of_the_cluster(cluster):
    n0, n1, n2 = cluster[0], cluster[1], cluster[2]
    for name in ("cq-a", "cq-b"):
        n0.http("PUT", f"/api/queues/%2F/{name}", {"durable": True, "arguments": {
            "x-queue-type": "classic", "x-queue-leader-locator": "client-local"}})
    n0.http("PUT", "/api/queues/%2F/qq", {"durable": True, "arguments": {"x-queue-type": "quorum"}})
    led = [n0.by_address(q)["node"] for q in n0.http("GET", "/api/queues") if q["name"].startswith("cq")]
    assert led == [n0.id, n0.id]
    queues = ["cq-a", "cq-b", "qq"]

    # worker 1 of node 1, pinned there: worker 1 -> node 1's worker 0 -> node 0 (-> its worker 1)
    on_1 = connect_on(n1.proc.pid, n1.amqp_port, 1, pinned=True)
    for q in queues:
        publish(on_1, q, [f"{q}-{i}" for i in range(20)])  # each one accepted
    on_1.close()
    # worker 1 of node 2 reads them all back, in order
    on_2 = connect_on(n2.proc.pid, n2.amqp_port, 1, pinned=True)
    for q in queues:
        assert consume(on_2, q, 20) == [f"{q}-{i}" for i in range(20)]
    on_2.close()

    # a connection whose first link names another node's queue moves to its node's worker 0
    procs = workers(n2.proc.pid, n2.amqp_port)
    before = {k: peers_of(p, n2.amqp_port) for k, p in procs.items()}
    moving = connect_on(n2.proc.pid, n2.amqp_port, 1)
    (port,) = peers_of(procs[1], n2.amqp_port) - before[1]
    publish(moving, "cq-b", ["moved"])
    assert port in peers_of(procs[0], n2.amqp_port) and port not in peers_of(procs[1], n2.amqp_port)
    assert consume(moving, "cq-b", 1) == ["moved"]
    moving.close()


@pytest.mark.parametrize("requester_at, responder_at", [((1, 1), (2, 1)), ((2, 0), (0, 1))])
def test_a_reply_reaches_a_requester_on_any_worker_of_another_node(cluster, requester_at, responder_at):
    (rn, rw), (sn, sw) = requester_at, responder_at
    queue = f"requests-{rn}{rw}-{sn}{sw}"
    cluster[0].http("PUT", f"/api/queues/%2F/{queue}", {"durable": True})
    asking = connect_on(cluster[rn].proc.pid, cluster[rn].amqp_port, rw, pinned=True)
    answering = connect_on(cluster[sn].proc.pid, cluster[sn].amqp_port, sw, pinned=True)
    round_trip(asking, answering, queue)
    asking.close()
    answering.close()
