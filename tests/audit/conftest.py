"""Fixtures of the audit tests: one SparkSession for the whole session (local[2],
2 shuffle partitions, no UI), and the generated snapshot sets with both jobs run
on them once.

Java: when `java -version` fails the fixture runs scripts/ensure-java.sh
(apt-get install openjdk-17-jre-headless); when Java still cannot run, the Spark
tests are skipped with a loud message, or fail when WARREN_REQUIRE_SPARK=1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

# snapgen.py, next to this file, is importable by the tests
# (--import-mode=importlib does not put test directories on sys.path)
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

import snapgen  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _java_ok() -> bool:
    try:
        return subprocess.run(["java", "-version"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _no_spark(why: str) -> None:
    banner = "!" * 78
    msg = f"\n{banner}\n!!! THE SPARK AUDIT TESTS DO NOT RUN: {why}\n{banner}\n"
    sys.stderr.write(msg)
    if os.environ.get("WARREN_REQUIRE_SPARK") == "1":
        pytest.fail(msg)
    pytest.skip(msg)


TEST_CONF = {
    "spark.driver.memory": "1g",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.adaptive.enabled": "false",
    "spark.default.parallelism": "2",
}


@pytest.fixture(scope="session")
def spark():
    try:
        import pyspark  # noqa: F401
    except ImportError:
        _no_spark("pyspark is not installed (pip install -e '.[test]')")
    if not _java_ok():
        script = ROOT / "scripts" / "ensure-java.sh"
        done = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=900)
        if done.returncode != 0 or not _java_ok():
            _no_spark(f"no Java, and {script.name} could not install it:\n{done.stderr[-2000:]}")
    from audit.spark import session

    # Tiny data, many short queries: the JVM's C2 compiler and Spark's code generation
    # cost more than they save here (measured: 3x less JVM CPU for the same tests).
    s = session("local[2]", app="warren-audit-tests", shuffle_partitions=1, ui=False, conf=TEST_CONF)
    yield s
    s.stop()


class Audited:
    """A generated snapshot set and both jobs' tables, all collected (lists of dicts)."""

    def __init__(self, spark, scenario: snapgen.Scenario, root: Path, extra: dict | None = None) -> None:
        from audit import metrics, partitions, versions
        from audit.spark import load, rows

        t0 = time.monotonic()
        self.root = root
        self.scenario = scenario
        self.written = snapgen.generate(scenario, root)
        for rel, text in (extra or {}).items():
            (root / rel).write_text(text)
        self.snap = load(spark, str(root))
        self.tables = {**partitions.analyse(self.snap), **metrics.analyse(self.snap), **versions.analyse(self.snap)}
        # every table, a few queries at a time: Spark runs concurrent jobs, and planning
        # (most of the time with data this small) is per query
        with ThreadPoolExecutor(3) as pool:
            got = pool.map(lambda name: (name, rows(self.tables[name])), list(self.tables))
            self._rows = dict(got)
        self.seconds = time.monotonic() - t0

    def __getitem__(self, name: str) -> list[dict]:
        return self._rows[name]


def _faulty(spark, tmp_path_factory) -> Audited:
    newer = json.dumps({"schema_version": 2, "node": "n1", "wall_ms": snapgen.ms(60) + 100, "seq": 0, "groups": [],
                        "queues": []})  # fmt: skip
    return Audited(spark, snapgen.faulty(), tmp_path_factory.mktemp("faulty"),
                   {"n1/snapshots/snapshots-999.ndjson": newer + "\n"})  # fmt: skip


@pytest.fixture(scope="session")
def audited(spark, tmp_path_factory):
    """Both sets, audited side by side (the machine has cores to spare while Spark plans)."""
    with ThreadPoolExecutor(2) as pool:
        f = pool.submit(_faulty, spark, tmp_path_factory)
        h = pool.submit(Audited, spark, snapgen.healthy(), tmp_path_factory.mktemp("healthy"))
        sets = {"faulty": f.result(), "healthy": h.result()}
    yield sets
    for a in sets.values():
        a.snap.unpersist()


@pytest.fixture(scope="session")
def faulty(audited):
    return audited["faulty"]


@pytest.fixture(scope="session")
def healthy(audited):
    return audited["healthy"]
