"""The Spark side shared by the jobs: the session, and the snapshot files read,
checked and aligned on windows of the snapshot period.

A record belongs to window floor(wall_ms / period_ms), its `wall_ms` read on the
node's timeline: the wall time of its boot's first record plus the monotonic
time since (`mono_ms`), so a wall clock stepped during a boot moves none of its
records (as node/ops/audit_timeline.py reads them). Windows line the nodes'
records up by wall clock, so the audit assumes clocks agree to well within one
period at each boot (NTP does). When a node wrote two records in one window (its timer
drifted) the later one counts; a window a node skipped is covered by its
previous record for up to `stale_windows` windows (partitions job), after
which the node is "silent".
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import zipfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from audit.schema import SCHEMA_VERSION
from audit.spark_schema import CORRUPT, record_schema

DEFAULT_PERIOD_MS = 5000


class AuditError(Exception):
    """The input cannot be audited (no files, nothing readable); the message says why."""


def session(master: str | None = None, app: str = "warren-audit", shuffle_partitions: int | None = None,
            ui: bool | None = None, log_level: str = "ERROR", conf: dict[str, str] | None = None) -> SparkSession:  # fmt: skip
    """A SparkSession for the audit: the active one if there is one, else a new one
    on `master` (None: SPARK_MASTER, else local[*]). Off a local master the `audit`
    package is shipped to the executors (the per-window graph runs there)."""
    active = SparkSession.getActiveSession()
    if active is not None:  # one session per process: a caller's (a test's, a notebook's) is used as it is
        return active
    master = master or os.environ.get("SPARK_MASTER") or "local[*]"
    local = master.startswith("local")
    builder = SparkSession.builder.appName(app).master(master)
    builder = builder.config("spark.sql.session.timeZone", "UTC")
    builder = builder.config("spark.ui.enabled", str(not local if ui is None else ui).lower())
    builder = builder.config("spark.ui.showConsoleProgress", "false")
    if shuffle_partitions is None and local:
        shuffle_partitions = max(2, 2 * (os.cpu_count() or 1))
    if shuffle_partitions is not None:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    conf = dict(conf or {})
    if local:  # many short queries: the JVM's C1 compiler alone costs a third of the CPU of C1 + C2 (measured)
        conf.setdefault("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    if not local:
        _ship_package(spark)
    return spark


def _ship_package(spark: SparkSession) -> None:
    """Zip audit/ (stdlib and pyspark only: no part of the node) for the executors' Python."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.path.join(tempfile.mkdtemp(prefix="warren-audit-"), "warren_audit.zip")
    with zipfile.ZipFile(path, "w") as z:
        for name in sorted(os.listdir(os.path.join(root, "audit"))):
            if name.endswith(".py"):
                z.write(os.path.join(root, "audit", name), f"audit/{name}")
    spark.sparkContext.addPyFile(path)


@dataclass
class Snapshots:
    """The snapshot records of a fleet, one per node and window (`records`), and what
    was learned reading them. Columns of `records`: every field of the schema, plus
    `window` (the window number; it starts at window * period_ms)."""

    spark: SparkSession
    records: DataFrame
    period_ms: int
    first_window: int
    last_window: int
    first_seen: dict[str, int]  # node -> its first window
    member_names: dict[str, str]  # member id -> node name
    lines: int = 0  # records read, good or not
    bad_lines: int = 0  # lines that are not JSON, or lack node/wall_ms
    newer_records: int = 0  # records of a schema version this audit does not know (skipped)
    source: str = ""
    _cached: list[DataFrame] = field(default_factory=list, repr=False)

    @property
    def nodes(self) -> list[str]:
        return sorted(self.first_seen)

    def name(self, col: Column | str) -> Column:
        """A member id column as node names (ids of nodes that never wrote a record stay ids)."""
        c = F.col(col) if isinstance(col, str) else col
        if not self.member_names:
            return c
        return F.coalesce(self._map()[c], c)

    def names(self, col: Column | str) -> Column:
        c = F.col(col) if isinstance(col, str) else col
        if not self.member_names:
            return F.coalesce(c, F.array().cast("array<string>"))
        m = self._map()
        return F.coalesce(F.transform(c, lambda x: F.coalesce(m[x], x)), F.array().cast("array<string>"))

    def _map(self) -> Column:
        return F.create_map(*[F.lit(x) for kv in sorted(self.member_names.items()) for x in kv])

    def cache(self, df: DataFrame) -> DataFrame:
        """Caches `df` until `unpersist()`."""
        df = df.cache()
        self._cached.append(df)
        return df

    def unpersist(self) -> None:
        for df in self._cached:
            with contextlib.suppress(Exception):
                df.unpersist()
        self._cached.clear()

    def window_start(self, col: Column | str) -> Column:
        c = F.col(col) if isinstance(col, str) else col
        return c * F.lit(self.period_ms)


