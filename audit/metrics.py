"""The metrics job: per queue, window by window, conservation, rates and anomalies.

The queue's record of a window is the one its counters belong to (`leader` true):
for a quorum queue the leader's (its counters are replicated state, the same for
the whole cluster), for a classic queue its home node's. When two records claim
one window (a split brain) the one with the most publishes wins, then the first
node name. Within one counter epoch (until a counter goes down: a restart),

    missing       = published - rejected + recovered - (acknowledged + dead_lettered + dropped + depth)
    confirmed_gap = confirmed + recovered - (acknowledged + dead_lettered + dropped + depth)

`missing` is 0 while every message that entered the queue is either still in it
or left it counted; it grows by n when n messages vanish. `confirmed_gap` <= 0
says no *confirmed* message vanished (it is below 0 by the publishes not yet
confirmed, and the pre-settled ones). docs/audit.md states the conditions.

Tables:

  queue_windows    per queue and window: its record's node, depth, unacked, consumers,
                   counters, per-second rates (reset-aware), missing, confirmed_gap, epoch
  losses           windows where `missing` grew within an epoch: `lost` messages vanished;
                   confirmed_lost when the confirmed ones are short too
  counter_resets   per node and queue, records where a counter went down (which ones)
  restarts         per node, records with a new boot_id
  consumer_stops   runs of windows without consumers that began with consumers and in
                   which the depth rose above where it was
  backlog_growth   runs of at least `backlog_windows` windows in which the depth rose
                   every window while consumers were attached
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from audit.partitions import _intervals
from audit.schema import COUNTERS
from audit.spark import Snapshots

BACKLOG_WINDOWS = 12
RATES = ("published", "confirmed", "delivered", "acknowledged", "redelivered", "dead_lettered", "dropped")


def _any(cols: list[Column]) -> Column:
    return reduce(lambda a, b: a | b, cols)


def queue_rows(snap: Snapshots) -> DataFrame:
    """Every queue entry of every (deduplicated) record, flattened."""
    q = snap.records.select("node", "window", "wall_ms", "boot_id", F.explode("queues").alias("q"))
    return q.select(
        "node", F.col("window").alias("w"), "wall_ms", "boot_id", F.col("q.vhost").alias("vhost"),
        F.col("q.name").alias("queue"), F.col("q.type").alias("type"),
        F.coalesce(F.col("q.leader"), F.lit(True)).alias("leader"),
        *[F.coalesce(F.col(f"q.{c}"), F.lit(0)).alias(c) for c in ("depth", "unacked", "consumers")],
        *[F.coalesce(F.col(f"q.counters.{c}"), F.lit(0)).alias(c) for c in COUNTERS])  # fmt: skip


def analyse(snap: Snapshots, backlog_windows: int = BACKLOG_WINDOWS) -> dict[str, DataFrame]:
    q = snap.cache(queue_rows(snap))
    tables: dict[str, DataFrame] = {}

    # ---- every node's own sequence: resets and restarts
    own = Window.partitionBy("node", "vhost", "queue").orderBy("wall_ms")
    down = F.array_compact(F.array(*[F.when(F.col(c) < F.lag(c).over(own), F.lit(c)) for c in COUNTERS]))
    resets = q.select("node", "vhost", "queue", "type", snap.window_start("w").alias("at_ms"), "wall_ms",
                      down.alias("counters"))  # fmt: skip
    tables["counter_resets"] = resets.where(F.size("counters") > 0)
    per_node = Window.partitionBy("node").orderBy("wall_ms")
    r = snap.records.select("node", "window", "wall_ms", "boot_id",
                            F.lag("boot_id").over(per_node).alias("prev_boot"),
                            F.lag("wall_ms").over(per_node).alias("prev_wall"))  # fmt: skip
    tables["restarts"] = r.where(F.col("prev_boot").isNotNull() & (F.col("prev_boot") != F.col("boot_id"))).select(
        "node", snap.window_start("window").alias("at_ms"), "wall_ms", F.col("prev_boot").alias("from_boot"),
        F.col("boot_id").alias("to_boot"), (F.col("wall_ms") - F.col("prev_wall")).alias("silent_ms"))

    # ---- the queue's own record per window, and its sequence
    claim = Window.partitionBy("vhost", "queue", "w")
    pick = Window.partitionBy("vhost", "queue", "w").orderBy(F.desc("published"), F.asc("node"))
    a = q.where("leader").select("*", F.count(F.lit(1)).over(claim).alias("claimants"),
                                 F.row_number().over(pick).alias("_rn"))
    a = a.where("_rn = 1").drop("_rn", "leader", "boot_id")
    seq = Window.partitionBy("vhost", "queue").orderBy("w")
    a = a.select("*", *[F.lag(c).over(seq).alias(f"_p_{c}") for c in (*COUNTERS, "wall_ms", "depth", "consumers", "w")])
    reset = F.coalesce(_any([F.col(c) < F.col(f"_p_{c}") for c in COUNTERS]), F.lit(False))
    dt = (F.col("wall_ms") - F.col("_p_wall_ms")) / 1000.0
    out = F.col("acknowledged") + F.col("dead_lettered") + F.col("dropped") + F.col("depth")
    a = a.select("*", reset.alias("reset"),
                 (F.col("published") - F.col("rejected") + F.col("recovered") - out).alias("missing"),
                 (F.col("confirmed") + F.col("recovered") - out).alias("confirmed_gap"))  # fmt: skip
    rates = [F.when(dt > 0, F.when(F.col("reset"), F.col(c)).otherwise(F.col(c) - F.col(f"_p_{c}")) / dt).alias(
        f"{c}_rate") for c in RATES]  # fmt: skip
    a = a.select("*", *rates,
                 F.sum(F.col("reset").cast("int")).over(seq.rowsBetween(Window.unboundedPreceding, 0)).alias("epoch"),
                 F.lag("missing").over(seq).alias("_p_missing"))  # fmt: skip
    a = a.select("*", F.when(~F.col("reset") & (F.col("missing") > F.col("_p_missing")),
                             F.col("missing") - F.col("_p_missing")).alias("lost"))  # fmt: skip
    a = snap.cache(a)
    keep = ["vhost", "queue", "type", "node", "w", snap.window_start("w").alias("at_ms"), "wall_ms", "depth", "unacked",
            "consumers", *COUNTERS, *[f"{c}_rate" for c in RATES], "missing", "confirmed_gap", "epoch", "reset",
            "claimants"]  # fmt: skip
    tables["queue_windows"] = a.select(*keep)
    tables["losses"] = a.where(F.col("lost") > 0).select(
        "vhost", "queue", "type", "node", snap.window_start("w").alias("at_ms"), "wall_ms", "lost", "missing",
        "confirmed_gap", (F.col("confirmed_gap") > 0).alias("confirmed_lost"))

    # ---- consumers gone while the depth rises
    zero = F.col("consumers") == 0
    p_zero = F.col("_p_consumers") == 0
    a2 = a.select("vhost", "queue", "w", "depth", "_p_depth", zero.alias("_zero"), p_zero.alias("_p_zero"),
                  F.sum(F.when(p_zero.isNull() | (zero != p_zero), 1).otherwise(0)).over(
                      seq.rowsBetween(Window.unboundedPreceding, 0)).alias("_seg"))  # fmt: skip
    runs = a2.where("_zero").groupBy("vhost", "queue", "_seg").agg(
        F.min("w").alias("_first"), F.max("w").alias("_lastw"), F.count(F.lit(1)).alias("windows"),
        F.min_by("_p_zero", "w").alias("_from_zero"), F.min_by("_p_depth", "w").alias("depth_before"),
        F.max("depth").alias("depth_max"), F.max_by("depth", "w").alias("depth_last"))  # fmt: skip
    tables["consumer_stops"] = runs.where((F.col("_from_zero") == F.lit(False)) &
                                          (F.col("depth_max") > F.col("depth_before"))).select(
        "vhost", "queue", snap.window_start("_first").alias("start_ms"), snap.window_start(F.col("_lastw") + 1).alias(
            "end_ms"), "windows", "depth_before", "depth_max", "depth_last")  # fmt: skip

    # ---- depth rising every window with consumers attached
    rising = a.where((F.col("consumers") > 0) & (F.col("_p_w") == F.col("w") - 1) & (F.col("depth") > F.col("_p_depth")))
    runs = _intervals(rising, ["vhost", "queue"], snap,
                      [F.min("_p_depth").alias("depth_from"), F.max("depth").alias("depth_to")])  # fmt: skip
    tables["backlog_growth"] = runs.where(F.col("windows") >= backlog_windows)
    return tables
