"""A cluster of three `warren server --workers 2` nodes and one of a single worker (issue 36,
and a cluster part way through moving to workers): worker 0 of each node is
the node's one endpoint in the cluster and relays the queue proxy between the node's other
worker and the other nodes, so a connection on either worker of any node uses every queue of
the cluster: a classic queue on either worker of another node (relayed at both ends), a
quorum queue whose replicas run on the nodes' workers 0. A connection whose first link names
another node's queue moves to its node's worker 0, one relay fewer. A Direct Reply-To reply
reaches a requester on worker 1 of another node through both nodes' workers 0, from a node
of one worker too."""

from __future__ import annotations

import json

import pytest
from cluster_procs import ClusterProcesses
from http_json import HttpError  # tests/support/
from proton.utils import BlockingConnection
from volatile_clients import round_trip
from worker_procs import PIN, connect_on, consume, peers_of, publish, workers

SINGLE = 3  # the node of one worker


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = ClusterProcesses(tmp_path_factory.mktemp("workers") / "cluster", 4)
    c.node_env = {i: {"WARREN_WORKERS": "1" if i == SINGLE else "2"} for i in range(4)}
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


def client(node, worker: int) -> BlockingConnection:
    """A connection on worker `worker` of `node` that stays there (its first link names no queue)."""
    if node.index != SINGLE:
        return connect_on(node.proc.pid, node.amqp_port, worker, pinned=True)
    conn = BlockingConnection(f"amqp://guest:guest@127.0.0.1:{node.amqp_port}", allowed_mechs="PLAIN")
    conn.create_sender(PIN)
    return conn


@pytest.mark.parametrize("requester_at, responder_at",
                         [((1, 1), (2, 1)), ((2, 0), (0, 1)), ((1, 1), (SINGLE, 0)), ((SINGLE, 0), (2, 1))])
def test_a_reply_reaches_a_requester_on_any_worker_of_another_node(cluster, requester_at, responder_at):
    (rn, rw), (sn, sw) = requester_at, responder_at
    queue = f"requests-{rn}{rw}-{sn}{sw}"
    cluster[0].http("PUT", f"/api/queues/%2F/{queue}", {"durable": True})
    asking, answering = client(cluster[rn], rw), client(cluster[sn], sw)
    round_trip(asking, answering, queue)
    asking.close()
    answering.close()


def management_on(node, worker: int):
    """A rabbitmq-amqp-python-client connection (its first link: the management node, which
    moves nothing) that the kernel gave to worker `worker` of `node`."""
    from rabbitmq_amqp_python_client import Connection

    procs = workers(node.proc.pid, node.amqp_port)
    for _ in range(60):
        before = peers_of(procs[worker], node.amqp_port)
        conn = Connection(f"amqp://guest:guest@127.0.0.1:{node.amqp_port}/")
        conn.dial()
        if peers_of(procs[worker], node.amqp_port) - before:
            return conn
        conn.close()
    raise AssertionError(f"no connection landed on worker {worker}")


def test_counts_read_through_another_worker_are_the_serving_nodes_own_now(cluster):
    n0, n1 = cluster[0], cluster[1]
    n0.http("PUT", "/api/queues/%2F/counted", {"durable": True, "arguments": {
        "x-queue-type": "classic", "x-queue-leader-locator": "client-local"}})
    writer = client(n0, 0)
    publish(writer, "counted", ["x"] * 10)
    conn = management_on(n1, 1)  # worker 1 -> node 1's worker 0 (relaying) -> node 0
    try:
        management = conn.management()
        assert management.queue_info("counted").message_count == 10
        assert management.purge_queue("counted") == 10
        publish(writer, "counted", ["y"] * 3)
        assert management.queue_info("counted").message_count == 3  # not a count the relay kept
    finally:
        conn.close()
        writer.close()


def test_nodes_of_two_workers_join_at_run_time_and_the_joiner_s_old_queues_go(tmp_path):
    """join_cluster resets the joining node's metadata, as RabbitMQ's reset does: its queues on
    either worker go with their messages, and a queue declared again under the same name there
    starts empty on whichever worker it lands."""
    c = ClusterProcesses(tmp_path / "cluster", 2, seeded=False)
    c.node_env = {0: {"WARREN_WORKERS": "2"}, 1: {"WARREN_WORKERS": "2"}}
    names = ["old-a", "old-b"]
    declare = {"durable": True, "arguments": {"x-queue-type": "classic", "x-queue-leader-locator": "client-local"}}
    try:
        for i in (0, 1):
            c.spawn(i)
        for i in (0, 1):
            c.wait_ready(60, among=[i])
        joiner = c[1]
        for name in names:  # once the node's own member record is in (announced after the first election)
            c.wait_for(lambda name=name: declared(joiner, name, declare), 10, "a declaration")
        on_1 = connect_on(joiner.proc.pid, joiner.amqp_port, 1, pinned=True)
        for name in names:
            publish(on_1, name, [f"{name}-before"] * 3)
        on_1.close()
        assert sorted(placed(joiner).values()) == [0, 1]

        out = c.ctl(1, "join_cluster", c[0].id)
        assert out.returncode == 0, out.stderr
        c.wait_ready(30)
        assert [q["name"] for q in c[0].http("GET", "/api/queues")] == []
        c.wait_for(lambda: [q["name"] for q in joiner.http("GET", "/api/queues")] == [], 10, "the old queues gone")

        for name in names:  # declared again, led by the joiner once its member record is back
            c.wait_for(lambda name=name: declared(joiner, name, declare), 10, "a declaration")
        assert sorted(placed(joiner).values()) == [0, 1]
        on_0 = connect_on(c[0].proc.pid, c[0].amqp_port, 1, pinned=True)
        for name in names:
            publish(on_0, name, [f"{name}-after"])
        on_0.close()
        on_1 = connect_on(joiner.proc.pid, joiner.amqp_port, 1, pinned=True)
        for name in names:
            assert consume(on_1, name, 1) == [f"{name}-after"]
            assert [q["messages"] for q in joiner.http("GET", "/api/queues") if q["name"] == name] == [0]
        on_1.close()
    finally:
        c.close()


def declared(node, name: str, body: dict) -> bool:
    try:
        node.http("PUT", f"/api/queues/%2F/{name}", body)
    except HttpError as e:
        if "not a cluster member" not in str(e):
            raise
        return False
    return True


def placed(node) -> dict[str, int]:
    with open(node.data_dir / "workers" / "placement") as f:
        return {name: worker for _, name, worker in json.load(f)}