def load(spark: SparkSession, paths: str | Sequence[str], period: float | None = None) -> Snapshots:
    """Reads every `*.ndjson` (or `.ndjson.gz`) file under `paths`, recursively, any
    number of nodes; `period` in seconds, default the most common interval_ms."""
    if isinstance(paths, str):
        paths = [paths]
    for p in paths:
        if "://" not in p and not os.path.exists(p):
            raise AuditError(f"{p}: no such file or directory")
    reader = (spark.read.schema(record_schema()).option("recursiveFileLookup", "true")
              .option("pathGlobFilter", "*.ndjson*").option("mode", "PERMISSIVE")
              .option("columnNameOfCorruptRecord", CORRUPT))  # fmt: skip
    try:
        raw = reader.json(list(paths))
    except Exception as e:  # Spark's AnalysisException for an unreadable location
        raise AuditError(f"cannot read snapshots from {', '.join(paths)}: {e}") from e
    raw = raw.cache()
    good_cond = F.col(CORRUPT).isNull() & F.col("node").isNotNull() & F.col("wall_ms").isNotNull()
    known = F.coalesce(F.col("schema_version"), F.lit(1)) <= SCHEMA_VERSION
    stats = raw.agg(
        F.count(F.lit(1)).alias("lines"),
        F.sum(F.when(~good_cond, 1).otherwise(0)).alias("bad"),
        F.sum(F.when(good_cond & ~known, 1).otherwise(0)).alias("newer"),
        F.mode(F.when(good_cond & known, F.col("interval_ms"))).alias("interval_ms"),
    ).first()
    lines = int(stats["lines"] or 0)
    if period is not None:
        if period <= 0:
            raise AuditError("--period must be positive")
        period_ms = int(round(period * 1000))
    else:
        period_ms = int(stats["interval_ms"] or DEFAULT_PERIOD_MS)
    window = F.floor(F.col("wall_ms") / F.lit(period_ms)).cast("long").alias("window")
    w = Window.partitionBy("node", "window").orderBy(F.desc("wall_ms"), F.desc_nulls_last("seq"))
    fields = [c for c in raw.columns if c != CORRUPT]
    good = raw.where(good_cond & known).withColumn("wall_ms", _timeline()).select(*fields, window)
    records = good.select("*", F.row_number().over(w).alias("_rn")).where("_rn = 1").select(*fields, "window").cache()
    per_node = records.groupBy("node").agg(
        F.min("window").alias("first"), F.max("window").alias("last"),
        F.collect_set("member_id").alias("ids")).collect()  # fmt: skip
    if not per_node:
        raw.unpersist()
        records.unpersist()
        raise AuditError(f"no readable snapshot records under {', '.join(paths)} ({lines} lines read)")
    member_names = {mid: r["node"] for r in sorted(per_node, key=lambda r: r["node"]) for mid in r["ids"] if mid}
    snap = Snapshots(spark, records, period_ms,
                     first_window=min(r["first"] for r in per_node), last_window=max(r["last"] for r in per_node),
                     first_seen={r["node"]: int(r["first"]) for r in per_node}, member_names=member_names,
                     lines=lines, bad_lines=int(stats["bad"] or 0), newer_records=int(stats["newer"] or 0),
                     source=", ".join(paths))  # fmt: skip
    snap._cached += [raw, records]
    return snap


def _timeline() -> Column:
    """A record's time on its node's timeline: the wall time of the boot's first record plus
    the monotonic time since. A wall clock stepped during a boot (NTP, an operator, a VM
    restored) would otherwise land its records in windows they were not written in, and
    divide the rates across the step by the step; a record without `mono_ms` keeps its own."""
    boot = Window.partitionBy("node", "boot_id").orderBy("mono_ms")
    steady = F.col("mono_ms").isNotNull() & F.col("boot_id").isNotNull()
    since_boot = F.col("mono_ms") - F.first("mono_ms").over(boot)
    return F.when(steady, F.first("wall_ms").over(boot) + since_boot).otherwise(F.col("wall_ms"))


def write_tables(tables: dict[str, DataFrame], out: str, mode: str = "overwrite", parallel: int = 4) -> dict[str, str]:
    """Writes each table as Parquet under `out/<name>`, `parallel` jobs at a time (Spark
    runs them side by side: most tables are small); returns name -> path."""
    paths = {name: os.path.join(out, name) if "://" not in out else f"{out.rstrip('/')}/{name}" for name in tables}
    with ThreadPoolExecutor(max(1, parallel)) as pool:
        for f in [pool.submit(lambda n=name: tables[n].write.mode(mode).parquet(paths[n])) for name in tables]:
            f.result()
    return paths


def rows(df: DataFrame, order: Sequence[str] | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """A small table as a list of dicts (driver side)."""
    if order:
        df = df.orderBy(*order)
    if limit is not None:
        df = df.limit(limit)
    return [r.asDict(recursive=True) for r in df.collect()]
