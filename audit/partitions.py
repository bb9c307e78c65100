"""The partitions job: who reached whom, window by window, and what the Raft groups did.

Tables (each a DataFrame; times are Unix ms, an interval is [start_ms, end_ms)):

  windows        one row per window: components (node lists), n_components, partitioned,
                 silent (nodes seen before that did not report), asymmetric pairs, nodes present,
                 bridged pairs
  topology       consecutive windows with the same components and silent nodes, merged
  partitions     the topology intervals with more than one component
  asymmetries    intervals during which `src` reported reaching `dst` and not the reverse
  bridged_cuts   intervals during which `a` and `b`, in one component, reached each other neither
                 way: a partition bridged by a node that reaches both sides
  leaders        per Raft group, intervals of one leader (null: nobody claimed leadership)
  leaderless     the `leaders` intervals without a leader, with their duration
  leader_changes per group, the windows where the leader differs from the previous one seen
  terms          per group and term, the nodes that claimed leadership (split_brain: more than one)
  split_brains   the terms with more than one leader, and when two claimed at once
  replica_lag    per group, window and follower: the leader's commit_index (interpolated to the
                 follower's record time) - the follower's last_applied
  lag_growth     runs of at least `lag_windows` windows in which a follower's lag grew every
                 window and was above `lag_floor` entries

The per-window graph runs in a Python UDF on the workers (audit/graph.py, union-find).
"""

from __future__ import annotations

import functools

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from audit import graph
from audit.spark import Snapshots

STALE_WINDOWS = 1
LAG_WINDOWS = 6
LAG_FLOOR = 10  # entries: a lag this small is noise, never the start of a growth

_GRAPH_TYPE = T.StructType([
    T.StructField("components", T.ArrayType(T.ArrayType(T.StringType()))),
    T.StructField("asymmetric", T.ArrayType(T.ArrayType(T.StringType()))),
    T.StructField("silent", T.ArrayType(T.StringType())),
    T.StructField("present", T.ArrayType(T.StringType())),
    T.StructField("bridged", T.ArrayType(T.ArrayType(T.StringType()))),
])  # fmt: skip


def covered(snap: Snapshots, stale_windows: int = STALE_WINDOWS) -> DataFrame:
    """Each node's record for every window it covers: its own, and up to `stale_windows`
    following ones it skipped (column `w`; `carried` when the record is from before w)."""
    by_node = Window.partitionBy("node").orderBy("window")
    last = F.least(F.lead("window").over(by_node) - 1, F.col("window") + stale_windows, F.lit(snap.last_window))
    df = snap.records.select("*", last.alias("_last"))
    df = df.select(*snap.records.columns, F.explode(F.sequence(F.col("window"), F.col("_last"))).alias("w"))
    return df.select("*", (F.col("w") != F.col("window")).alias("carried"))


def _intervals(df: DataFrame, keys: list[str], snap: Snapshots, aggs: list) -> DataFrame:
    """Gaps and islands: rows of consecutive `w` with equal `keys` merged into one
    interval [start_ms, end_ms) with `windows` and the extra aggregates."""
    order = Window.partitionBy(*keys).orderBy("w")
    df = df.select("*", (F.col("w") - F.row_number().over(order)).alias("_island"))
    out = df.groupBy(*keys, "_island").agg(F.min("w").alias("_first"), F.max("w").alias("_lastw"), *aggs)
    return out.select(*keys, *[a for a in out.columns if a not in (*keys, "_island", "_first", "_lastw")],
                      snap.window_start("_first").alias("start_ms"), snap.window_start(F.col("_lastw") + 1).alias("end_ms"),
                      (F.col("_lastw") - F.col("_first") + 1).cast("long").alias("windows"))  # fmt: skip


