"""The audit timeline of one node, in pure Python, from its own cluster-state snapshots.

`warren audit report` (audit/) reads every node's snapshot files with Spark; a
request cannot start Spark, so the console's audit view asks the node for what
its own records show over a bounded window of the newest ones: whom it reached
(partitions as this node saw them), who led each Raft group and in which term,
which version it ran and when it restarted, when feature flags were enabled
and when alarms were in effect. Records are read from the end of the newest
file backwards, at most `max_records` of them and `max_bytes` of file, and only
the fields the timeline uses are kept (a record of a node with thousands of
queues is mostly its `queues`). `timeline()` does file I/O: the HTTP route runs
it in a worker thread.

Every span is [start_ms, end_ms): a record stands for its node from its
`wall_ms` for one `interval_ms`; consecutive records with the same value merge.
A gap longer than GAP_PERIODS periods without a record is a `gap` (the node was
down or not writing) and breaks every span; between records of one boot the time
that passed is their `mono_ms` difference, so a wall clock stepped forward (NTP, an
operator, the chaos suite's clock-jump) is no gap.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from typing import Any

from audit.schema import SCHEMA_VERSION, snapshot_files

GAP_PERIODS = 2.5  # periods without a record before the timeline shows a gap
BLOCK = 1 << 20  # bytes read from a file's end per step
MAX_GROUPS = 20  # leader lanes: the metadata group, then the groups whose leader changed most
MAX_SPANS = 500  # per lane; beyond, the lane says `truncated`


def read_newest(directory: str, since_ms: int, max_records: int, max_bytes: int) -> tuple[list[dict], bool]:
    """The records at or after `since_ms`, oldest first, reduced to the fields the timeline
    uses; True besides when the window was cut short by `max_records` or `max_bytes`
    (older records in the window were not read). Lines that do not parse are skipped."""
    out: list[dict] = []
    budget = max_bytes
    for path in reversed(snapshot_files(directory)):
        for line, size in _lines_backwards(path):
            budget -= size
            if budget < 0:
                return out[::-1], True
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict) or record.get("schema_version") != SCHEMA_VERSION:
                continue
            wall = record.get("wall_ms")
            if not isinstance(wall, int):
                continue
            if wall < since_ms:
                return out[::-1], False
            out.append(_reduce(record))
            if len(out) >= max_records:
                return out[::-1], True
    return out[::-1], False


def _lines_backwards(path: str) -> Iterator[tuple[bytes, int]]:
    """The non-empty lines of `path`, last first, each with the bytes it took."""
    try:
        f = open(path, "rb")  # noqa: SIM115 (closed below; a generator may stop early)
    except FileNotFoundError:  # deleted by the writer's rotation meanwhile
        return
    try:
        end = f.seek(0, os.SEEK_END)
        tail = b""
        while end > 0:
            start = max(0, end - BLOCK)
            f.seek(start)
            chunk = f.read(end - start) + tail
            end = start
            lines = chunk.split(b"\n")
            tail = lines.pop(0) if start > 0 else b""  # may begin before this block
            for line in reversed(lines):
                if line.strip():
                    yield line, len(line) + 1
        if tail.strip():
            yield tail, len(tail) + 1
    finally:
        f.close()


def _reduce(r: dict) -> dict:
    groups = []
    for g in r.get("groups") or ():
        if isinstance(g, dict):
            groups.append({k: g.get(k) for k in ("name", "role", "term", "leader", "members", "reachable")})
    flags = r.get("feature_flags") or {}
    queues = {q["group"]: _label(q) for q in r.get("queues") or () if isinstance(q, dict) and q.get("group")}
    return {"queues": queues, "wall_ms": r["wall_ms"], "mono_ms": r.get("mono_ms"), "interval_ms": r.get("interval_ms") or 5000, "boot_id": r.get("boot_id"),
            "version": r.get("version"), "member_id": r.get("member_id"), "node": r.get("node"), "groups": groups,
            "enabled": list(flags.get("enabled") or ()) if isinstance(flags, dict) else [],
            "alarms": list(r.get("alarms") or ())}  # fmt: skip


def _label(queue: dict) -> str:
    """A quorum queue's group shown by its queue's name (and vhost, unless the default one)."""
    name, vhost = queue.get("name"), queue.get("vhost")
    return f"{name}" if vhost == "/" else f"{name} (vhost {vhost})"


# ---------------------------------------------------------------- spans


def _elapsed(prev: dict, r: dict) -> int:
    """Milliseconds from record `prev` to `r`: the monotonic clock's within one boot (a stepped
    wall clock moves wall_ms, not mono_ms), else the wall clock's."""
    if prev["boot_id"] == r["boot_id"] and isinstance(prev["mono_ms"], int) and isinstance(r["mono_ms"], int):
        return r["mono_ms"] - prev["mono_ms"]
    return r["wall_ms"] - prev["wall_ms"]


class _Lane:
    """Merges (time, value) samples into spans of one value."""

    def __init__(self) -> None:
        self.spans: list[dict] = []
        self.truncated = False

    def add(self, start: int, end: int, value: dict) -> None:
        last = self.spans[-1] if self.spans else None
        if last is not None and last["end_ms"] == start and all(last.get(k) == v for k, v in value.items()):
            last["end_ms"] = end
            return
        if len(self.spans) >= MAX_SPANS:
            self.truncated = True
            return
        self.spans.append({"start_ms": start, "end_ms": end, **value})


