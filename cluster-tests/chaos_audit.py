"""The Spark audit of a chaos run (issue 35 item 5): the nodes' cluster-state snapshots go
through `warren audit report`, with the run's faults drawn beside them, and what the audit
finds is held against what the run's own checkers found.

    snapshots = export_snapshots(cluster, out / "snapshots")      # before the cluster goes down
    events = write_events(cluster.history, out / "events.ndjson")
    data = run_audit(snapshots, out / "events.ndjson", out / "audit")   # report.html, report.json
    check_audit(report, data, events, lost)                      # lost: queue -> the checker's count

The chaos nodes write a snapshot record every second (WARREN_SNAPSHOT_INTERVAL in
docker-compose.chaos.yml), so a fault held 3 s spans windows of its own. `warren ctl
export_snapshots` gathers every member's files through one node's HTTP API, as an operator
would. The audit runs Spark in local mode (Java from scripts/ensure-java.sh).

What is checked (each a line of the run's report):
- the faults are on the audit's timeline: one event per fault the nemesis injected, from
  its injection to the heal that ended it (`--events`);
- the audit saw partitions when the run cut links (its reachability view; a node killed or
  paused may show as cut off too, so the converse is not asked), and no split brain;
- message conservation agrees with the checkers: the audit names a confirmed loss for a
  workload queue exactly when that queue's checker found confirmed messages lost.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from chaos_cluster import PASSWORD, REPO, USER, ClusterError
from spark_standalone import (  # tests/support/, on the path as conftest.py and chaos_mixed.py put it
    conf_args,
    java_problem,
)

# nemesis ops that inject a fault, and those that end the one injected before them
INJECTS = frozenset({"partition", "partition-one-way", "kill9", "pause", "slow-link", "disk-full", "delete-member",
                     "clock-jump", "clock-drift", "forget"})  # fmt: skip
HEALS = frozenset({"heal", "start", "unpause", "clear-slow-link", "disk-clear", "add-member", "clock-reset", "rejoin"})
CUTS = frozenset({"partition", "partition-one-way"})  # faults the audit's reachability view can see
AUDIT_TIMEOUT = 600  # seconds


def export_snapshots(cluster, dest: Path) -> Path:
    """Every member's snapshot files under `dest`/<member>/, through the first node that answers."""
    errors = []
    for node in cluster.nodes:
        if node in cluster.paused or cluster.state(node) != "running":
            continue
        cmd = [sys.executable, "-m", "node.cli", "ctl", "--host", cluster.ip(node), "--port", "15672",
               "--user", USER, "--password", PASSWORD, "export_snapshots", str(dest)]  # fmt: skip
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, PYTHONPATH=str(REPO)))  # fmt: skip
        if done.returncode == 0:
            return dest
        errors.append(f"{node}: {done.stderr.strip()[-500:]}")
    raise ClusterError("no node exported its snapshots: " + "; ".join(errors))


def fault_events(history) -> list[dict]:
    """The nemesis's faults as audit events (wall-clock ms): each from its injection to the
    start of the heal after it (one fault at a time; a bridge is two cuts healed together)."""
    wall_origin = time.time() - history.now()  # the history counts seconds from its start
    ops = sorted(history.faults(), key=lambda o: o.start)
    events = []
    for i, op in enumerate(ops):
        if op.f not in INJECTS:
            continue
        healed = next((h.start for h in ops[i + 1 :] if h.f in HEALS), ops[-1].end)
        events.append({"start_ms": int((wall_origin + op.start) * 1000), "end_ms": int((wall_origin + healed) * 1000),
                       "label": f"{op.f} {json.dumps(op.value, default=str)}", "kind": op.f})  # fmt: skip
    return events


def write_events(history, path: Path) -> list[dict]:
    events = fault_events(history)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return events


def run_audit(snapshots: Path, events: Path, out: Path) -> dict:
    """`warren audit report` in local Spark mode; the report's data (report.json)."""
    problem = java_problem()
    if problem:
        raise ClusterError(f"the audit needs Java: {problem}")
    cmd = [sys.executable, "-m", "node.cli", "audit", "report", "--snapshots", str(snapshots), "--out", str(out),
           "--json", str(out / "report.json"), "--events", str(events), "--master", "local[2]",
           "--shuffle-partitions", "2", *conf_args()]  # fmt: skip
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=AUDIT_TIMEOUT,
                          env=dict(os.environ, PYTHONPATH=str(REPO), PYSPARK_PYTHON=sys.executable))  # fmt: skip
    if done.returncode != 0:
        raise ClusterError(f"warren audit report failed ({done.returncode}):\n{done.stdout[-2000:]}\n"
                           f"{done.stderr[-3000:]}")  # fmt: skip
    return json.loads((out / "report.json").read_text())


def check_audit(report, data: dict[str, Any], events: list[dict], lost: dict[str, int]) -> None:
    """`lost`: each workload queue's confirmed messages its checker found lost."""
    counts, tables = data["counts"], data["tables"]
    report.check("audit: every fault on the timeline", len(data.get("events", [])) == len(events),
                 f"{len(data.get('events', []))} events drawn, {len(events)} faults injected")  # fmt: skip
    seen = (f"{counts['partitions']} partitions, {counts['bridged_cuts']} bridged cuts, {counts['asymmetries']} "
            f"one-way, {counts['leader_changes']} leader changes, {counts['restarts']} restarts")
    if any(e["kind"] in CUTS for e in events):  # (a node killed or paused may show as cut off too)
        found = counts["partitions"] + counts["bridged_cuts"] + counts["asymmetries"]
        report.check("audit: the partitions the run cut seen", found > 0, seen)
    else:
        report.check("audit: ran", True, seen)
    report.check("audit: no split brain", counts["split_brains"] == 0, str(tables["split_brains"])[:500])
    audited: dict[str, int] = {}
    for r in tables["losses"]:
        if r["confirmed_lost"]:
            audited[r["queue"]] = audited.get(r["queue"], 0) + r["lost"]
    disagree = {q: (n, audited.get(q, 0)) for q, n in lost.items() if (n > 0) != (audited.get(q, 0) > 0)}
    report.check("audit: message conservation agrees with the checkers", not disagree,
                 f"queue: (checker lost, audit lost) {disagree}; audit losses {counts['losses']}")  # fmt: skip
