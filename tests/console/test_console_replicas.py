"""Moving a quorum queue's replica from the console's queue page, on a real
3-node cluster of `warren server` processes: the page's form adds a member
on another node and removes one (the API's replicas/add and replicas/delete),
and the replicas table follows."""

from __future__ import annotations

import pytest
from cluster_procs import ClusterProcesses
from playwright.sync_api import expect

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture
def cluster(tmp_path):
    c = ClusterProcesses(tmp_path / "cluster", 3)
    try:
        c.start()
        yield c
    finally:
        c.close()


def test_move_a_quorum_replica_from_the_page(cluster, open_console):
    n0 = cluster[0]
    n0.http(
        "PUT", "/api/queues/%2F/moving", {"arguments": {"x-queue-type": "quorum", "x-quorum-initial-group-size": 2}}
    )
    names = [n.name for n in cluster.nodes]

    def named_queue():
        """The queue once it has a leader and n0 names every node: names are learned by asking
        (node/cluster/node_names.py), and the form's node names are resolved on n0."""
        q = n0.http("GET", "/api/queues/%2F/moving")
        [metadata] = n0.http("GET", "/api/raft/groups?type=metadata")["items"]
        known = {m["node"] for m in metadata["members"]}
        named = known == set(names) and {q.get("leader"), *q.get("members", ())} <= known
        return q if q.get("leader_elected") and named else None

    q = cluster.wait_for(named_queue, 30, "a leader of the queue, every node named")
    members = q["members"]
    assert len(members) == 2 and set(members) <= set(names)
    [outside] = [n for n in names if n not in members]
    [follower] = [m for m in members if m != q["leader"]]

    console = open_console(port=n0.http_port)
    console.go("#/queue/%2F/moving")
    rows = console.test_id("replicas").locator("tbody tr")
    expect(rows).to_have_count(2)
    page = console.page
    page.get_by_label("Node", exact=True).fill(outside)
    console.test_id("replica-from").fill(follower)
    page.get_by_role("button", name="Add or move replica").click()
    expect(console.test_id("toast").last).to_have_text(f"Replica moved from {follower} to {outside}")
    expect(console.test_id("replicas")).to_contain_text(outside)
    expect(console.test_id("replicas")).not_to_contain_text(follower)
    assert sorted(n0.http("GET", "/api/queues/%2F/moving")["members"]) == sorted([q["leader"], outside])
