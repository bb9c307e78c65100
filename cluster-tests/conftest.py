"""pytest setup of the chaos suite: its modules on sys.path (pytest runs with
--import-mode=importlib), the `docker` marker, and the docker fixtures.

    .venv/bin/python -m pytest cluster-tests -m "not docker"   # the checker alone (fast)
    .venv/bin/python -m pytest cluster-tests                    # everything, docker included
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
for folder in (HERE, HERE.parent / "tests" / "support"):  # the harness and the shared HTTP helper
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from chaos_cluster import ComposeCluster, DockerUnavailable, prepare_docker  # noqa: E402
from chaos_history import History  # noqa: E402

TIMINGS: list[tuple[str, float]] = []  # (what, seconds), printed at the end of the session


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "docker: needs a Docker engine (scripts/ensure-docker.sh starts one)")
    config.addinivalue_line("markers", "faketime(nodes): these nodes of the `cluster` fixture run under libfaketime")
    config.addinivalue_line("markers", "workers(n): the `cluster` fixture's nodes run n worker processes each")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    from chaos_report import results_table
    from chaos_scenarios import REPORTS

    if REPORTS:
        terminalreporter.section("chaos results")
        terminalreporter.write_line(results_table(REPORTS))
    from upgrade_run import TABLES

    if TABLES:
        terminalreporter.section("rolling upgrades")
        for table in TABLES:
            terminalreporter.write_line(table + "\n")
    if TIMINGS:
        terminalreporter.section("chaos timings")
        for what, seconds in TIMINGS:
            terminalreporter.write_line(f"{seconds:7.1f}s  {what}")


@pytest.fixture(scope="session")
def docker_image() -> str:
    """The engine running (scripts/ensure-docker.sh), the base image (scripts/build-base-image.sh)
    and Warren's image built from this checkout; skips loudly only when no engine can run."""
    try:
        prepared = prepare_docker(source=os.environ.get("WARREN_CHAOS_SOURCE", "worktree"))
    except DockerUnavailable as e:
        message = f"\n{'!' * 78}\n!!! DOCKER ENGINE UNAVAILABLE: the chaos suite is SKIPPED\n!!! {e}\n{'!' * 78}"
        print(message, file=sys.stderr)
        pytest.skip(message)
    TIMINGS.extend(prepared.timings)
    return prepared.image


class ClusterPool:
    """One compose cluster at a time, handed from test to test while it is whole: every node
    running, none paused or cut off, one leader for all. A test that fails discards it, and
    WARREN_CHAOS_FRESH=1 gives every test a new one."""

    def __init__(self, image: str):
        self.image = image
        self.current: ComposeCluster | None = None
        self.fresh = os.environ.get("WARREN_CHAOS_FRESH") == "1"

    def get(self, name: str, artifacts: Path, faketime: frozenset[str] = frozenset(), workers: int = 1) -> ComposeCluster:
        """`faketime`: the nodes to run under libfaketime, for the clock faults; `workers`: each
        node's worker processes (a cluster with others is made anew rather than handed on)."""
        c = self.current
        if c is not None and not self.fresh and c.faketime == faketime and c.workers == workers and self._whole(c):
            c.history = History()
            c.artifacts = artifacts
            return c
        self.discard()
        started = time.monotonic()
        c = ComposeCluster(image=self.image, artifacts=artifacts, faketime=faketime, workers=workers)
        self.current = c
        c.up()
        TIMINGS.append((f"compose up until converged ({name})", time.monotonic() - started))
        return c

    @staticmethod
    def _whole(c: ComposeCluster) -> bool:
        try:
            if c.paused or c.partitions or any(c.state(n) != "running" for n in c.nodes):
                return False
            c.wait_converged(timeout=20)
            return True
        except Exception:
            return False

    def discard(self) -> None:
        if self.current is not None:
            started = time.monotonic()
            self.current.down()
            TIMINGS.append(("compose down -v", time.monotonic() - started))
            self.current = None


@pytest.fixture(scope="session")
def cluster_pool(docker_image: str):
    pool = ClusterPool(docker_image)
    yield pool
    pool.discard()


@pytest.fixture
def cluster(request: pytest.FixtureRequest, cluster_pool: ClusterPool, tmp_path: Path):
    """A converged three-node compose cluster with a fresh history (see ClusterPool); its
    logs and history are kept when the test fails, in tmp_path or, when it is set, in
    $WARREN_CHAOS_ARTIFACTS/<test> (pytest removes old tmp_paths)."""
    keep = os.environ.get("WARREN_CHAOS_ARTIFACTS")
    artifacts = Path(keep) / request.node.name if keep else tmp_path
    marker = request.node.get_closest_marker("faketime")
    workers = request.node.get_closest_marker("workers")
    c = cluster_pool.get(request.node.name, artifacts, faketime=frozenset(marker.args[0]) if marker else frozenset(),
                         workers=workers.args[0] if workers else 1)  # fmt: skip
    yield c
    failed = any(getattr(request.node, f"rep_{w}", None) is not None and getattr(request.node, f"rep_{w}").failed
                 for w in ("setup", "call"))  # fmt: skip
    if failed:
        c.save_artifacts()
        print(f"\n--- cluster logs (also in {artifacts}):\n{c.logs(tail=40)}", file=sys.stderr)
        cluster_pool.discard()
