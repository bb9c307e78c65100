"""A vhost's default queue type across a cluster: set through one node, every
node gives it to the queues declared through it (each applies the metadata
effect), and definitions imported through one node are exported alike by
another."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_set_anywhere_honoured_everywhere(cluster):
    a, b, c = cluster.nodes
    a.http("PUT", "/api/vhosts/qv", {"default_queue_type": "quorum"})
    cluster.wait_for(lambda: c.http("GET", "/api/vhosts/qv").get("default_queue_type") == "quorum", 10,
                     "the default queue type on c")  # fmt: skip
    c.http("PUT", "/api/queues/qv/from-c", {"durable": True})
    assert c.http("GET", "/api/queues/qv/from-c")["type"] == "quorum"
    b.http("POST", "/api/definitions", {"parameters": [{"vhost": "qv", "component": "vhost-limits",
                                                        "name": "limits", "value": {"max-queues": 9}}],
                                        "global_parameters": [{"name": "cluster_name", "value": "trio"}]})  # fmt: skip
    cluster.wait_for(lambda: a.http("GET", "/api/overview")["cluster_name"] == "trio", 10, "the cluster name on a")
    doc = a.http("GET", "/api/definitions")
    assert {"vhost": "qv", "component": "vhost-limits", "name": "limits", "value": {"max-queues": 9}} in doc["parameters"]
    assert next(v for v in doc["vhosts"] if v["name"] == "qv")["metadata"]["default_queue_type"] == "quorum"
