"""One self-contained HTML report of the jobs: summary cards, the partition timeline,
leaders per Raft group, versions per node with the mixed-version window and flag
enablement, queue rates and depths, replica lag, and every finding as a table.
`gather` (Spark) collects what the page shows, downsampled to about `MAX_POINTS`
points per series, into plain data; `render` (pure Python) turns that
data into HTML with inline SVG, so the page needs no network and no script."""

from __future__ import annotations

import json
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from html import escape
from typing import Any

from audit import svg

MAX_POINTS = 300
MAX_GROUPS = 40
MAX_QUEUES = 8
MAX_LAG_GROUPS = 6
MAX_ROWS = 200

# table -> (title, order, columns shown)
TABLES: dict[str, tuple[str, list[str], list[str]]] = {
    "partitions": ("Partitions", ["start_ms"], ["start_ms", "end_ms", "windows", "components", "silent"]),
    "asymmetries": ("One-way reachability", ["start_ms"], ["src", "dst", "start_ms", "end_ms", "windows"]),
    "bridged_cuts": ("Cut links inside one component (a bridged partition)", ["start_ms"],
                     ["a", "b", "start_ms", "end_ms", "windows"]),
    "split_brains": ("Split brains (two leaders in one term)", ["group", "term"],
                     ["group", "term", "leaders", "first_ms", "last_ms", "overlap_start_ms", "overlap_end_ms"]),
    "leaderless": ("Time without a leader", ["start_ms", "group"], ["group", "start_ms", "end_ms", "duration_ms"]),
    "leader_changes": ("Leader changes", ["at_ms", "group"],
                       ["group", "at_ms", "from_leader", "from_term", "to_leader", "to_term"]),
    "lag_growth": ("Replica lag growing", ["start_ms"],
                   ["group", "follower", "start_ms", "end_ms", "windows", "lag_from", "lag_to"]),
    "losses": ("Messages lost", ["at_ms"],
               ["vhost", "queue", "type", "node", "at_ms", "lost", "missing", "confirmed_gap", "confirmed_lost"]),
    "counter_resets": ("Counter resets", ["at_ms"], ["node", "vhost", "queue", "at_ms", "counters"]),
    "restarts": ("Node restarts", ["at_ms"], ["node", "at_ms", "silent_ms", "from_boot", "to_boot"]),
    "consumer_stops": ("Consumers stopped while messages piled up", ["start_ms"],
                       ["vhost", "queue", "start_ms", "end_ms", "windows", "depth_before", "depth_max"]),
    "backlog_growth": ("Backlog growing with consumers attached", ["start_ms"],
                       ["vhost", "queue", "start_ms", "end_ms", "windows", "depth_from", "depth_to"]),
    "mixed_versions": ("Mixed-version windows", ["start_ms"], ["start_ms", "end_ms", "windows", "versions"]),
    "versions": ("Versions per node", ["node", "start_ms"],
                 ["node", "version", "previous", "start_ms", "end_ms", "windows", "boots"]),
    "flags": ("Feature flags", ["enabled_ms", "flag"],
              ["flag", "supported_ms", "enabled_ms", "enabled_by", "everywhere_ms", "versions", "from_start"]),
}  # fmt: skip
VERSION_TABLES = ("versions", "mixed_versions", "flags")  # the versions job's: absent when it did not run


# ------------------------------------------------------------------------------ Spark side


