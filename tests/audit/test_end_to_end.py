"""The audit on a real cluster: three `warren server` processes writing
snapshots every second, a quorum-queue workload, a partition of known start
and end, `warren ctl export_snapshots`, then both Spark jobs."""

from __future__ import annotations

import time

import pytest
from cluster_procs import ClusterProcesses
from proton import Message
from proton.utils import BlockingConnection

pytestmark = pytest.mark.slow

PERIOD = 1.0  # seconds between snapshot records


def test_the_audit_finds_the_partition_and_conservation_holds(spark, tmp_path):
    from audit import metrics, partitions
    from audit.spark import load, rows

    cluster = ClusterProcesses(tmp_path / "cluster", 3, env={"WARREN_SNAPSHOT_INTERVAL": str(PERIOD)})
    try:
        cluster.start()
        cluster[0].http("PUT", "/api/feature_flags/quorum_queue_v1/enable", {})
        cluster[0].http("PUT", "/api/queues/%2F/audited", {"durable": True, "arguments": {"x-queue-type": "quorum"}})
        conn = BlockingConnection(f"amqp://guest:guest@127.0.0.1:{cluster[0].amqp_port}", timeout=10)
        sender = conn.create_sender("/queues/audited")
        for i in range(60):
            sender.send(Message(id=i, body=f"m{i}", durable=True))
        conn.close()
        conn = BlockingConnection(f"amqp://guest:guest@127.0.0.1:{cluster[1].amqp_port}", timeout=10)
        receiver = conn.create_receiver("/queues/audited", credit=10)
        for _ in range(40):
            receiver.receive(timeout=10)
            receiver.accept()
        conn.close()
        time.sleep(3 * PERIOD)
        cut = cluster[2]
        started = time.time()
        cluster.partition(2)
        time.sleep(6 * PERIOD)
        cluster.heal()
        ended = time.time()
        cluster.wait_ready(20)
        time.sleep(3 * PERIOD)
        out = tmp_path / "exported"
        done = cluster.ctl(0, "export_snapshots", str(out))
        assert done.returncode == 0, done.stderr
    finally:
        cluster.close()

    snap = load(spark, str(out))
    tables = partitions.analyse(snap)
    found = rows(tables["partitions"], ["start_ms"], 100)
    assert found, "no partition found"
    name = f"warren-{cut.index}@localhost"  # records name nodes by node_name (cluster_procs.py)
    cut_off = [p for p in found if [name] in [list(c) for c in p["components"]]]
    assert cut_off, f"no partition isolating {name}: {found}"
    first, last = cut_off[0], cut_off[-1]
    slack = 2 * PERIOD * 1000  # one snapshot period each side, and the period a record may lag
    assert abs(first["start_ms"] - started * 1000) <= slack, (first, started)
    assert abs(last["end_ms"] - ended * 1000) <= slack, (last, ended)
    losses = rows(metrics.analyse(snap)["losses"], ["w"], 100)
    assert losses == [], losses
