"""The Cluster and Raft groups pages on a 3-node cluster (in this process, real gRPC and
pysyncobj), in headless Chromium on the console of the second node: the members are
listed, draining that node hands its leaderships over and the other members learn it,
reviving it serves again; a 3-replica quorum queue's group shows its three members, and
on its leader's console their match index and lag."""

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
                              metrics_port=-1)  # fmt: skip

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


def test_a_quorum_queues_three_members_and_their_lag_on_the_leaders_console(three, open_console):
    leader, _, _, _ = quorum_queue(three, "replicated")
    console = open_console()
    if leader is not three[1]:  # the leader's console knows the followers' logs
        console.page.goto(f"http://127.0.0.1:{leader.broker.http_port}/")
        console.page.get_by_label("Username").fill("guest")
        console.page.get_by_label("Password").fill("guest")
        console.page.get_by_role("button", name="Log in", exact=True).click()
        expect(console.page.locator('[data-page="overview"] h1')).to_have_text("Overview")
    console.go("#/raft/replicated")
    row = console.test_id("raft-groups").locator('tr[data-type="quorum"]')
    expect(row).to_have_count(1)
    expect(row.locator('[data-test="leader"]')).to_have_text(leader.config.node_name)
    expect(row.locator("li[data-member]")).to_have_count(3)
    for i in range(3):
        expect(row.locator(f'li[data-member="warren-{i}@localhost"]')).to_have_attribute("data-lag", "0")
