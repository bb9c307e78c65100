"""A blank node whose static seeds already form a cluster without it joins that cluster (three
`warren server` processes): a member forgotten, its data wiped, started again with the same
--seeds (how a replaced machine comes back), and a new node given the members as seeds.
Before, such a node took its seeds as its members and waited for a majority that did not
count it, with its HTTP API down (found planning the chaos suite's forget-and-rejoin fault)."""

from __future__ import annotations

import shutil

import pytest
from cluster_procs import ClusterProcesses
from confirmed_sends import send_numbered
from proton.utils import BlockingConnection
from received import receive_ids

pytestmark = pytest.mark.slow


def url(node) -> str:
    return f"amqp://guest:guest@127.0.0.1:{node.amqp_port}"


def member_ids(node) -> list[str]:
    return sorted(m["node"] for m in node.http("GET", "/api/cluster")["members"])


def test_a_forgotten_node_wiped_and_started_again_with_its_seeds_joins_the_cluster(cluster):
    first = cluster[0]
    first.http("PUT", "/api/queues/%2F/cq", {"durable": True})
    send_numbered(url(first), "/queues/cq", 5)

    gone = 2
    assert cluster.stop(gone) == 0
    cluster.wait_ready(30, among=[0, 1])
    out = cluster.ctl(0, "forget_cluster_node", cluster[gone].id)
    assert out.returncode == 0, out.stderr
    assert member_ids(first) == sorted([cluster[0].id, cluster[1].id])
    shutil.rmtree(cluster[gone].data_dir)

    cluster.spawn(gone)  # blank, with the same --seeds as at the cluster's start
    cluster.wait_for(lambda: cluster[gone].status(), 30, "the wiped node's API answering")
    everyone = sorted(n.id for n in cluster.nodes)
    for i in range(3):
        cluster.wait_for(lambda i=i: member_ids(cluster[i]) == everyone, 30, f"node {i} counting three members")
    cluster.wait_ready(30)
    # it serves the cluster's queues: the classic queue on the first node, through it
    conn = BlockingConnection(url(cluster[gone]), timeout=10)
    assert receive_ids(conn.create_receiver("/queues/cq", credit=5), 5, timeout=10) == list(range(5))
    conn.close()


def test_a_new_node_given_a_running_clusters_members_as_seeds_joins_it(tmp_path):
    three = ClusterProcesses(tmp_path / "c", 4)
    fourth = three.nodes.pop()  # the first three form the cluster (their seeds name only them)
    try:
        three.start()
        three.nodes.append(fourth)  # now every node's seeds name all four: the fourth starts blank
        three.spawn(3)
        three.wait_for(lambda: three[3].status(), 30, "the new node's API answering")
        everyone = sorted(n.id for n in three.nodes)
        for i in range(4):
            three.wait_for(lambda i=i: member_ids(three[i]) == everyone, 30, f"node {i} counting four members")
        three.wait_ready(30)
    finally:
        three.close()
