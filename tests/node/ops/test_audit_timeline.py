"""node/ops/audit_timeline.py over snapshot files written here: spans merge, gaps and
restarts break them, partitions, leader changes, versions, flags and alarms come out
as the records say, and reading stops at the window, the record and the byte bounds."""

from __future__ import annotations

import json

from node.ops.audit_timeline import named, read_newest, timeline

A, B, C = "10.0.0.1:25672", "10.0.0.2:25672", "10.0.0.3:25672"
NAMES = {A: "warren@a", B: "warren@b", C: "warren@c"}
T0 = 1_700_000_000_000


def record(i: int, *, boot: str = "b1", version: str = "1.0", reach: tuple = (B, C), leader: str = A, term: int = 1,
           enabled: tuple = ("f1",), alarms: tuple = (), qq_leader: str | None = None) -> dict:  # fmt: skip
    groups = [{"name": "metadata", "role": "leader" if leader == A else "follower", "term": term, "leader": leader,
               "commit_index": i, "last_applied": i, "members": [A, B, C], "reachable": list(reach)}]  # fmt: skip
    queues = []
    if qq_leader is not None:
        groups.append({"name": "qq.1", "role": "follower", "term": 3, "leader": qq_leader, "commit_index": 1,
                       "last_applied": 1, "members": [A, B], "reachable": [B]})  # fmt: skip
        queues.append({"vhost": "/", "name": "orders", "type": "quorum", "leader": False, "group": "qq.1", "depth": 0,
                       "unacked": 0, "consumers": 0, "counters": {}})  # fmt: skip
    return {"schema_version": 1, "node": "warren@a", "member_id": A, "boot_id": boot, "seq": i,
            "wall_ms": T0 + i * 1000, "mono_ms": i * 1000, "interval_ms": 1000, "version": version,
            "feature_flags": {"supported": ["f1", "f2"], "enabled": list(enabled)}, "groups": groups,
            "connections": 0, "sessions": 0, "links": 0, "queues": queues, "alarms": list(alarms)}  # fmt: skip


def write(directory, *files: list[dict]) -> None:
    d = directory / "snapshots"
    d.mkdir(exist_ok=True)
    for n, records in enumerate(files, 1):
        (d / f"snapshots-{n}.ndjson").write_text("".join(json.dumps(r) + "\n" for r in records))


def run(tmp_path, now_index: int, window_s: int = 3600, max_records: int = 1000, max_bytes: int = 1 << 26) -> dict:
    out = timeline(str(tmp_path / "snapshots"), T0 + now_index * 1000, window_s * 1000, max_records, max_bytes)
    return named(out, lambda m: NAMES.get(m, m))


def test_a_partition_shows_on_the_members_lane_and_as_a_partition(tmp_path):
    write(tmp_path, [record(0), record(1), record(2, reach=(B,)), record(3, reach=(B,)), record(4)])
    t = run(tmp_path, 5)
    lanes = {m["node"]: [(s["state"], s["start_ms"] - T0, s["end_ms"] - T0) for s in m["spans"]] for m in t["members"]}
    assert lanes["warren@a"] == [("self", 0, 5000)]
    assert lanes["warren@b"] == [("reachable", 0, 5000)]
    assert lanes["warren@c"] == [("reachable", 0, 2000), ("unreachable", 2000, 4000), ("reachable", 4000, 5000)]
    assert [(p["unreachable"], p["start_ms"] - T0, p["end_ms"] - T0) for p in t["partitions"]] == [
        (["warren@c"], 2000, 4000)]  # fmt: skip
    assert t["records"] == 5 and t["node"] == "warren@a" and t["gaps"] == [] and t["restarts"] == []


def test_leader_changes_terms_and_quorum_groups_are_named(tmp_path):
    write(tmp_path, [record(0, qq_leader=A), record(1, leader=B, term=2, qq_leader=A), record(2, leader=B, term=2,
                                                                                            qq_leader=B)])  # fmt: skip
    t = run(tmp_path, 3)
    meta, qq = t["leaders"]
    assert meta["group"] == "metadata" and meta["changes"] == 1
    assert [(s["leader"], s["term"]) for s in meta["spans"]] == [("warren@a", 1), ("warren@b", 2)]
    assert qq["group"] == "qq.1" and qq["label"] == "orders" and qq["changes"] == 1
    assert [c["label"] for c in t["leader_changes"]] == ["metadata", "orders"]
    assert [(c["group"], c["from_leader"], c["to_leader"], c["at_ms"] - T0) for c in t["leader_changes"]] == [
        ("metadata", "warren@a", "warren@b", 1000), ("qq.1", "warren@a", "warren@b", 2000)]  # fmt: skip


