"""Feature flags across three `warren server` processes (tests/node/cluster/conftest.py).

Every node announces its version and supported flags to the metadata group
when it starts; a flag cannot be enabled while a member lacks it, and the
refusal names that member. Node 2 runs with the test knob
WARREN_TEST_UNSUPPORTED_FLAGS=credit_api_v2; once it restarts without the
knob, the flag can be enabled.
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


def _node2_announced(cluster, i: int) -> bool:
    flags = _flags(cluster, i)
    return flags[FLAG]["state"] == "unavailable" and flags[OTHER]["state"] == "disabled"


def test_a_feature_flag_cannot_be_enabled_while_a_member_lacks_it(cluster_factory):
    cluster = cluster_factory(3)
    cluster.node_env[2] = {"WARREN_TEST_UNSUPPORTED_FLAGS": FLAG}
    cluster.start()
    for i in range(3):
        cluster.wait_for(lambda i=i: _node2_announced(cluster, i), 20, f"node {i} to see node 2's report")
        assert _flags(cluster, i)[FLAG]["unsupported_by"] == [cluster[2].id]

    # refused, naming node 2, through any node
    with pytest.raises(HttpError) as e:
        cluster[0].http("PUT", f"/api/feature_flags/{FLAG}/enable", {})
    assert e.value.status == 409 and cluster[2].id in e.value.body["reason"]
    out = cluster.ctl(1, "enable_feature_flag", FLAG)
    assert out.returncode != 0 and cluster[2].id in out.stderr

    # another flag is enabled, and every node sees it
    assert cluster[1].http("PUT", f"/api/feature_flags/{OTHER}/enable", {})["enabled"] == [OTHER]
    for i in range(3):
        cluster.wait_for(lambda i=i: _flags(cluster, i)[OTHER]["state"] == "enabled", 10, f"{OTHER} on node {i}")
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
