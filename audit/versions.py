"""The versions job: which Warren version every node ran over time, when the cluster ran
more than one (the mixed-version window of a rolling upgrade), and when each feature
flag was enabled.

A node's version in a window is the one of its latest record at or before it, from its
first record to its last: a node that is down (being replaced, say) still counts with
the version it last reported until it writes a record again, as it still counts as a
member with that version in the cluster's feature-flag view. After its last record a
node no longer counts (it left, or the snapshots end).

Tables (times are Unix ms, an interval is [start_ms, end_ms)):

  versions        per node, runs of records with one version: version, previous (the
                  version before, null for the first run), start_ms, end_ms, windows
                  (with a record), boots (distinct boot_ids)
  version_mix     consecutive windows with the same version on every node: versions
                  (distinct, sorted), n_versions, mixed, assignment ([{node, version}])
  mixed_versions  runs of windows in which the nodes ran more than one version, with
                  every version seen in the run
  flags           per feature flag seen (supported or enabled by any node):
                  supported_ms (first window every node supports it), enabled_ms (first
                  window a node reports it enabled: the snapshot period bounds when it
                  happened), enabled_by (the nodes reporting it then), everywhere_ms
                  (first window every node reports it enabled), versions (the versions
                  running when it was enabled), from_start (enabled in the snapshots'
                  first window: it may have been enabled before them)
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from audit.partitions import _intervals
from audit.spark import Snapshots


def _empty() -> Column:
    return F.array().cast("array<string>")  # a Column needs a running SparkContext: built per use


def node_windows(snap: Snapshots) -> DataFrame:
    """Every node's latest record for each window from its first record to its last
    (column `w`): node, version, supported, enabled."""
    by_node = Window.partitionBy("node").orderBy("window")
    until = F.coalesce(F.lead("window").over(by_node) - 1, F.col("window"))
    df = snap.records.select(
        "node", "window", until.alias("_until"), F.coalesce("version", F.lit("unknown")).alias("version"),
        F.coalesce("feature_flags.supported", _empty()).alias("supported"),
        F.coalesce("feature_flags.enabled", _empty()).alias("enabled"))  # fmt: skip
    return df.select("node", "version", "supported", "enabled",
                     F.explode(F.sequence(F.col("window"), F.col("_until"))).alias("w"))  # fmt: skip


def analyse(snap: Snapshots) -> dict[str, DataFrame]:
    tables: dict[str, DataFrame] = {}
    state = snap.cache(node_windows(snap))

    # ---- each node's runs of one version
    by_node = Window.partitionBy("node").orderBy("window")
    r = snap.records.select("node", "window", "boot_id", F.coalesce("version", F.lit("unknown")).alias("version"))
    r = r.select("*", F.lag("version").over(by_node).alias("_prev"))
    changed = F.when(F.col("_prev").isNull() | (F.col("_prev") != F.col("version")), 1).otherwise(0)
    r = r.select("*", F.sum(changed).over(by_node.rowsBetween(Window.unboundedPreceding, 0)).alias("_run"))
    runs = r.groupBy("node", "_run").agg(
        F.first("version").alias("version"), F.min_by("_prev", "window").alias("previous"),
        F.min("window").alias("_first"), F.max("window").alias("_lastw"), F.count(F.lit(1)).alias("windows"),
        F.countDistinct("boot_id").alias("boots"))  # fmt: skip
    tables["versions"] = runs.select(
        "node", "version", "previous", snap.window_start("_first").alias("start_ms"),
        snap.window_start(F.col("_lastw") + 1).alias("end_ms"), "windows", "boots")  # fmt: skip

    # ---- the versions of the whole cluster, window by window
    per_w = state.groupBy("w").agg(
        F.array_sort(F.collect_set("version")).alias("versions"),
        F.array_sort(F.collect_list(F.struct("node", "version"))).alias("assignment"),
        F.count(F.lit(1)).alias("nodes"))  # fmt: skip
    per_w = snap.cache(per_w)
    sig = F.concat_ws(",", F.transform("assignment", lambda a: F.concat_ws("=", a["node"], a["version"])))
    mix = _intervals(per_w.select("w", "versions", "assignment", sig.alias("_sig")), ["_sig"], snap,
                     [F.first("versions").alias("versions"), F.first("assignment").alias("assignment")])  # fmt: skip
    tables["version_mix"] = mix.select("start_ms", "end_ms", "windows", "versions",
                                       F.size("versions").alias("n_versions"),
                                       (F.size("versions") > 1).alias("mixed"), "assignment")  # fmt: skip
    mixed = per_w.where(F.size("versions") > 1).select("w", "versions", F.lit(1).alias("_k"))
    mixed = _intervals(mixed, ["_k"], snap, [F.array_sort(F.array_distinct(F.flatten(F.collect_list("versions"))))
                                              .alias("versions")])  # fmt: skip
    tables["mixed_versions"] = mixed.select("start_ms", "end_ms", "windows", "versions")

    # ---- feature flags: first enabled anywhere, everywhere, and supported everywhere
    own = snap.records.select("node", "window", F.explode(F.coalesce("feature_flags.enabled", _empty())).alias("flag"))
    first = own.groupBy("flag").agg(F.min("window").alias("_w"))
    by = own.join(first, "flag").where(F.col("window") == F.col("_w")).groupBy("flag").agg(
        F.array_sort(F.collect_set("node")).alias("enabled_by"))

    def everywhere(column: str, name: str) -> DataFrame:
        per = state.select("w", F.explode(column).alias("flag")).groupBy("flag", "w").agg(F.count(F.lit(1)).alias("n"))
        return per.join(per_w.select("w", "nodes"), "w").where(F.col("n") == F.col("nodes")).groupBy("flag").agg(
            F.min("w").alias(name))

    flags = (state.select(F.explode(F.array_union("supported", "enabled")).alias("flag")).distinct()
             .join(everywhere("supported", "_sw"), "flag", "left").join(first, "flag", "left")
             .join(by, "flag", "left").join(everywhere("enabled", "_ew"), "flag", "left")
             .join(per_w.select(F.col("w").alias("_w"), "versions"), "_w", "left"))  # fmt: skip
    tables["flags"] = flags.select(
        "flag", snap.window_start("_sw").alias("supported_ms"), snap.window_start("_w").alias("enabled_ms"),
        F.coalesce("enabled_by", _empty()).alias("enabled_by"), snap.window_start("_ew").alias("everywhere_ms"),
        F.coalesce("versions", _empty()).alias("versions"),
        F.coalesce(F.col("_w") == F.lit(snap.first_window), F.lit(False)).alias("from_start"))  # fmt: skip
    return tables
