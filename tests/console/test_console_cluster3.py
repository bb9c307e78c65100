"""The Cluster and Raft groups pages on a 3-node cluster (in this process, real gRPC and
pysyncobj), in headless Chromium on the console of the second node: the members are
listed, draining that node hands its leaderships over and the other members learn it,
reviving it serves again; a 3-replica quorum queue's group shows its three members and
their lag, as its leader reports them; the audit page draws every member's
timeline, a partition on the member that saw it."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from cluster_procs import free_ports
from mgmt_client import Api
from playwright.sync_api import expect
from quorum_nodes import quorum_queue, until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


@pytest.fixture
def three(broker_factory, tmp_path):
    ports = free_ports(3)
    seeds = [f"127.0.0.1:{p}" for p in ports]

    def one(i: int):
        return broker_factory(tmp_path / f"n{i}", node_name=f"warren-{i}@localhost", grpc_port=ports[i], seeds=seeds,
                              cluster_secret="console-three", advertise_host="127.0.0.1", http_port=0,
                              metrics_port=-1, snapshot_interval=0.2)  # fmt: skip

    with ThreadPoolExecutor(3) as pool:
        return list(pool.map(one, range(3)))


@pytest.fixture
def node(three):
    """The node whose console the fixtures open: the second member."""
    return three[1]


def test_drain_and_revive_a_member_of_a_three_node_cluster(console, three):
    console.go("#/cluster")
    members = console.test_id("members")
    for i in range(3):
        expect(members.locator(f'[data-node="warren-{i}@localhost"]')).to_be_visible()
    expect(console.test_id("state-warren-1@localhost")).to_have_text("serving")
    expect(console.test_id("cluster-summary")).to_contain_text("3 of 3 (a majority)")
    console.test_id("drain").click()
    expect(console.test_id("state-warren-1@localhost")).to_have_text("drained", timeout=40_000)
    expect(console.test_id("drain-report")).to_contain_text("Complete")
    other = Api(three[0].broker.http_port)
    until(lambda: three[1].broker.cluster.node_id in other.get("/api/maintenance").body["drained_peers"],
          "the other members know it drained")  # fmt: skip
    assert other.get("/api/cluster").body["leader"] != three[1].broker.cluster.node_id  # handed over
    console.test_id("revive").click()
    expect(console.test_id("state-warren-1@localhost")).to_have_text("serving")
    until(lambda: other.get("/api/maintenance").body["drained_peers"] == [], "the other members know it serves")


def test_a_quorum_queues_three_members_and_their_lag_from_any_console(three, console):
    leader, _, _, _ = quorum_queue(three, "replicated")
    console.go("#/raft/replicated")
    row = console.test_id("raft-groups").locator('tr[data-type="quorum"]')
    expect(row).to_have_count(1)
    expect(row.locator('[data-test="leader"]')).to_have_text(leader.config.node_name)
    expect(row.locator("li[data-member]")).to_have_count(3)
    for i in range(3):  # the console's node asked the leader, whichever it is
        expect(row.locator(f'li[data-member="warren-{i}@localhost"]')).to_have_attribute("data-lag", "0")


def test_the_audit_page_draws_every_members_timeline_and_a_partition(console, three):
    cut_off = three[2].broker.cluster.node_id
    api = Api(three[0].broker.http_port)
    until(lambda: len(api.get("/api/audit/timeline?minutes=15").body["members"]) == 3, "every member in a record")
    three[0].call(three[0].broker.cluster.partition, [cut_off])

    def seen(state: str) -> bool:
        t = api.get("/api/audit/timeline?minutes=15").body
        return next(m for m in t["members"] if m["address"] == cut_off)["spans"][-1]["state"] == state

    until(lambda: seen("unreachable"), "node 0 records the partition")
    three[0].call(three[0].broker.cluster.heal)
    until(lambda: seen("reachable"), "node 0 records the heal")
    console.go("#/audit/15")
    timeline = console.test_id("audit-timeline")
    for i in range(3):
        expect(timeline.locator(f'g[data-node="warren-{i}@localhost"] g[data-lane="version"] rect')).to_have_count(1)
    first = timeline.locator('g[data-node="warren-0@localhost"]')
    expect(first.locator('rect[data-band="partition"]')).not_to_have_count(0)
    lane = first.locator('g[data-lane="reach:warren-2@localhost"]')
    expect(lane.locator('rect[data-value="unreachable"]')).not_to_have_count(0)
    expect(lane.locator("rect").last).to_have_attribute("data-value", "reachable")
    expect(console.test_id("audit-events")).to_contain_text("reached no warren-2@localhost")
    expect(console.test_id("audit-about").locator("li")).to_have_count(3)
