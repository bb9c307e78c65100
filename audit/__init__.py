"""The Spark audit of cluster-state snapshots (docs/audit.md).

    warren audit partitions|metrics|versions|report --snapshots DIR [--out DIR] [--master local[*]] [--period 5]

Modules: `spark` (session, loading and aligning the snapshot files),
`partitions` (reachability graph, partitions, Raft leaders and lag),
`metrics` (queue conservation, rates and anomalies), `versions` (each node's
version over time, mixed-version windows, feature flag enablement), `report`
(one HTML file),
`svg` (the charts, by hand), `graph` (union-find, stdlib only: it runs on the
Spark workers), `cli` (the subcommands). pyspark is imported only by `spark`,
`partitions`, `metrics`, `versions` and `report`'s Spark side, so the broker never needs it.
"""