def gather(snap: Any, tables: dict[str, Any]) -> dict:
    """Everything the page shows, as plain data (lists, dicts, numbers, strings)."""
    from pyspark.sql import functions as F

    from audit.spark import rows

    data: dict[str, Any] = {
        "generated_ms": int(time.time() * 1000), "source": snap.source, "period_ms": snap.period_ms,
        "t0": snap.first_window * snap.period_ms, "t1": (snap.last_window + 1) * snap.period_ms,
        "nodes": snap.nodes, "windows": snap.last_window - snap.first_window + 1, "lines": snap.lines,
        "bad_lines": snap.bad_lines, "newer_records": snap.newer_records, "tables": {}, "counts": {},
    }  # fmt: skip
    def first_rows(name: str) -> tuple[str, list[dict], int]:
        got = rows(tables[name], TABLES[name][1], MAX_ROWS + 1)
        return name, got[:MAX_ROWS], len(got) if len(got) <= MAX_ROWS else tables[name].count()

    with ThreadPoolExecutor(4) as pool:  # small queries: Spark runs them side by side
        for name, got, n in pool.map(first_rows, [n for n in TABLES if n in tables]):
            data["tables"][name], data["counts"][name] = got, n
    if data["counts"]["losses"] <= MAX_ROWS:
        data["lost_total"] = sum(r["lost"] for r in data["tables"]["losses"])
    else:
        data["lost_total"] = int(tables["losses"].agg(F.sum("lost").alias("lost")).first()["lost"] or 0)

    step = max(1, math.ceil(data["windows"] / MAX_POINTS))
    data["bucket_ms"] = step * snap.period_ms
    bucket = (F.floor(F.col("w") / step) * step * snap.period_ms).cast("long").alias("t")

    data["topology"] = rows(tables["topology"], ["start_ms"], 20_000)
    if "versions" in tables:
        data["version_runs"] = rows(tables["versions"], ["node", "start_ms"], 20_000)

    # groups: metadata, then those with findings, then the rest by name
    all_groups = sorted(r["group"] for r in tables["leaders"].select("group").distinct().collect())
    flagged: list[str] = []
    for name in ("split_brains", "leaderless", "lag_growth", "leader_changes"):
        for r in data["tables"][name]:
            if r["group"] not in flagged:
                flagged.append(r["group"])
    chosen = [g for g in ["metadata", *flagged, *all_groups] if g in all_groups]
    chosen = list(dict.fromkeys(chosen))[:MAX_GROUPS]
    data["groups"], data["groups_total"] = chosen, len(all_groups)
    data["leaders"] = rows(tables["leaders"].where(F.col("group").isin(chosen)), ["group", "start_ms"], 50_000)

    lag = tables["replica_lag"]
    top_lag = [r["group"] for r in lag.groupBy("group").agg(F.max("lag").alias("m")).orderBy(F.desc("m"))
               .limit(MAX_LAG_GROUPS).collect()]  # fmt: skip
    lag_groups = list(dict.fromkeys([r["group"] for r in data["tables"]["lag_growth"]] + top_lag))[:MAX_LAG_GROUPS]
    series = rows(lag.where(F.col("group").isin(lag_groups)).groupBy("group", bucket).agg(F.max("lag").alias("lag")),
                  ["group", "t"])  # fmt: skip
    data["lag"] = [{"group": g, "points": [(r["t"], r["lag"]) for r in series if r["group"] == g]} for g in lag_groups]

    # queues: those with findings, then the deepest
    qw = tables["queue_windows"]
    key = F.concat_ws("\u0000", "vhost", "queue")
    flagged_q: list[tuple[str, str]] = []
    for name in ("losses", "consumer_stops", "backlog_growth", "counter_resets"):
        for r in data["tables"][name]:
            if (r["vhost"], r["queue"]) not in flagged_q:
                flagged_q.append((r["vhost"], r["queue"]))
    per_queue = qw.groupBy("vhost", "queue").agg(F.max("depth").alias("d"))
    deepest = [(r["vhost"], r["queue"]) for r in per_queue.orderBy(F.desc("d"), "vhost", "queue")
               .limit(MAX_QUEUES + 1).collect()]  # fmt: skip
    queues = list(dict.fromkeys(flagged_q + deepest[:MAX_QUEUES]))[:MAX_QUEUES]
    data["queues_total"] = len(deepest) if len(deepest) <= MAX_QUEUES else per_queue.count()
    agg = qw.where(key.isin([f"{v}\u0000{q}" for v, q in queues])).groupBy("vhost", "queue", bucket).agg(
        F.max("depth").alias("depth"), F.max("unacked").alias("unacked"),
        F.avg("published_rate").alias("published_rate"), F.avg("delivered_rate").alias("delivered_rate"),
        F.avg("acknowledged_rate").alias("acknowledged_rate"), F.first("type").alias("type"))  # fmt: skip
    got = rows(agg, ["vhost", "queue", "t"])
    data["queues"] = [{"vhost": v, "queue": q, "type": next((r["type"] for r in got if (r["vhost"], r["queue"]) == (v, q)),
                                                            ""),
                       "points": [{k: r[k] for k in ("t", "depth", "unacked", "published_rate",
                                                     "delivered_rate", "acknowledged_rate")}
                                  for r in got if (r["vhost"], r["queue"]) == (v, q)]}
                      for v, q in queues]  # fmt: skip
    return data