def timeline(directory: str, now_ms: int, window_ms: int, max_records: int, max_bytes: int) -> dict:
    """The timeline of the records in `directory` over [now_ms - window_ms, now_ms].
    Members are named by their ids (host:port) as the records name them; `named()`
    puts the node names in, on the node that answers the request."""
    records, cut = read_newest(directory, now_ms - window_ms, max_records, max_bytes)
    out: dict[str, Any] = {"from_ms": now_ms - window_ms, "to_ms": now_ms, "records": len(records), "cut": cut,
                           "members": [], "partitions": [], "leaders": [], "leader_changes": [], "versions": [],
                           "restarts": [], "gaps": [], "flags": [], "alarms": []}  # fmt: skip
    if not records:
        return out
    out["from_ms"] = records[0]["wall_ms"] if cut else out["from_ms"]
    reach: dict[str, _Lane] = {}
    leaders: dict[str, _Lane] = {}
    changes: dict[str, int] = {}
    versions, partitions, alarms = _Lane(), _Lane(), _Lane()
    last_leader: dict[str, tuple[str | None, int | None]] = {}
    flags_seen: set[str] | None = None
    prev: dict | None = None
    labels: dict[str, str] = {"metadata": "metadata"}  # group -> what it replicates (vhost/queue)
    for i, r in enumerate(records):
        labels.update(r["queues"])
        start = r["wall_ms"]
        nxt = records[i + 1] if i + 1 < len(records) else None
        if nxt is not None and _elapsed(r, nxt) <= r["interval_ms"] * GAP_PERIODS:
            end = max(start, nxt["wall_ms"])  # a clock stepped back: an empty span, not a negative one
        else:
            end = start + r["interval_ms"]
        contiguous = prev is not None and _elapsed(prev, r) <= prev["interval_ms"] * GAP_PERIODS
        if prev is not None and not contiguous:
            out["gaps"].append({"start_ms": prev["wall_ms"] + prev["interval_ms"], "end_ms": start})
        if prev is not None and r["boot_id"] != prev["boot_id"]:
            out["restarts"].append({"at_ms": start, "from_boot": prev["boot_id"], "to_boot": r["boot_id"],
                                    "from_version": prev["version"], "to_version": r["version"]})  # fmt: skip
        versions.add(start, end, {"version": r["version"]})
        alarms.add(start, end, {"alarms": sorted(r["alarms"])})
        me = r["member_id"]
        meta = next((g for g in r["groups"] if g["name"] == "metadata"), None)
        if meta is not None:
            reachable = set(meta.get("reachable") or ())
            unreachable = []
            for m in meta.get("members") or ():
                state = "self" if m == me else ("reachable" if m in reachable else "unreachable")
                if state == "unreachable":
                    unreachable.append(m)
                reach.setdefault(m, _Lane()).add(start, end, {"state": state})
            partitions.add(start, end, {"unreachable": sorted(unreachable)})
        for g in r["groups"]:
            name, leader, term = g["name"], g.get("leader"), g.get("term")
            shown = leader or None
            leaders.setdefault(name, _Lane()).add(start, end, {"leader": shown, "term": term})
            before = last_leader.get(name)
            if before is not None and leader is not None and before[0] is not None and before[0] != leader:
                changes[name] = changes.get(name, 0) + 1
                out["leader_changes"].append({"group": name, "at_ms": start, "from_leader": before[0],
                                              "from_term": before[1], "to_leader": shown, "to_term": term})  # fmt: skip
            if leader is not None:
                last_leader[name] = (leader, term)
        enabled = set(r["enabled"])
        if flags_seen is not None:
            out["flags"].extend({"flag": f, "enabled_ms": start} for f in sorted(enabled - flags_seen))
        flags_seen = enabled if flags_seen is None else flags_seen | enabled
        prev = r
    last = records[-1]
    out["node"], out["member_id"], out["interval_ms"] = last["node"], last["member_id"], last["interval_ms"]
    out["members"] = [{"node": m, "address": m, "spans": lane.spans, "truncated": lane.truncated}
                      for m, lane in sorted(reach.items())]  # fmt: skip
    out["partitions"] = [s for s in partitions.spans if s["unreachable"]]
    out["versions"] = versions.spans
    out["alarms"] = [s for s in alarms.spans if s["alarms"]]
    shown = sorted(leaders, key=lambda n: (n != "metadata", -changes.get(n, 0), n))[:MAX_GROUPS]
    out["leaders"] = [{"group": n, "label": labels.get(n, n), "changes": changes.get(n, 0), "spans": leaders[n].spans,
                       "truncated": leaders[n].truncated} for n in shown]  # fmt: skip
    out["groups_total"] = len(leaders)
    out["leader_changes"] = out["leader_changes"][-MAX_SPANS:]
    for c in out["leader_changes"]:
        c["label"] = labels.get(c["group"], c["group"])
    return out


def named(out: dict, name_of: Callable[[str], str]) -> dict:
    """`out` (a `timeline()`) with every member id turned into `name_of(id)`, in place."""
    for m in out["members"]:
        m["node"] = name_of(m["address"])
    out["members"].sort(key=lambda m: m["node"])
    for p in out["partitions"]:
        p["unreachable"] = sorted(name_of(m) for m in p["unreachable"])
    for lane in out["leaders"]:
        for span in lane["spans"]:
            if span["leader"] is not None:
                span["leader"] = name_of(span["leader"])
    for c in out["leader_changes"]:
        c["from_leader"], c["to_leader"] = name_of(c["from_leader"]), name_of(c["to_leader"])
    return out