def test_a_restart_with_a_new_version_leaves_a_gap(tmp_path):
    write(
        tmp_path, [record(0), record(1)], [record(10, boot="b2", version="1.1"), record(11, boot="b2", version="1.1")]
    )
    t = run(tmp_path, 12)
    assert [(v["version"], v["start_ms"] - T0, v["end_ms"] - T0) for v in t["versions"]] == [
        ("1.0", 0, 2000), ("1.1", 10_000, 12_000)]  # fmt: skip
    assert [(g["start_ms"] - T0, g["end_ms"] - T0) for g in t["gaps"]] == [(2000, 10_000)]
    [r] = t["restarts"]
    assert r["from_boot"] == "b1" and r["to_boot"] == "b2" and r["to_version"] == "1.1" and r["at_ms"] == T0 + 10_000


def test_flags_enabled_and_alarms(tmp_path):
    write(tmp_path, [record(0), record(1, alarms=("memory",)), record(2, enabled=("f1", "f2"))])
    t = run(tmp_path, 3)
    assert t["flags"] == [{"flag": "f2", "enabled_ms": T0 + 2000}]
    assert [(a["alarms"], a["start_ms"] - T0, a["end_ms"] - T0) for a in t["alarms"]] == [(["memory"], 1000, 2000)]


def test_the_window_and_the_bounds(tmp_path):
    write(tmp_path, [record(i) for i in range(50)], [record(i) for i in range(50, 100)])
    t = run(tmp_path, 100, window_s=10)
    assert t["records"] == 10 and t["cut"] is False and t["versions"][0]["start_ms"] == T0 + 90_000
    t = run(tmp_path, 100, max_records=30)
    assert t["records"] == 30 and t["cut"] is True and t["from_ms"] == T0 + 70_000
    size = len(json.dumps(record(99))) + 1
    t = run(tmp_path, 100, max_bytes=size * 5 + 1)
    assert t["records"] == 5 and t["cut"] is True


def test_torn_lines_and_other_versions_are_skipped_and_no_files_is_empty(tmp_path):
    assert run(tmp_path, 0)["records"] == 0
    write(tmp_path, [record(0), {**record(1), "schema_version": 2}])
    with open(tmp_path / "snapshots" / "snapshots-1.ndjson", "a") as f:
        f.write('{"schema_version": 1, "wall')  # the last line torn by a crash
    records, cut = read_newest(str(tmp_path / "snapshots"), 0, 100, 1 << 20)
    assert [r["wall_ms"] for r in records] == [T0] and cut is False


def test_lines_longer_than_a_block_are_read_whole(tmp_path, monkeypatch):
    monkeypatch.setattr("node.ops.audit_timeline.BLOCK", 64)  # every record spans several blocks
    write(tmp_path, [record(i) for i in range(5)])
    records, _ = read_newest(str(tmp_path / "snapshots"), 0, 100, 1 << 20)
    assert [r["wall_ms"] - T0 for r in records] == [0, 1000, 2000, 3000, 4000]


def test_a_wall_clock_stepped_forward_is_no_gap(tmp_path):
    # found going through the wall clock's uses for the chaos suite's clock faults: the node
    # kept writing a record a second (mono_ms), its wall clock jumped 5 minutes ahead
    stepped = [record(i) for i in range(6)]
    for r in stepped[3:]:
        r["wall_ms"] += 300_000
    write(tmp_path, stepped)
    t = run(tmp_path, 306)
    assert t["gaps"] == [] and t["restarts"] == []
    [me] = [m for m in t["members"] if m["node"] == "warren@a"]
    assert [(s["state"], s["start_ms"] - T0, s["end_ms"] - T0) for s in me["spans"]] == [("self", 0, 306_000)]
    # a restart in between is still a gap: the boots' monotonic clocks are not comparable
    write(tmp_path, [record(0), record(1), record(5, boot="b2")])
    assert [(g["start_ms"] - T0, g["end_ms"] - T0) for g in run(tmp_path, 6)["gaps"]] == [(2000, 5000)]
