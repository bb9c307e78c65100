"""A shovel runs on one member of a three-node cluster, chosen through the
metadata; when that member is killed with -9 mid-way another takes it over
within seconds, and no message the source queue confirmed is lost: copies
arrive twice only within the in-flight window (src-prefetch-count), and
the test counts them."""

from __future__ import annotations

import time

import pytest
from cluster_procs import HttpError
from proton import Message
from proton.utils import BlockingConnection

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

N, PREFETCH = 3000, 50


def url(node) -> str:
    return f"amqp://guest:guest@127.0.0.1:{node.amqp_port}"


def shovels(node) -> list[dict]:
    try:
        return node.http("GET", "/api/shovels")
    except (HttpError, OSError):
        return []


def runner_of(cluster, by_name: dict[str, int]) -> int:
    """The index of the node running the one shovel, once it runs and its node is
    shown by name (names are learned by asking, node/cluster/node_names.py: a member
    asked during an earlier test's partition is shown by address for a moment)."""
    def running() -> bool:
        return [(s["state"], s["node"] in by_name) for s in shovels(cluster[0])] == [("running", True)]

    cluster.wait_for(running, 30, "the shovel running on a node known by name")
    return by_name[shovels(cluster[0])[0]["node"]]


def test_the_shovel_moves_to_another_node_when_its_node_dies(cluster):
    cluster[0].http("PUT", "/api/feature_flags/quorum_queue_v1/enable", {})
    for name in ("src", "dst"):
        cluster[0].http("PUT", f"/api/queues/%2F/{name}", {"durable": True, "arguments": {"x-queue-type": "quorum"}})
    conn = BlockingConnection(url(cluster[0]), timeout=30)
    sender = conn.create_sender("/queues/src")
    for i in range(N):
        sender.send(Message(id=i, body=f"m{i}", durable=True))  # returns once accepted: committed by a majority
    conn.close()
    value = {"src-protocol": "local", "src-uri": "amqp://", "src-queue": "src", "dest-protocol": "local",
             "dest-uri": "amqp://", "dest-queue": "dst", "ack-mode": "on-confirm", "src-prefetch-count": PREFETCH,
             "reconnect-delay": 0.5}  # fmt: skip
    cluster[0].http("PUT", "/api/parameters/shovel/%2F/move", {"value": value})
    by_name = {n.name: n.index for n in cluster.nodes}
    runner = runner_of(cluster, by_name)
    cluster.wait_for(lambda: (shovels(cluster[runner]) or [{}])[0].get("forwarded", 0) >= 300, 30, "300 moved")
    cluster.kill9(runner)
    killed_at = time.monotonic()
    survivor = cluster[(runner + 1) % 3]
    cluster.wait_for(lambda: [(s["state"], s["node"] != cluster[runner].name) for s in shovels(survivor)]
                     == [("running", True)], 30, "another node running the shovel")  # fmt: skip
    print(f"\ntaken over in {time.monotonic() - killed_at:.1f} s")
    conn = BlockingConnection(url(survivor), timeout=30)
    receiver = conn.create_receiver("/queues/dst", credit=200)
    seen: dict[int, int] = {}
    deadline = time.monotonic() + 90
    while len(seen) < N:
        assert time.monotonic() < deadline, f"{len(seen)} of {N} arrived"
        m = receiver.receive(timeout=max(0.1, deadline - time.monotonic()))
        receiver.accept()
        seen[m.id] = seen.get(m.id, 0) + 1
    # the shovel has moved everything: what is left in dst are duplicates only
    while True:
        try:
            m = receiver.receive(timeout=2)
        except Exception:  # proton's Timeout: nothing more
            break
        receiver.accept()
        seen[m.id] = seen.get(m.id, 0) + 1
    conn.close()
    duplicates = sum(c - 1 for c in seen.values())
    print(f"{N} messages, {duplicates} duplicates (in-flight window {PREFETCH})")
    assert sorted(seen) == list(range(N))
    assert duplicates <= PREFETCH
    cluster.wait_for(lambda: survivor.http("GET", "/api/queues/%2F/src")["messages"] == 0, 20, "src drained")


def test_a_node_cut_off_stops_its_shovel_and_the_majority_runs_it(cluster):
    for name in ("cut-src", "cut-dst"):
        cluster[0].http("PUT", f"/api/queues/%2F/{name}", {"durable": True, "arguments": {"x-queue-type": "quorum"}})
    value = {"src-protocol": "local", "src-uri": "amqp://", "src-queue": "cut-src", "dest-protocol": "local",
             "dest-uri": "amqp://", "dest-queue": "cut-dst", "reconnect-delay": 0.5}  # fmt: skip
    cluster[0].http("PUT", "/api/parameters/shovel/%2F/cut", {"value": value})
    by_name = {n.name: n.index for n in cluster.nodes}
    runner = runner_of(cluster, by_name)
    cluster.partition(runner)
    others = [n for n in cluster.nodes if n.index != runner]
    cluster.wait_for(lambda: [(s["state"], s["node"]) for s in shovels(others[0])] in
                     ([("running", others[0].name)], [("running", others[1].name)]), 30,
                     "the majority running the shovel")  # fmt: skip
    # the node cut off runs nothing: it sees no member running the shovel
    cluster.wait_for(lambda: [s["node"] for s in shovels(cluster[runner])] == [""], 10, "the cut node stopped it")
    conn = BlockingConnection(url(others[0]), timeout=30)
    conn.create_sender("/queues/cut-src").send(Message(body="after the cut", durable=True))
    receiver = conn.create_receiver("/queues/cut-dst", credit=1)
    assert receiver.receive(timeout=30).body == "after the cut"
    receiver.accept()
    conn.close()
    cluster.heal()
