"""Three `warren server` processes form one cluster (tests/node/cluster/conftest.py).

Election and membership agreement, writes through any node (read-your-writes
on the node that wrote), failover after kill -9 of the leader, a node cut off
from the other two (it refuses writes with NoQuorum while the majority goes
on, then converges), and a restart of every node (durable log + snapshots).
Times are printed (run with -s to see them).
"""

from __future__ import annotations

import json
import time

import pytest
from cluster_procs import HttpError

pytestmark = pytest.mark.slow


def test_three_nodes_elect_one_leader_and_agree_on_members(cluster):
    print(f"\nfirst election (3 processes spawned -> agreed leader): {cluster.election_seconds:.2f}s")
    leader = cluster.leader()
    statuses = cluster.statuses()
    ids = sorted(n.id for n in cluster.nodes)
    assert [s["role"] for s in statuses.values()].count("leader") == 1
    assert statuses[leader]["role"] == "leader"
    for i, s in statuses.items():
        assert s["node"] == cluster[i].id and s["node_name"] == f"warren-{i}@localhost"
        assert [m["node"] for m in s["members"]] == ids
        assert s["leader"] == cluster[leader].id
        assert s["term"] == statuses[leader]["term"]
        assert s["majority"] and s["reachable"] == 3 and s["failed"] is None
    # warren ctl cluster_status, for people and for scripts
    out = cluster.ctl(0, "cluster_status")
    assert out.returncode == 0, out.stderr
    assert f"leader {cluster[leader].id}" in out.stdout and "3 of 3 reachable, majority" in out.stdout
    assert json.loads(cluster.ctl(0, "cluster_status", "--json").stdout)["leader"] == cluster[leader].id
    # membership errors are answered, not crashed on
    out = cluster.ctl(0, "forget_cluster_node", "127.0.0.1:1")
    assert out.returncode != 0 and "not a member" in out.stderr


def test_a_write_through_any_node_is_visible_on_all(cluster):
    leader = cluster.leader()
    followers = [i for i in range(3) if i != leader]
    started = time.monotonic()
    for i in [leader, *followers]:
        assert cluster.put(i, f"k{i}", f"from-{i}")["version"] == 1
        # read-your-writes: the node that took the write has applied it when it answers
        assert cluster.get(i, f"k{i}") == {"key": f"k{i}", "value": f"from-{i}", "version": 1}
    print(f"\n3 writes (leader, 2 followers), each with a local read: {(time.monotonic() - started) * 1000:.0f} ms")
    expected = {f"k{i}": (f"from-{i}", 1) for i in range(3)}
    cluster.wait_for(lambda: all(cluster.kv(i) == expected for i in range(3)), 10, "every write on every node")
    # a second write to a key bumps its version; the same idempotency key applies once
    first = cluster.put(followers[0], "k0", "again", idempotency_key="op-1")["version"]
    assert first == 2
    assert cluster.put(followers[1], "k0", "again", idempotency_key="op-1")["version"] == 2
    for i in range(3):
        assert cluster.get(i, "k0", consistent=True) == {"key": "k0", "value": "again", "version": 2}


def test_kill9_of_the_leader_elects_a_new_one_and_writes_resume(cluster):
    old = cluster.leader()
    cluster.put(old, "before", "1")
    survivors = [i for i in range(3) if i != old]
    cluster.kill9(old)
    killed = time.monotonic()
    new = cluster.wait_ready(15, among=survivors)
    elected = time.monotonic() - killed
    assert new != old
    # writes resume through either survivor
    version = cluster.wait_for(lambda: _try_put(cluster, survivors[1], "after", "2"), 15, "a write after failover")
    resumed = time.monotonic() - killed
    print(f"\nkill -9 of the leader: new leader agreed after {elected:.2f}s, first write after {resumed:.2f}s")
    assert version == 1
    assert resumed < 10
    # the killed node comes back as a follower and catches up
    cluster.restart(old)
    cluster.wait_for(lambda: cluster.kv(old) == {"before": ("1", 1), "after": ("2", 1)}, 15, "the old leader caught up")
    assert cluster.statuses()[old]["role"] == "follower"


def _try_put(cluster, i: int, key: str, value: str) -> int | None:
    try:
        return cluster.put(i, key, value, idempotency_key=f"{key}-once", timeout=1.0)["version"]
    except HttpError as e:
        assert e.status == 503, e
        return None


