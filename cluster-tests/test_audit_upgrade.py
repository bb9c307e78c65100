"""The Spark audit of a real rolling upgrade, on a real standalone Spark cluster.

Three `warren server` processes of the previous release (a git worktree of the release
releases.py finds, as test_upgrade.py does: a v* tag, else the record RELEASES; or
WARREN_AUDIT_UPGRADE_FROM=<tag or commit>; a release that cannot be found fails the test) write
snapshots every PERIOD seconds. They are replaced one at a time by this checkout on the
same data directories, with messages published to a quorum and a classic queue before
and after every step. Once every node runs this checkout, the flags it adds are enabled,
the queues are drained (every message must come back), `warren ctl export_snapshots`
gathers the snapshots into one directory, and `warren audit report --master spark://...`
runs against a standalone Spark master with two workers (tests/support/spark_standalone.py).

The report must show each node's two versions in order, one mixed-version window from the
first replaced node's return to the last one's, each flag enabled after that window, and
no message lost. A flag new in this checkout is simulated as test_upgrade.py does (the old
nodes run with WARREN_TEST_UNSUPPORTED_FLAGS=topic_permissions); flags this checkout
really adds over the old release are enabled too. No docker: the nodes are local processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cluster_procs import REPO, ClusterProcesses
from proton import Message
from proton.utils import BlockingConnection
from releases import RECORD_FILE, ReleaseRecordError, previous_release
from spark_standalone import conf_args, java_problem, spark_standalone
from upgrade_run import TABLES

from audit.schema import read_records

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

PERIOD = 0.5  # seconds between snapshot records: the windows of the audit
HELD_BACK = "topic_permissions"  # "new in this checkout": the old nodes say they lack it
QUEUES = {"audit-qq": "quorum", "audit-cq": "classic"}
BEFORE, PER_STEP = 50, 10


@pytest.fixture
def old_release(tmp_path: Path):
    """The previous release and a detached git worktree of it, removed afterwards."""
    override = os.environ.get("WARREN_AUDIT_UPGRADE_FROM")
    try:
        release = previous_release(REPO, env={"WARREN_UPGRADE_FROM": override} if override else {})
    except ReleaseRecordError as e:
        pytest.fail(f"step 1, finding the previous release: {e}")
    if release is None:
        pytest.fail(f"step 1, finding the previous release: no v* tag and no {RECORD_FILE} line names a release "
                    f"older than this checkout{f', and {override!r} is no commit' if override else ''}")  # fmt: skip
    print(f"upgrading from {release.version} ({release.sha[:12]}, found by {release.found_by})")
    where = tmp_path / "old-release"
    added = subprocess.run(["git", "worktree", "add", "--detach", str(where), release.sha], cwd=REPO,
                           capture_output=True, text=True)  # fmt: skip
    if added.returncode != 0:
        pytest.fail(f"step 2, checking out release {release.version} ({release.sha[:12]}): {added.stderr}")
    try:
        yield release, where
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(where)], cwd=REPO, capture_output=True)


@pytest.fixture
def java():
    try:
        import pyspark  # noqa: F401
    except ImportError:
        pytest.skip("pyspark is not installed (pip install -e '.[test]')")
    why = java_problem()
    if why is not None:
        message = f"\n{'!' * 78}\n!!! THE SPARK AUDIT OF AN UPGRADE DOES NOT RUN: {why}\n{'!' * 78}"
        print(message, file=sys.stderr)
        if os.environ.get("WARREN_REQUIRE_SPARK") == "1":
            pytest.fail(message)
        pytest.skip(message)


def publish(port: int, start: int, count: int) -> None:
    conn = BlockingConnection(f"amqp://guest:guest@127.0.0.1:{port}", timeout=30)
    try:
        for queue in QUEUES:
            sender = conn.create_sender(f"/queues/{queue}")
            for i in range(start, start + count):
                sender.send(Message(id=i, body=f"m{i}", durable=True))  # returns once accepted
            sender.close()
    finally:
        conn.close()


def drain(port: int, queue: str, expected: int) -> list[int]:
    conn = BlockingConnection(f"amqp://guest:guest@127.0.0.1:{port}", timeout=30)
    try:
        receiver = conn.create_receiver(f"/queues/{queue}", credit=50)
        got = []
        for _ in range(expected):
            got.append(receiver.receive(timeout=30).id)
            receiver.accept()
        return got
    finally:
        conn.close()


def last_record(cluster: ClusterProcesses, i: int) -> dict | None:
    got = read_records(str(cluster[i].data_dir / "snapshots"))
    return got[-1] if got else None


def flag_names(cluster: ClusterProcesses, i: int) -> set[str]:
    return {f["name"] for f in cluster[i].http("GET", "/api/feature_flags")}


def test_the_audit_shows_the_mixed_version_window_of_a_rolling_upgrade(old_release, java, tmp_path: Path):
    from node import __version__ as new_version

    release, old_code = old_release
    cluster = ClusterProcesses(tmp_path / "cluster", 3, env={"WARREN_SNAPSHOT_INTERVAL": str(PERIOD)})
    for i in range(3):
        cluster.code_dir[i] = old_code
        cluster.node_env[i] = {"WARREN_TEST_UNSUPPORTED_FLAGS": HELD_BACK}
    fleet = tmp_path / "fleet"
    started = time.monotonic()
    try:
        cluster.start(60)
        old_version = cluster[0].http("GET", "/api/overview")["product_version"]
        assert old_version != new_version, f"{release.sha} is this very version"
        old_flags = flag_names(cluster, 0)
        for queue, qtype in QUEUES.items():
            cluster[0].http("PUT", f"/api/queues/%2F/{queue}", {"durable": True, "arguments": {"x-queue-type": qtype}})
        publish(cluster[0].amqp_port, 0, BEFORE)
        sent = BEFORE
        for i in range(3):  # node 0 (the classic queue's home) first
            assert cluster.stop(i) == 0, cluster[i].log_tail()
            cluster.code_dir.pop(i)
            cluster.node_env.pop(i)
            cluster.spawn(i)
            cluster.wait_ready(60)
            cluster.wait_for(lambda i=i: (last_record(cluster, i) or {}).get("version") == new_version, 30,
                             f"a snapshot of node {i} on {new_version}")  # fmt: skip
            publish(cluster[i].amqp_port, sent, PER_STEP)
            sent += PER_STEP
        # every node runs this checkout: enable what it adds (the held-back flag, and any really new one)
        new_flags = {HELD_BACK} | (flag_names(cluster, 0) - old_flags)
        cluster.wait_for(lambda: not any(f.get("unsupported_by") for f in cluster[1].http("GET", "/api/feature_flags")
                                         if f["name"] in new_flags), 30, "every member supporting the new flags")
        for name in sorted(new_flags):
            cluster[1].http("PUT", f"/api/feature_flags/{name}/enable", {})
        cluster.wait_for(lambda: all(new_flags <= set((last_record(cluster, i) or {}).get("feature_flags", {})
                                                      .get("enabled", [])) for i in range(3)), 30,
                         "snapshots of every node with the new flags enabled")  # fmt: skip
        for queue in QUEUES:
            assert sorted(drain(cluster[2].amqp_port, queue, sent)) == list(range(sent)), queue
        done = cluster.ctl(2, "export_snapshots", str(fleet))
        assert done.returncode == 0, done.stderr
    finally:
        cluster.close()

    upgraded = time.monotonic()
    out = tmp_path / "audit-out"
    with spark_standalone(tmp_path / "spark", workers=2) as spark:
        spark_up = time.monotonic()
        cmd = [sys.executable, "-m", "node.cli", "audit", "report", "--snapshots", str(fleet), "--out", str(out),
               "--json", str(out / "report.json"), "--master", spark.master_url, "--shuffle-partitions", "2",
               *spark.driver_args(), *conf_args()]
        ran = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600,
                             env=dict(os.environ, PYTHONPATH=str(REPO), PYSPARK_PYTHON=sys.executable))  # fmt: skip
        assert ran.returncode == 0, f"{ran.stdout}\n{ran.stderr[-4000:]}\n{spark.logs()}"
        state = spark.state()
        audited = time.monotonic()
    print(ran.stdout)
    print(f"upgrade {upgraded - started:.1f} s, spark up {spark_up - upgraded:.1f} s, audit {audited - spark_up:.1f} s")
    TABLES.append(f"audited rolling upgrade {old_version} ({release.sha[:12]}, found by {release.found_by}) -> "
                  f"{new_version} in local processes: upgrade {upgraded - started:.0f}s, Spark audit "
                  f"{audited - spark_up:.0f}s")  # fmt: skip
    # it ran on the standalone cluster, with executors on both workers
    apps = [a["name"] for a in state["completedapps"] + state["activeapps"]]
    assert apps == ["warren-audit"], state
    for w in ("worker0", "worker1"):
        assert list((tmp_path / "spark" / w).glob("app-*/*/stderr")), f"no executor ran on {w}"

    report = json.loads((out / "report.json").read_text())
    tables, counts = report["tables"], report["counts"]
    nodes = [f"warren-{i}@localhost" for i in range(3)]
    runs = {n: [(r["version"], r["previous"]) for r in tables["versions"] if r["node"] == n] for n in nodes}
    assert runs == dict.fromkeys(nodes, [(old_version, None), (new_version, old_version)]), runs
    new_from = {r["node"]: r["start_ms"] for r in tables["versions"] if r["version"] == new_version}
    assert new_from[nodes[0]] < new_from[nodes[1]] < new_from[nodes[2]]  # replaced in that order
    # one mixed window: from the first node back on the new version to the last one
    mixed = tables["mixed_versions"]
    assert [(m["start_ms"], m["end_ms"], m["versions"]) for m in mixed] == [
        (new_from[nodes[0]], new_from[nodes[2]], sorted([old_version, new_version]))], mixed
    flags = {f["flag"]: f for f in tables["flags"]}
    for name in new_flags:
        f = flags[name]
        assert not f["from_start"] and f["versions"] == [new_version], f
        assert f["supported_ms"] >= mixed[0]["end_ms"] and f["enabled_ms"] >= f["supported_ms"], f
    on_from_start = [f for f in flags.values() if f["from_start"]]
    assert on_from_start and all(f["flag"] not in new_flags for f in on_from_start)
    assert counts["losses"] == 0, tables["losses"]
    assert "mixed_versions: 1" in ran.stdout and "losses: 0" in ran.stdout
    html = (out / "report.html").read_text()
    assert "Versions and feature flags" in html and f"feature flag {HELD_BACK} enabled" in html
