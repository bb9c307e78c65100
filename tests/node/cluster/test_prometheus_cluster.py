"""The Prometheus pages of three real nodes of one cluster (in this process):
one rabbitmq_cluster_permanent_id on every node, set when the cluster was
set up, and a quorum queue's queue_info and Raft series on each of its
replicas, `membership` naming its leader and followers."""

from __future__ import annotations

import pytest
from mgmt_client import sample
from prometheus_client.exposition import generate_latest
from quorum_nodes import quorum_queue, start_nodes, until

from node.http import prometheus

pytestmark = pytest.mark.timeout(120)


class _Families:
    def __init__(self, families: list):
        self.families = families

    def collect(self):
        return self.families


def scrape(node) -> str:
    """The /metrics page (these nodes listen on no metrics port), read on the node's loop."""
    families = node.call(lambda: list(prometheus.per_object(node.broker)))
    return generate_latest(_Families(families)).decode()


def identity(text: str) -> dict:
    line = next(x for x in text.splitlines() if x.startswith("rabbitmq_identity_info{"))
    return dict(pair.split("=", 1) for pair in line[line.index("{") + 1 : line.index("}")].replace('"', "").split(","))


def test_one_permanent_id_and_each_replica_in_queue_info(broker_factory, tmp_path):
    nodes = start_nodes(broker_factory, tmp_path, 3)
    until(lambda: all(identity(scrape(n))["rabbitmq_cluster_permanent_id"] for n in nodes), "the id everywhere")
    ids = {identity(scrape(n))["rabbitmq_cluster_permanent_id"] for n in nodes}
    assert len(ids) == 1 and ids.pop().startswith("rabbitmq-cluster-id-")
    assert {identity(scrape(n))["rabbitmq_node"] for n in nodes} == {f"warren-{i}@localhost" for i in range(3)}

    leader, *followers, _ = quorum_queue(nodes, "qq")
    labels = {"vhost": "/", "queue": "qq", "queue_type": "rabbit_quorum_queue"}
    assert sample(scrape(leader), "rabbitmq_queue_info", membership="leader", **labels) == 1
    for follower in followers:
        text = scrape(follower)
        assert sample(text, "rabbitmq_queue_info", membership="follower", **labels) == 1
        assert sample(text, "rabbitmq_raft_commit_index", vhost="/", queue="qq") >= 1