def test_a_node_cut_off_refuses_writes_while_the_majority_goes_on(cluster):
    cut = cluster.leader()  # the hard case: a leader that does not know it lost its majority yet
    majority = [i for i in range(3) if i != cut]
    cluster.put(cut, "shared", "before")
    cluster.partition(cut)
    started = time.monotonic()
    with pytest.raises(HttpError) as refused:
        cluster.put(cut, "lost", "never", timeout=2.0)
    # it went into the cut leader's own log, so the answer promises nothing about its fate
    assert refused.value.status == 503
    assert refused.value.body["error"] == "cluster_unavailable", refused.value.body
    assert refused.value.body["reason"].endswith("(1 of 3 members reachable); the command was in flight and may"
                                                 " still be applied")  # fmt: skip
    assert cluster[cut].status()["majority"] is False
    new = cluster.wait_ready(15, among=majority)
    assert new in majority
    assert cluster.put(majority[0], "shared", "during")["version"] == 2
    assert cluster.put(majority[1], "only-majority", "x")["version"] == 1
    print(f"\npartition: majority leader agreed and wrote {time.monotonic() - started:.2f}s after the cut"
          " (including the minority's 2 s refusal)")  # fmt: skip
    assert cluster.get(cut, "shared") == {"key": "shared", "value": "before", "version": 1}  # stale, local
    cluster.heal()
    healed = time.monotonic()
    expected = {"shared": ("during", 2), "only-majority": ("x", 1)}
    cluster.wait_for(lambda: cluster.kv(cut) == expected, 15, "the cut node converged")
    print(f"partition healed: the cut node converged after {time.monotonic() - healed:.2f}s")
    cluster.wait_ready(15)
    assert cluster.put(cut, "after-heal", "y")["version"] == 1
    assert "lost" not in cluster.kv(cut)


def test_restarting_every_node_keeps_the_data(cluster_factory):
    # snapshots every 20 entries, so the restart loads snapshot + log tail
    c = cluster_factory(3, env={"WARREN_CLUSTER_SNAPSHOT_ENTRIES": "20"})
    c.start()
    for n in range(60):
        c.put(n % 3, f"key{n}", f"value{n}")
    c.put(0, "key0", "second")
    expected = {f"key{n}": (f"value{n}", 1) for n in range(60)}
    expected["key0"] = ("second", 2)
    c.wait_for(lambda: all(c.kv(i) == expected for i in range(3)), 15, "every write everywhere")
    for node in c.nodes:
        assert (node.data_dir / "cluster" / "metadata" / "snapshot").is_file(), "no snapshot was taken"
    for i in range(3):
        c.kill9(i)
    started = time.monotonic()
    for i in range(3):
        c.spawn(i)
    c.wait_ready(30)
    print(f"\nall three killed and restarted: leader agreed after {time.monotonic() - started:.2f}s")
    c.wait_for(lambda: all(c.kv(i) == expected for i in range(3)), 15, "the data back on every node")
    assert c.put(1, "key1", "third")["version"] == 2
    # a SIGTERM restart too (leadership is handed over on the way down)
    leader = c.leader()
    assert c.stop(leader) == 0
    c.restart(leader)
    assert c.get(leader, "key1", consistent=True)["value"] == "third"


def test_join_cluster_and_forget_cluster_node(cluster_factory):
    c = cluster_factory(3, seeded=False)  # three clusters of one
    for i in range(3):
        c.spawn(i)
    for i in range(3):
        c.wait_ready(30, among=[i])
    c.put(0, "kept", "on-0")
    c.put(2, "dropped", "on-2")  # node 2's own metadata goes when it joins
    started = time.monotonic()
    for i in (1, 2):
        out = c.ctl(i, "join_cluster", c[i - 1].id)  # node 2 joins through node 1, a follower by then
        assert out.returncode == 0, out.stderr
        assert f"Clustering node with {c[i - 1].id}" in out.stdout
    print(f"\ntwo join_cluster commands: {time.monotonic() - started:.2f}s")
    c.wait_ready(15)
    assert all(len(s["members"]) == 3 for s in c.statuses().values())
    c.wait_for(lambda: all(c.kv(i) == {"kept": ("on-0", 1)} for i in range(3)), 10, "the joined nodes caught up")
    assert c.put(2, "new", "via-2")["version"] == 1
    # a node already in a bigger cluster refuses to join another
    out = c.ctl(1, "join_cluster", "127.0.0.1:1")
    assert out.returncode != 0 and "already belongs to a cluster of 3" in out.stderr
    # forget a stopped member: the other two go on as a cluster of two
    gone = c.leader()
    assert c.stop(gone) == 0
    rest = [i for i in range(3) if i != gone]
    c.wait_ready(15, among=rest)
    out = c.ctl(rest[0], "forget_cluster_node", c[gone].id)
    assert out.returncode == 0, out.stderr
    for i in rest:
        c.wait_for(lambda i=i: len(c[i].status()["members"]) == 2, 10, "two members")
    assert c.put(rest[1], "after-forget", "x")["version"] == 1
