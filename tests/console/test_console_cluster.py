"""The console's Cluster, Raft groups and Audit pages (node/http/console/pages/cluster.js,
raft.js, audit.js) in headless Chromium against one node that writes a cluster-state
snapshot every 0.2 s: the cluster page lists the node and drains and revives it, the
Raft page shows the metadata group and a quorum queue's group with leader and term and
follows the commit index, the audit page draws the node's timeline."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


@pytest.fixture
def node(broker_factory):
    """The console fixtures' node, writing snapshots often enough for a timeline."""
    return broker_factory(http_port=0, metrics_port=0, snapshot_interval=0.2)


def test_the_cluster_page_lists_the_node_and_drains_and_revives_it(console, api):
    console.go("#/cluster")
    members = console.test_id("members")
    expect(members.locator('[data-node="warren@test"]')).to_contain_text("this node")
    expect(console.test_id("state-warren@test")).to_have_text("serving")
    expect(console.test_id("cluster-summary")).to_contain_text("1 of 1 (a majority)")
    console.page.get_by_label("Wait at most (seconds) for the leaderships to move").fill("2")
    console.test_id("drain").click()  # the confirm() is accepted by the fixture
    expect(console.test_id("state-warren@test")).to_have_text("drained")
    expect(console.test_id("drain-report")).to_contain_text("Client connections closed")
    assert api.get("/api/maintenance").body["state"] == "drained"
    console.test_id("revive").click()
    expect(console.test_id("state-warren@test")).to_have_text("serving")
    assert api.get("/api/maintenance").body["state"] == "serving"
    console.test_id("rebalance").click()
    expect(console.test_id("rebalance-result")).to_contain_text("nothing moved")


def test_the_raft_page_shows_the_metadata_group_and_a_quorum_queues_group(console, api):
    assert api.put("/api/queues/%2F/orders", {"arguments": {"x-queue-type": "quorum"}}).status == 201
    console.go("#/raft")
    groups = console.test_id("raft-groups")
    meta = groups.locator('tr[data-type="metadata"]')
    expect(meta.locator('[data-test="leader"]')).to_have_text("warren@test")
    expect(meta.locator('[data-test="term"]')).to_have_text("1")
    queue = groups.locator('tr[data-type="quorum"]', has_text="orders")
    expect(queue.locator('[data-test="leader"]')).to_have_text("warren@test")  # elected: refreshed every 2 s
    assert int(queue.locator('[data-test="term"]').inner_text()) >= 1
    expect(queue.locator('li[data-member="warren@test"]')).to_have_attribute("data-lag", "0")
    commit = int(queue.locator('[data-test="commit"]').inner_text().replace(",", ""))
    for i in range(3):
        assert api.post("/api/exchanges/%2F/amq.default/publish", {"routing_key": "orders", "payload": str(i),
                        "payload_encoding": "string", "properties": {}}).status == 200  # fmt: skip
    expect(queue.locator('[data-test="commit"]')).not_to_have_text(str(commit))  # the live refresh
    console.test_id("raft-type").select_option("metadata")
    expect(groups.locator("tbody tr")).to_have_count(1)
    expect(console.test_id("raft-count")).to_contain_text("1 of 2 groups")


def test_the_audit_page_draws_the_nodes_timeline(console, api):
    deadline = time.monotonic() + 15
    while api.get("/api/audit/timeline?minutes=15").body["records"] < 3:
        assert time.monotonic() < deadline, "no snapshots written"
        time.sleep(0.1)
    console.go("#/audit/15")
    timeline = console.test_id("audit-timeline")
    expect(timeline).to_be_visible()
    mine = timeline.locator('g[data-node="warren@test"]')
    expect(mine.locator('g[data-lane="reach:warren@test"] rect').first).to_have_attribute("data-value", "self")
    expect(mine.locator('g[data-lane="leader:metadata"] rect').last).to_have_attribute("data-value", "warren@test")
    expect(mine.locator('g[data-lane="version"] rect')).to_have_count(1)
    expect(console.test_id("audit-about")).to_contain_text("one every 0.2 s")
    expect(console.test_id("audit-events")).to_contain_text("No leader change")
    expect(console.test_id("audit-window")).to_have_value("15")


def test_a_monitoring_user_sees_the_cluster_but_cannot_drain_or_rebalance(open_console, node):
    node.add_user("watcher", "pw", ("monitoring",))
    console = open_console("watcher", "pw")
    console.go("#/cluster")
    expect(console.test_id("state-warren@test")).to_have_text("serving")
    expect(console.page.get_by_text("Administrators may drain and revive a node.")).to_be_visible()
    expect(console.test_id("drain")).to_have_count(0)
    expect(console.test_id("rebalance")).to_have_count(0)
