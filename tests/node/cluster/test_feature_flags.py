"""Feature flags across three `warren server` processes (tests/node/cluster/conftest.py).

Every node announces its version and supported flags to the metadata group
when it starts. A brand-new cluster enables every stable flag its members
support at once (as RabbitMQ does); a flag stays off while a member lacks
it, and enabling it is refused naming that member. Here every node starts
with the test knob WARREN_TEST_UNSUPPORTED_FLAGS=credit_api_v2, as a cluster
built before that flag existed would; nodes 0 and 1 then restart without
the knob, and once node 2 does too the flag can be enabled.
"""

from __future__ import annotations

import json

import pytest
from cluster_procs import HttpError

pytestmark = pytest.mark.slow

FLAG = "credit_api_v2"
OTHER = "warren_metadata_raft_v1"


def _flags(cluster, i: int) -> dict[str, dict]:
    return {f["name"]: f for f in cluster[i].http("GET", "/api/feature_flags")}


def _only_node2_lacks_it(cluster, i: int) -> bool:
    return _flags(cluster, i)[FLAG]["unsupported_by"] == [cluster[2].id]


def test_a_feature_flag_cannot_be_enabled_while_a_member_lacks_it(cluster_factory):
    cluster = cluster_factory(3)
    for i in range(3):
        cluster.node_env[i] = {"WARREN_TEST_UNSUPPORTED_FLAGS": FLAG}
    cluster.start()
    # the new cluster enabled every stable flag all its members support
    for i in range(3):
        flags = _flags(cluster, i)
        assert flags[OTHER]["state"] == "enabled" and flags["quorum_queue_v1"]["state"] == "enabled"
        assert flags[FLAG]["state"] == "unavailable"
    for i in (0, 1):
        cluster.node_env.pop(i)
        cluster.restart(i)
    for i in range(3):
        cluster.wait_for(lambda i=i: _only_node2_lacks_it(cluster, i), 20, f"node {i} to see node 2's report")

    # refused, naming node 2, through any node
    with pytest.raises(HttpError) as e:
        cluster[0].http("PUT", f"/api/feature_flags/{FLAG}/enable", {})
    assert e.value.status == 409 and cluster[2].id in e.value.body["reason"]
    out = cluster.ctl(1, "enable_feature_flag", FLAG)
    assert out.returncode != 0 and cluster[2].id in out.stderr
    out = cluster.ctl(2, "list_feature_flags", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert rows[OTHER]["state"] == "enabled" and rows[FLAG]["state"] == "unavailable"
    assert FLAG in cluster.ctl(2, "list_feature_flags").stdout

    # node 2 restarts without the knob: it announces credit_api_v2, which can now be enabled
    cluster.node_env.pop(2)
    cluster.restart(2)
    cluster.wait_for(lambda: _flags(cluster, 0)[FLAG]["state"] == "disabled", 20, "node 2 to support the flag")
    out = cluster.ctl(0, "enable_feature_flag", "all")
    assert out.returncode == 0, out.stderr
    for i in range(3):
        cluster.wait_for(lambda i=i: _flags(cluster, i)[FLAG]["state"] == "enabled", 10, f"{FLAG} on node {i}")
