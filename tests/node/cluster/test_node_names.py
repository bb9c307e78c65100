"""Quorum queues' node, leader and members by node name (warren-1@localhost)
in the HTTP API, as RabbitMQ names nodes, not by cluster address; the
replica routes take either (node/cluster/node_names.py)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from cluster_procs import free_ports
from mgmt_client import Api
from quorum_nodes import until

pytestmark = pytest.mark.timeout(120)


def test_quorum_members_are_node_names(broker_factory, tmp_path):
    ports = free_ports(3)
    seeds = [f"127.0.0.1:{p}" for p in ports]

    def one(i: int):
        return broker_factory(tmp_path / f"n{i}", node_name=f"warren-{i}@localhost", grpc_port=ports[i], seeds=seeds,
                              cluster_secret="names-secret", advertise_host="127.0.0.1", http_port=0,
                              metrics_port=-1)  # fmt: skip

    with ThreadPoolExecutor(3) as pool:
        nodes = list(pool.map(one, range(3)))
    api = Api(nodes[0].broker.http_port)
    api.put("/api/queues/%2F/nq", {"arguments": {"x-queue-type": "quorum", "x-quorum-initial-group-size": 3}})
    names = {f"warren-{i}@localhost" for i in range(3)}

    def named() -> bool:
        q = api.get("/api/queues/%2F/nq").body
        return set(q.get("members", [])) == names and q.get("leader") in names

    until(named, "members by node name")
    q = api.get("/api/queues/%2F/nq").body
    assert q["node"] == q["leader"] and set(q["online"]) == names
    rows = api.get("/api/queues/quorum/%2F/nq/status").body
    assert {r["Node Name"] for r in rows} == names
    # the replica routes take a node name: a follower, not the node asked
    other = sorted(names - {q["leader"], "warren-0@localhost"})[0]
    # (a group just elected refuses membership changes until its leader commits in its term)
    until(lambda: api.request("DELETE", "/api/queues/quorum/%2F/nq/replicas/delete", {"node": other}).status == 204,
          f"{other} removal accepted")  # fmt: skip
    until(lambda: other not in api.get("/api/queues/%2F/nq").body["members"], f"{other} removed")
    until(lambda: api.post("/api/queues/quorum/%2F/nq/replicas/add", {"node": other}).status == 204,
          f"{other} addition accepted")  # fmt: skip
    until(named, f"{other} back")