# ------------------------------------------------------------------------------ HTML

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1010px;
color:#222;padding:0 12px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:3px}
h3{font-size:14px;margin:16px 0 4px}.meta{color:#666;font-size:12px}
.cards{display:flex;flex-wrap:wrap;gap:8px;margin:14px 0}.card{border-radius:6px;padding:8px 12px;min-width:140px;
border:1px solid #ddd}.card b{display:block;font-size:20px}.ok{background:#eef7ec;border-color:#b9dfb2}
.bad{background:#fdecea;border-color:#f3b6b0}.warn{background:#fff6e5;border-color:#f2d29b}
table{border-collapse:collapse;font-size:12px;margin:6px 0 12px}th,td{border:1px solid #e3e3e3;padding:3px 7px;
text-align:left;vertical-align:top}th{background:#f6f6f6}.legend span{display:inline-block;margin-right:14px;font-size:12px}
.legend i{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:-1px}.none{color:#2a7a2a}
.note{color:#666;font-size:12px}
"""


def _cell(name: str, v: Any) -> str:
    if v is None:
        return "–"
    if name.endswith("_ms") and isinstance(v, int) and name not in ("duration_ms", "silent_ms"):
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(v / 1000))
    if name in ("duration_ms", "silent_ms"):
        return svg.fmt_duration(v)
    if isinstance(v, list):
        if v and isinstance(v[0], list):
            return " | ".join("{" + ", ".join(map(str, c)) + "}" for c in v)
        return ", ".join(map(str, v))
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


def _table(name: str, data: dict) -> str:
    title, _, cols = TABLES[name]
    got = data["tables"].get(name, [])
    n = data["counts"].get(name, len(got))
    out = [f'<h3 id="t-{name}">{escape(title)} ({n})</h3>']
    if not got:
        return out[0] + '<p class="none">None.</p>'
    out.append("<table><tr>" + "".join(f"<th>{escape(c.removesuffix('_ms').replace('_', ' '))}</th>" for c in cols)
               + "</tr>")  # fmt: skip
    for r in got:
        out.append("<tr>" + "".join(f"<td>{escape(_cell(c, r.get(c)))}</td>" for c in cols) + "</tr>")
    out.append("</table>")
    if n > len(got):
        out.append(f'<p class="note">The first {len(got)} of {n}; every row is in the Parquet table `{name}`.</p>')
    return "".join(out)


def _card(title: str, value: str, level: str, sub: str = "") -> str:
    return f'<div class="card {level}">{escape(title)}<b>{escape(value)}</b><span class="meta">{escape(sub)}</span></div>'


def _cards(data: dict) -> str:
    c, t = data["counts"], data["tables"]
    part_ms = sum(r["end_ms"] - r["start_ms"] for r in t["partitions"])
    leaderless_ms = sum(r["duration_ms"] for r in t["leaderless"])
    anomalies = sum(c[k] for k in ("consumer_stops", "backlog_growth", "lag_growth"))
    cards = [
        _card("Partitions", str(c["partitions"]), "bad" if c["partitions"] else "ok",
              svg.fmt_duration(part_ms) if part_ms else "never split"),
        _card("Split brains", str(c["split_brains"]), "bad" if c["split_brains"] else "ok", "terms with 2+ leaders"),
        _card("Messages lost", svg.fmt_num(data.get("lost_total", 0)), "bad" if c["losses"] else "ok",
              f"{c['losses']} events" if c["losses"] else "conservation holds"),
        _card("Without a leader", svg.fmt_duration(leaderless_ms) if leaderless_ms else "0",
              "warn" if c["leaderless"] else "ok", f"{c['leaderless']} intervals"),
        _card("Leader changes", str(c["leader_changes"]), "warn" if c["leader_changes"] else "ok", ""),
        _card("Anomalies", str(anomalies), "warn" if anomalies else "ok", "consumers, backlog, replica lag"),
        _card("Restarts", str(c["restarts"]), "warn" if c["restarts"] else "ok",
              f"{c['counter_resets']} counter resets"),
        _card("One-way links", str(c["asymmetries"]), "warn" if c["asymmetries"] else "ok", "asymmetric reachability"),
        _card("Bridged cuts", str(c["bridged_cuts"]), "bad" if c["bridged_cuts"] else "ok",
              "two nodes apart, a third reaching both"),
    ]  # fmt: skip
    if "versions" in t:
        mixed_ms = sum(r["end_ms"] - r["start_ms"] for r in t["mixed_versions"])
        n = len({r["version"] for r in data.get("version_runs", t["versions"])})
        cards.append(_card("Versions", str(n), "warn" if mixed_ms else "ok",
                           f"mixed for {svg.fmt_duration(mixed_ms)}" if mixed_ms else "one at a time"))  # fmt: skip
    return '<div class="cards">' + "".join(cards) + "</div>"


def _legend(items: list[tuple[str, str]], hatched: str = "") -> str:
    out = ['<div class="legend">']
    for label, col in items:
        out.append(f'<span><i style="background:{col}"></i>{escape(label)}</span>')
    if hatched:
        out.append(f'<span><i style="background:repeating-linear-gradient(45deg,{svg.ALARM} 0 2px,#fff 2px 5px)">'
                   f"</i>{escape(hatched)}</span>")  # fmt: skip
    return "".join(out) + "</div>"


def render(data: dict) -> str:
    t0, t1 = data["t0"], data["t1"]
    t = data["tables"]
    bands = [(r["start_ms"], r["end_ms"], "partition: " + _cell("components", r["components"]))
             for r in t["partitions"]]  # fmt: skip
    bands += [(r["start_ms"], r["end_ms"], f"{r['a']} and {r['b']} cut off from each other, bridged by a third")
              for r in t["bridged_cuts"]]  # fmt: skip
    restarts = [(r["at_ms"], f"{r['node']} restarted") for r in t["restarts"]]
    node_color = {n: svg.color(i) for i, n in enumerate(data["nodes"])}
    body = [f"<h1>Warren cluster audit</h1><div class=\"meta\">{escape(data['source'])} · "
            f"{escape(_cell('t0_ms', t0))} → {escape(_cell('t1_ms', t1))} UTC · {len(data['nodes'])} nodes · "
            f"{data['windows']} windows of {data['period_ms'] / 1000:g} s · {data['lines']} records read"
            + (f" · <b>{data['bad_lines']} unreadable lines</b>" if data["bad_lines"] else "")
            + (f" · <b>{data['newer_records']} records of a newer schema skipped</b>" if data["newer_records"] else "")
            + "</div>"]  # fmt: skip
    body.append(_cards(data))

    # partitions
    frame = svg.Frame(t0, t1, bands=bands, markers=restarts)
    lanes = {n: svg.Lane(n) for n in data["nodes"]}
    for r in data["topology"]:
        span = f"{_cell('s_ms', r['start_ms'])} – {_cell('e_ms', r['end_ms'])}"
        for i, comp in enumerate(r["components"]):
            col = svg.HEALTHY if r["n_components"] == 1 else svg.side_color(i)
            for n in comp:
                if n in lanes:
                    lanes[n].segments.append(svg.Segment(
                        r["start_ms"], r["end_ms"], col,
                        f"{n}: with {', '.join(comp)} ({span})" if r["n_components"] > 1 else f"{n}: all connected"))
        for n in r["silent"]:
            if n in lanes:
                lanes[n].segments.append(svg.Segment(r["start_ms"], r["end_ms"], svg.SILENT, f"{n}: silent ({span})"))
    events = svg.Lane("events", [svg.Segment(e["start_ms"], max(e["end_ms"], e["start_ms"] + 1), svg.EVENT,
                                             f"{e['label']} ({_cell('s_ms', e['start_ms'])} – "
                                             f"{_cell('e_ms', e['end_ms'])})") for e in data.get("events", [])])  # fmt: skip
    body.append("<h2>Partitions</h2><p class=\"note\">One lane per node. Green: every reporting node reaches every "
                "other; during a partition each side has its own colour (nodes of one colour reach each other). "
                "Grey: the node wrote no snapshot. Red bands: partitions; dashed lines: restarts."
                + (" Blue, lane \"events\": what was done to the cluster (given with --events)." if events.segments
                   else "") + "</p>")  # fmt: skip
    body.append(svg.timeline(frame, ([events] if events.segments else []) + list(lanes.values())))
    body.append(_legend([("all connected", svg.HEALTHY), ("side 1", svg.side_color(0)),
                         ("side 2", svg.side_color(1)), ("silent", svg.SILENT)]))  # fmt: skip

    # leaders
    glanes = {g: svg.Lane(g) for g in data["groups"]}
    for r in data["leaders"]:
        lane = glanes.get(r["group"])
        if lane is None:
            continue
        span = f"{_cell('s_ms', r['start_ms'])} – {_cell('e_ms', r['end_ms'])}"
        if r["leader"] is None:
            lane.segments.append(svg.Segment(r["start_ms"], r["end_ms"], "", f"no leader ({span})", hatched=True))
        else:
            terms = f"term {r['term_first']}" + (f"–{r['term_last']}" if r["term_last"] != r["term_first"] else "")
            lane.segments.append(svg.Segment(r["start_ms"], r["end_ms"], node_color.get(r["leader"], "#888"),
                                             f"leader {r['leader']}, {terms} ({span})"))  # fmt: skip
    for r in t["split_brains"]:
        lane = glanes.get(r["group"])
        if lane is not None and r.get("overlap_start_ms") is not None:
            lane.segments.append(svg.Segment(r["overlap_start_ms"], r["overlap_end_ms"], svg.ALARM,
                                             f"SPLIT BRAIN term {r['term']}: {', '.join(r['leaders'])}"))  # fmt: skip
    body.append("<h2>Leaders per Raft group</h2><p class=\"note\">Colour: the node that leads. Hatched: nobody "
                "claims leadership. Solid red: split brain (two leaders in one term).</p>")  # fmt: skip
    if glanes:
        body.append(svg.timeline(frame, list(glanes.values())))
        body.append(_legend([(n, c) for n, c in node_color.items()] + [("split brain", svg.ALARM)], "no leader"))
        if data["groups_total"] > len(glanes):
            body.append(f'<p class="note">{len(glanes)} of {data["groups_total"]} groups shown: those with findings '
                        "first; all are in the Parquet table `leaders`.</p>")  # fmt: skip
    else:
        body.append('<p class="note">No Raft group in the snapshots.</p>')
    if "versions" in t:
        body.append(_versions(data))

    # replica lag
    if data.get("lag"):
        body.append("<h2>Replica lag</h2><p class=\"note\">Largest lag of any follower (entries: the leader's commit "
                    "index minus the follower's last applied), per group.</p>")  # fmt: skip
        series = [svg.Series(s["group"], svg.color(i), s["points"]) for i, s in enumerate(data["lag"])]
        body.append(svg.line_chart(frame, series, gap_ms=3 * data["bucket_ms"]))

    # queues
    body.append("<h2>Queues</h2><p class=\"note\">Dashed red lines: losses, counter resets, consumers gone, "
                "backlogs (hover for details).</p>")  # fmt: skip
    if not data.get("queues"):
        body.append('<p class="note">No queue in the snapshots.</p>')
    bucket = data.get("bucket_ms", data["period_ms"])
    if bucket > data["period_ms"]:
        body.append(f'<p class="note">Points are {svg.fmt_duration(bucket)} buckets: rates averaged, depths at their '
                    "highest.</p>")  # fmt: skip
    for q in data.get("queues", []):
        qname = f"{q['vhost']}/{q['queue']}" if q["vhost"] != "/" else q["queue"]
        marks = [(r["at_ms"], f"lost {r['lost']}") for r in t["losses"] if (r["vhost"], r["queue"]) == (q["vhost"], q["queue"])]
        marks += [(r["at_ms"], f"counters reset on {r['node']}") for r in t["counter_resets"]
                  if (r["vhost"], r["queue"]) == (q["vhost"], q["queue"])]  # fmt: skip
        marks += [(r["start_ms"], f"consumers gone, depth {r['depth_before']} -> {r['depth_max']}")
                  for r in t["consumer_stops"] if (r["vhost"], r["queue"]) == (q["vhost"], q["queue"])]  # fmt: skip
        marks += [(r["start_ms"], f"backlog growing, depth {r['depth_from']} -> {r['depth_to']}")
                  for r in t["backlog_growth"] if (r["vhost"], r["queue"]) == (q["vhost"], q["queue"])]  # fmt: skip
        qframe = svg.Frame(t0, t1, bands=bands, markers=marks)
        pts = q["points"]
        body.append(f"<h3>{escape(qname)} <span class=\"meta\">({escape(q.get('type') or '')})</span></h3>")
        body.append(svg.line_chart(qframe, [
            svg.Series("published/s", svg.color(0), [(p["t"], p["published_rate"]) for p in pts]),
            svg.Series("delivered/s", svg.color(1), [(p["t"], p["delivered_rate"]) for p in pts]),
            svg.Series("acknowledged/s", svg.color(2), [(p["t"], p["acknowledged_rate"]) for p in pts]),
        ], title="rates (messages/s)", gap_ms=3 * bucket))  # fmt: skip
        body.append(svg.line_chart(qframe, [
            svg.Series("depth", svg.color(3), [(p["t"], p["depth"]) for p in pts]),
            svg.Series("unacked", svg.color(4), [(p["t"], p["unacked"]) for p in pts]),
        ], title="depth (messages)", gap_ms=3 * bucket))  # fmt: skip
    if data.get("queues_total", 0) > len(data.get("queues", [])):
        body.append(f'<p class="note">{len(data["queues"])} of {data["queues_total"]} queues shown (findings first, '
                    "then the deepest); all are in the Parquet table `queue_windows`.</p>")  # fmt: skip

    body.append("<h2>Findings</h2>")
    for name in TABLES:
        if name in t:
            body.append(_table(name, data))
    body.append(f'<p class="meta">Generated {escape(_cell("g_ms", data["generated_ms"]))} UTC by warren audit. '
                "Reading this report: docs/audit.md.</p>")  # fmt: skip
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Warren cluster audit</title>"
            f"<style>{CSS}</style></head><body>{''.join(body)}</body></html>")  # fmt: skip


def _versions(data: dict) -> str:
    """Versions per node over time, the mixed-version windows shaded, flag enablements marked."""
    t = data["tables"]
    runs = data.get("version_runs", t["versions"])
    first: dict[str, int] = {}  # version -> when a node first ran it: the colours go in that order
    for r in runs:
        first[r["version"]] = min(first.get(r["version"], r["start_ms"]), r["start_ms"])
    order = sorted(first, key=lambda v: (first[v], v))
    vcolor = {v: svg.color(i) for i, v in enumerate(order)}
    bands = [(r["start_ms"], r["end_ms"], "mixed: " + ", ".join(r["versions"])) for r in t["mixed_versions"]]
    marks = [(r["enabled_ms"], f"feature flag {r['flag']} enabled (seen first on {', '.join(r['enabled_by'])})")
             for r in t["flags"] if r["enabled_ms"] is not None and not r["from_start"]]  # fmt: skip
    frame = svg.Frame(data["t0"], data["t1"], bands=bands, markers=marks, band_fill=svg.NOTICE_BAND,
                      marker_stroke=svg.EVENT)  # fmt: skip
    lanes = {n: svg.Lane(n) for n in data["nodes"]}
    for r in runs:
        if r["node"] in lanes:
            span = f"{_cell('s_ms', r['start_ms'])} – {_cell('e_ms', r['end_ms'])}"
            lanes[r["node"]].segments.append(svg.Segment(r["start_ms"], r["end_ms"], vcolor[r["version"]],
                                                         f"{r['node']}: {r['version']} ({span})"))  # fmt: skip
    out = ["<h2>Versions and feature flags</h2><p class=\"note\">One lane per node, coloured by the Warren version "
           "its snapshots report (a gap: no snapshot). Amber bands: the nodes ran more than one version (a node "
           "that is down counts with the version it last reported). Blue dashed lines: a feature flag enabled "
           "(first snapshot that shows it).</p>"]  # fmt: skip
    if not runs:
        return out[0] + '<p class="note">No version in the snapshots.</p>'
    out.append(svg.timeline(frame, list(lanes.values())))
    out.append(_legend([(v, vcolor[v]) for v in order] + [("mixed versions", svg.NOTICE_BAND),
                                                          ("flag enabled", svg.EVENT)]))  # fmt: skip
    for r in t["mixed_versions"]:
        span = f"{_cell('s_ms', r['start_ms'])} – {_cell('e_ms', r['end_ms'])}"
        took = svg.fmt_duration(r["end_ms"] - r["start_ms"])
        out.append(f'<p class="note">Mixed {escape(span)} ({escape(took)}): {escape(", ".join(r["versions"]))}</p>')
    return "".join(out)


def read_events(path: str) -> list[dict]:
    """Outside events to draw beside the nodes (`--events`): one JSON object a line,
    {"start_ms", "end_ms", "label"} (a test's injected faults, say: what the snapshots
    cannot know). Raises ValueError naming the first line that is not one."""
    events = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                e = json.loads(line)
                start, end, label = e["start_ms"], e["end_ms"], e["label"]
                if not (type(start) is int and type(end) is int and start <= end and isinstance(label, str)):
                    raise ValueError("want whole start_ms <= end_ms and a label")
            except (ValueError, KeyError, TypeError) as err:
                raise ValueError(f"{path}:{n}: not an event ({err})") from None
            events.append({"start_ms": start, "end_ms": end, "label": label})
    return sorted(events, key=lambda e: e["start_ms"])


def write(path: str, html: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(html)


def write_json(path: str, data: dict) -> None:
    """The report's data (what `gather` collected) as JSON, for scripts and tests."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, default=str)
