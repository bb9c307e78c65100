"""The Show fixture: clusters of `warren server` processes on loopback.

    def test_x(cluster):                 # 3 nodes, started, a leader elected
        i = cluster.leader()             # index of the node that leads
        cluster.put(i, "k", "v")         # a key-value write through node i
        cluster.kill9(i); cluster.restart(i)
        cluster.partition(i); cluster.heal()

Every node gets its ports (AMQP, HTTP, cluster) picked up front, so that the
seeds can be wired and a restarted node comes back at the same address; its
data dir is under tmp_path and its output goes to <tmp_path>/nN.log (shown
when a wait fails). Nodes run with --enable-test-faults: `partition(i)` asks
node i to cut itself off from every other member and each of those to drop
node i (the transport's partition switch, both ways), `heal()` undoes it.
Readiness is judged over the HTTP API: every running node reports the same
leader through /api/cluster, and that leader reports itself as leading.

Each node started as a process here runs 2 workers (issue 36: CI runs the
cluster tests with 2 workers per node, the rest of the suite with one): a
supervisor, worker 0 (the node's Raft voter and cluster endpoint) and worker 1.
`WARREN_CLUSTER_WORKERS=1` runs them with one; a test may set its own
(`ClusterProcesses.node_env`). The nodes run in-process stay one process.
"""

from __future__ import annotations

import os

import pytest
from cluster_procs import ClusterProcesses  # tests/support/

WORKERS = os.environ.get("WARREN_CLUSTER_WORKERS", "2")
_before = pytest.StashKey[str | None]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item.stash[_before] = os.environ.get("WARREN_WORKERS")
    os.environ["WARREN_WORKERS"] = WORKERS  # read by the nodes each test (or its module's fixture) starts


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item):
    before = item.stash.get(_before, None)
    if before is None:
        os.environ.pop("WARREN_WORKERS", None)
    else:
        os.environ["WARREN_WORKERS"] = before




@pytest.fixture
def cluster_factory(tmp_path):
    made: list[ClusterProcesses] = []

    def make(n: int = 3, **kw) -> ClusterProcesses:
        c = ClusterProcesses(tmp_path / f"cluster{len(made)}", n, **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


@pytest.fixture
def cluster(cluster_factory) -> ClusterProcesses:
    """Three nodes, started, with an agreed leader."""
    c = cluster_factory(3)
    c.election_seconds = c.start()
    return c
