"""`warren audit partitions|metrics|versions|report`: the Spark jobs from the command line.

    warren audit report --snapshots DIR [--snapshots DIR ...] [--out DIR] [--master local[*]] [--period 5]
                        [--conf KEY=VALUE ...] [--html FILE] [--json FILE] [--events FILE]

partitions, metrics and versions print a summary and, with --out, write their Parquet
tables under DIR/<job>/<table>; report runs all three, writes the tables and
DIR/report.html (the report is always written on the machine that runs the command,
the driver), and with --json the report's data as JSON. pyspark is imported only when
a subcommand runs.
Exit status: 0 done, 1 unreadable input, 2 pyspark or Java missing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from typing import Any

JOBS = {
    "partitions": "reachability, partitions, Raft leaders, split brains, replica lag",
    "metrics": "queue conservation (losses), rates, counter resets, stopped consumers, backlogs",
    "versions": "each node's version over time, mixed-version windows, when each feature flag was enabled",
    "report": "every job, their tables, and one self-contained HTML report",
}


def add_parser(sub: Any) -> None:
    audit = sub.add_parser("audit", help="audit cluster-state snapshots with Spark (docs/audit.md)")
    jobs = audit.add_subparsers(dest="audit_job", required=True)
    for name, what in JOBS.items():
        p = jobs.add_parser(name, help=what, description=what)
        p.add_argument("--snapshots", required=True, action="append", metavar="DIR",
                       help="a directory (read recursively) or file of snapshot .ndjson; repeatable; any Hadoop URL "
                            "Spark reads (hdfs://, s3a://)")  # fmt: skip
        p.add_argument("--out", default="audit-out" if name == "report" else None, metavar="DIR",
                       help="where the Parquet tables (and report.html) go" + (" (default audit-out)"
                                                                                if name == "report" else ""))  # fmt: skip
        p.add_argument("--master", default=None, help="Spark master: local[*] (default), spark://host:7077, yarn, ...")
        p.add_argument("--period", type=float, default=None,
                       help="snapshot period in seconds (default: the interval the records declare)")  # fmt: skip
        p.add_argument("--shuffle-partitions", type=int, default=None, help="spark.sql.shuffle.partitions")
        p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                       help="any Spark setting, repeatable (e.g. spark.executor.memory=4g, spark.hadoop.fs.s3a.*)")
        if name == "report":
            p.add_argument("--html", default=None, metavar="FILE",
                           help="where the report goes (default OUT/report.html; ./report.html when OUT is a URL)")
            p.add_argument("--json", default=None, metavar="FILE",
                           help="also write the report's data (every finding's first rows and counts) as JSON")
            p.add_argument("--events", default=None, metavar="FILE",
                           help="outside events to draw on the timeline (a test's faults): JSON lines of "
                                "start_ms, end_ms, label")  # fmt: skip
        p.set_defaults(func=run)


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        _say("warren audit needs pyspark: pip install 'warren[audit]' (pyspark==3.5.7)")
        return 2
    local = (args.master or os.environ.get("SPARK_MASTER") or "local").startswith("local")
    if local and not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        _say("warren audit: Spark needs Java 17 (no `java` on PATH, no JAVA_HOME): run scripts/ensure-java.sh")
        return 2
    from pyspark.sql import SparkSession

    from audit import metrics, partitions, report, versions
    from audit.spark import AuditError, load, session, write_tables

    started = time.monotonic()
    ours = SparkSession.getActiveSession() is None  # in a test, the session is the test's: leave it running
    conf = {}
    for kv in args.conf:
        key, sep, value = kv.partition("=")
        if not sep or not key:
            _say(f"warren audit: --conf {kv!r}: want KEY=VALUE")
            return 1
        conf[key.strip()] = value
    try:
        events = report.read_events(args.events) if getattr(args, "events", None) else []
    except (OSError, ValueError) as e:
        _say(f"warren audit: --events: {e}")
        return 1
    spark = session(args.master, shuffle_partitions=args.shuffle_partitions, conf=conf)
    snap = None
    try:
        try:
            snap = load(spark, args.snapshots, args.period)
        except AuditError as e:
            _say(f"warren audit: {e}")
            return 1
        _say(f"{snap.lines} records from {len(snap.nodes)} nodes, {snap.last_window - snap.first_window + 1} windows "
             f"of {snap.period_ms / 1000:g} s" + (f", {snap.bad_lines} unreadable lines" if snap.bad_lines else ""))
        job = args.audit_job
        ptables = partitions.analyse(snap) if job in ("partitions", "report") else {}
        mtables = metrics.analyse(snap) if job in ("metrics", "report") else {}
        vtables = versions.analyse(snap) if job in ("versions", "report") else {}
        if args.out:
            for name, tables in (("partitions", ptables), ("metrics", mtables), ("versions", vtables)):
                if tables:
                    write_tables(tables, _join(args.out, name))
        if job == "report":
            data = report.gather(snap, {**ptables, **mtables, **vtables})
            data["events"] = events
            path = args.html or ("report.html" if "://" in args.out else os.path.join(args.out, "report.html"))
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            report.write(path, report.render(data))
            print(path)
            if args.json:
                report.write_json(args.json, data)
                print(args.json)
            print(summarize_rows(data["tables"], data["counts"]))
        else:
            print(summarize({**ptables, **mtables, **vtables}))
        _say(f"done in {time.monotonic() - started:.1f} s" + (f"; tables under {args.out}" if args.out else ""))
        return 0
    finally:
        if snap is not None:
            snap.unpersist()
        if ours:
            spark.stop()


def _join(base: str, name: str) -> str:
    return f"{base.rstrip('/')}/{name}" if "://" in base else os.path.join(base, name)


SUMMARY = {  # table -> how one row reads
    "versions": lambda r: f"{_t(r['start_ms'])} – {_t(r['end_ms'])}  {r['node']}: {r['version']}",
    "mixed_versions": lambda r: f"{_t(r['start_ms'])} – {_t(r['end_ms'])}  {', '.join(r['versions'])}",
    "flags": lambda r: f"{r['flag']}: " + ("not enabled" if r["enabled_ms"] is None else
                                           ("enabled from the start" if r["from_start"] else
                                            f"enabled {_t(r['enabled_ms'])} on {', '.join(r['versions'])}")),
    "partitions": lambda r: f"{_t(r['start_ms'])} – {_t(r['end_ms'])}  "
                            + " | ".join("{" + ", ".join(c) + "}" for c in r["components"]),
    "asymmetries": lambda r: f"{_t(r['start_ms'])} – {_t(r['end_ms'])}  {r['src']} reaches {r['dst']}, not back",
    "bridged_cuts": lambda r: f"{_t(r['start_ms'])} – {_t(r['end_ms'])}  {r['a']} and {r['b']} apart, bridged",
    "split_brains": lambda r: f"{r['group']} term {r['term']}: {', '.join(r['leaders'])}",
    "leaderless": lambda r: f"{_t(r['start_ms'])} – {_t(r['end_ms'])}  {r['group']}",
    "leader_changes": lambda r: f"{_t(r['at_ms'])}  {r['group']}: {r['from_leader']} -> {r['to_leader']} "
                                f"(term {r['to_term']})",
    "lag_growth": lambda r: f"{_t(r['start_ms'])} – {_t(r['end_ms'])}  {r['group']} follower {r['follower']}: "
                            f"lag {r['lag_from']} -> {r['lag_to']}",
    "losses": lambda r: f"{_t(r['at_ms'])}  {r['vhost']} {r['queue']}: {r['lost']} lost"
                        + (" (confirmed ones)" if r["confirmed_lost"] else ""),
    "counter_resets": lambda r: f"{_t(r['at_ms'])}  {r['node']} {r['vhost']} {r['queue']}",
    "restarts": lambda r: f"{_t(r['at_ms'])}  {r['node']}",
    "consumer_stops": lambda r: f"{_t(r['start_ms'])} – {_t(r['end_ms'])}  {r['vhost']} {r['queue']}: depth "
                                f"{r['depth_before']} -> {r['depth_max']}",
    "backlog_growth": lambda r: f"{_t(r['start_ms'])} – {_t(r['end_ms'])}  {r['vhost']} {r['queue']}: depth "
                                f"{r['depth_from']} -> {r['depth_to']}",
}  # fmt: skip
_ORDER = {"versions": ["node", "start_ms"], "flags": ["enabled_ms", "flag"], "split_brains": ["group", "term"],
          "leader_changes": ["at_ms"], "losses": ["at_ms"],
          "counter_resets": ["at_ms"], "restarts": ["at_ms"]}  # fmt: skip


def _t(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000))


def summarize(tables: dict, limit: int = 20) -> str:
    """The findings as text: each table's count and its first rows."""
    from audit.spark import rows

    got, counts = {}, {}
    for name in SUMMARY:
        if name in tables:
            got[name] = rows(tables[name], _ORDER.get(name, ["start_ms"]), limit + 1)
            counts[name] = len(got[name]) if len(got[name]) <= limit else tables[name].count()
    return summarize_rows(got, counts, limit)


def summarize_rows(got: dict[str, list[dict]], counts: dict[str, int], limit: int = 20) -> str:
    out = []
    for name, line in SUMMARY.items():
        if name not in got:
            continue
        n = counts.get(name, len(got[name]))
        out.append(f"{name}: {n}")
        out += [f"  {line(r)}" for r in got[name][:limit]]
        if n > limit:
            out.append(f"  ... {n - limit} more")
    return "\n".join(out)