def analyse(snap: Snapshots, stale_windows: int = STALE_WINDOWS, lag_windows: int = LAG_WINDOWS,
            lag_floor: int = LAG_FLOOR) -> dict[str, DataFrame]:
    cov = snap.cache(covered(snap, stale_windows))
    tables: dict[str, DataFrame] = {}

    # ---- reachability, window by window
    reach_ids = F.array_distinct(F.flatten(F.coalesce(F.transform("groups", lambda g: F.coalesce(
        g["reachable"], F.array().cast("array<string>"))), F.array().cast("array<array<string>>"))))  # fmt: skip
    nodes = cov.select("w", "node", snap.names(reach_ids).alias("reach"), "carried")
    udf = F.udf(functools.partial(graph.window_row, first_seen=dict(snap.first_seen)), _GRAPH_TYPE)
    per_w = nodes.groupBy("w").agg(F.collect_list(F.struct("node", "reach", "carried")).alias("reports"))
    per_w = per_w.select("w", udf(F.col("w"), F.col("reports")).alias("g"))
    windows = per_w.select(
        "w", snap.window_start("w").alias("start_ms"), snap.window_start(F.col("w") + 1).alias("end_ms"),
        F.col("g.components").alias("components"), F.size("g.components").alias("n_components"),
        (F.size("g.components") > 1).alias("partitioned"), F.col("g.silent").alias("silent"),
        F.col("g.asymmetric").alias("asymmetric"), F.col("g.present").alias("present"),
        F.col("g.bridged").alias("bridged"))  # fmt: skip
    windows = snap.cache(windows)
    tables["windows"] = windows

    sig = F.concat_ws("#", F.concat_ws("|", F.transform("components", lambda c: F.concat_ws(",", c))),
                      F.concat_ws(",", "silent"))  # fmt: skip
    topo = _intervals(windows.select("w", "components", "silent", "n_components", sig.alias("_sig")), ["_sig"], snap,
                      [F.first("components").alias("components"), F.first("silent").alias("silent"),
                       F.first("n_components").alias("n_components")])  # fmt: skip
    topo = topo.select("start_ms", "end_ms", "windows", "n_components", (F.col("n_components") > 1).alias("partitioned"),
                       "components", "silent")  # fmt: skip
    tables["topology"] = topo
    tables["partitions"] = topo.where("partitioned")

    asym = windows.select("w", F.explode("asymmetric").alias("p")).select(
        "w", F.col("p")[0].alias("src"), F.col("p")[1].alias("dst"))
    tables["asymmetries"] = _intervals(asym, ["src", "dst"], snap, [])
    cut = windows.select("w", F.explode("bridged").alias("p")).select("w", F.col("p")[0].alias("a"),
                                                                      F.col("p")[1].alias("b"))  # fmt: skip
    tables["bridged_cuts"] = _intervals(cut, ["a", "b"], snap, [])

    # ---- Raft groups, from the records of the nodes present in each window
    present = windows.select("w", F.explode("present").alias("node"))
    g = cov.join(present, ["w", "node"]).select("w", "node", "carried", "wall_ms", F.explode("groups").alias("g")).select(
        "w", "node", "carried", "wall_ms", F.col("g.name").alias("group"), F.col("g.role").alias("role"),
        F.col("g.term").alias("term"), snap.name(F.col("g.leader")).alias("follows"),
        F.col("g.commit_index").alias("commit_index"), F.col("g.last_applied").alias("last_applied"))  # fmt: skip
    g = snap.cache(g)
    is_leader = F.col("role") == "leader"

    claims = g.where(is_leader & ~F.col("carried"))
    terms = claims.groupBy("group", "term").agg(
        F.array_sort(F.collect_set("node")).alias("leaders"), F.min("wall_ms").alias("first_ms"),
        F.max("wall_ms").alias("last_ms"))
    terms = terms.select("*", (F.size("leaders") > 1).alias("split_brain"))  # fmt: skip
    tables["terms"] = terms
    both = (claims.groupBy("group", "term", "w").agg(F.countDistinct("node").alias("n")).where("n > 1")
            .groupBy("group", "term").agg(snap.window_start(F.min("w")).alias("overlap_start_ms"),
                                          snap.window_start(F.max("w") + 1).alias("overlap_end_ms"),
                                          F.count(F.lit(1)).alias("overlap_windows")))  # fmt: skip
    tables["split_brains"] = terms.where("split_brain").drop("split_brain").join(both, ["group", "term"], "left")

    # the leader of a window: the claimant of the highest term (then the greatest name)
    timeline = g.groupBy("group", "w").agg(
        F.max(F.when(is_leader, F.struct("term", "node"))).alias("top"),
        F.countDistinct(F.when(is_leader, F.col("node"))).alias("claimants"),
        F.count(F.lit(1)).alias("reporting"),
    ).select("group", "w", F.col("top.node").alias("leader"), F.col("top.term").alias("term"), "claimants",
             "reporting")  # fmt: skip
    timeline = snap.cache(timeline)
    leaders = _intervals(timeline, ["group", "leader"], snap,
                         [F.min("term").alias("term_first"), F.max("term").alias("term_last"),
                          F.max("claimants").alias("max_claimants")])  # fmt: skip
    tables["leaders"] = leaders
    tables["leaderless"] = leaders.where(F.col("leader").isNull()).select(
        "group", "start_ms", "end_ms", "windows", (F.col("end_ms") - F.col("start_ms")).alias("duration_ms"))

    by_group = Window.partitionBy("group").orderBy("w")
    seen = timeline.where(F.col("leader").isNotNull())
    seen = seen.select("*", F.lag("leader").over(by_group).alias("from_leader"),
                       F.lag("term").over(by_group).alias("from_term"))
    tables["leader_changes"] = seen.where(F.col("from_leader").isNotNull() & (F.col("from_leader") != F.col("leader")))\
        .select("group", snap.window_start("w").alias("at_ms"), "from_leader", "from_term",
                F.col("leader").alias("to_leader"), F.col("term").alias("to_term"))  # fmt: skip

    # ---- replica lag: the leader's commit index at the follower's record time (interpolated
    # between the leader's records of adjacent windows: the nodes' records are seconds apart)
    by_group_w = Window.partitionBy("group").orderBy("w")
    lt = g.where(~F.col("carried")).join(timeline.select("group", "w", "leader"), ["group", "w"]).where(
        F.col("node") == F.col("leader")).select("group", "w", "leader", F.col("wall_ms").alias("lt"),
                                                 F.col("commit_index").alias("lc"))  # fmt: skip
    adjacent_prev = F.lag("w").over(by_group_w) == F.col("w") - 1
    adjacent_next = F.lead("w").over(by_group_w) == F.col("w") + 1
    lt = lt.select("*", F.when(adjacent_prev, F.lag("lt").over(by_group_w)).alias("plt"),
                   F.when(adjacent_prev, F.lag("lc").over(by_group_w)).alias("plc"),
                   F.when(adjacent_next, F.lead("lt").over(by_group_w)).alias("nlt"),
                   F.when(adjacent_next, F.lead("lc").over(by_group_w)).alias("nlc"))  # fmt: skip
    ft = F.col("wall_ms")
    commit_at = (F.when((ft <= F.col("lt")) & (F.col("plt") < F.col("lt")),
                        F.col("plc") + (F.col("lc") - F.col("plc")) * (ft - F.col("plt")) / (F.col("lt") - F.col("plt")))
                 .when((ft > F.col("lt")) & (F.col("nlt") > F.col("lt")),
                       F.col("lc") + (F.col("nlc") - F.col("lc")) * (ft - F.col("lt")) / (F.col("nlt") - F.col("lt")))
                 .otherwise(F.col("lc")))  # fmt: skip
    lag = g.where(~F.col("carried")).join(lt, ["group", "w"]).where(F.col("node") != F.col("leader")).select(
        "group", "w", snap.window_start("w").alias("at_ms"), "leader", F.col("node").alias("follower"),
        F.round(commit_at).cast("long").alias("leader_commit"), "last_applied",
        (F.round(commit_at).cast("long") - F.col("last_applied")).alias("lag")).where(F.col("lag").isNotNull())
    lag = snap.cache(lag)
    tables["replica_lag"] = lag

    by_follower = Window.partitionBy("group", "follower").orderBy("w")
    grow = lag.select("*", F.lag("w").over(by_follower).alias("prev_w"), F.lag("lag").over(by_follower).alias("prev_lag"))
    grow = grow.where((F.col("prev_w") == F.col("w") - 1) & (F.col("lag") > F.col("prev_lag"))
                      & (F.col("lag") > lag_floor))  # fmt: skip
    runs = _intervals(grow, ["group", "follower"], snap,
                      [F.min("prev_lag").alias("lag_from"), F.max("lag").alias("lag_to")])  # fmt: skip
    tables["lag_growth"] = runs.where(F.col("windows") >= lag_windows)
    return tables
