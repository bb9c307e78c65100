"""Generated snapshot sets for the audit tests: N nodes over W windows, with faults
placed exactly where a scenario says (partitions, one-way reachability, leader
changes, a split brain, node restarts, message losses, stopped consumers,
backlogs) and healthy noise everywhere else.

The simulation is coarse but keeps the invariants the audit relies on: a
queue's counters and depth move together (conservation holds except where a
loss is injected), a Raft group's commit index advances only while a leader
reaches a majority, a replica applies only while it reaches the leader, and a
restarted node comes back with a new boot_id, seq 0 and reset classic-queue
counters (recovered = the messages it kept). Every record is checked against
node/ops/state_snapshot.py's schema and written through SnapshotWriter.append, so
the files rotate as the broker's would.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from pathlib import Path

from audit.schema import COUNTERS, validate_record
from node.ops.state_snapshot import SnapshotWriter

BASE_MS = 1_700_000_000_000  # a multiple of the period: window w starts at BASE_MS + w * PERIOD_MS
PERIOD_MS = 5000
BASE_WINDOW = BASE_MS // PERIOD_MS


def ms(w: int) -> int:
    """The start of (scenario) window w, Unix ms."""
    return BASE_MS + w * PERIOD_MS


def mid(node: str) -> str:
    return f"{node}:25672"


@dataclass
class QueueSpec:
    name: str
    type: str  # classic | quorum
    home: str | None = None  # classic: the node that hosts it
    group: str | None = None  # quorum: its Raft group
    target: int = 200  # the depth it hovers around
    consumers: int = 2


@dataclass
class Scenario:
    nodes: list[str]
    windows: int
    groups: dict[str, list[str]]  # group -> members
    leadership: dict[str, list[tuple[int, int, dict[str, int]]]]  # group -> [(start, end, {claimant: term})]
    queues: list[QueueSpec]
    seed: int = 1
    partitions: list[tuple[int, int, list[list[str]]]] = field(default_factory=list)
    one_way: list[tuple[int, int, str, str]] = field(default_factory=list)  # dst stops reporting src
    down: list[tuple[int, int, str]] = field(default_factory=list)  # no records in [start, end), restart at end
    losses: list[tuple[str, int, int]] = field(default_factory=list)  # (queue, window, messages)
    consumer_stops: list[tuple[str, int, int]] = field(default_factory=list)  # (queue, start, end): consumers 0
    backlogs: list[tuple[str, int, int]] = field(default_factory=list)  # (queue, start, end): depth +20 a window
    doubles: list[tuple[str, int]] = field(default_factory=list)  # an extra, earlier, stale record
    skips: list[tuple[str, int]] = field(default_factory=list)  # the node writes nothing in that window
    torn: list[str] = field(default_factory=list)  # a torn last line before the node's restart
    upgrades: list[tuple[str, int, str]] = field(default_factory=list)  # (node, window, version it runs from then)
    flags_enabled: dict[str, dict[str, int]] = field(default_factory=dict)  # flag -> node -> window it sees it on
    # (node, window, ms): the node's wall clock is stepped by ms from that window on (its monotonic clock is not)
    clock_steps: list[tuple[str, int, int]] = field(default_factory=list)


FIRST_VERSION = "0.1.0"
VERSION_FLAGS = {"0.1.0": ["quorum_queue"], "0.2.0": ["quorum_queue", "stream_queue"]}  # what each supports
DEFAULT_ENABLED = ["quorum_queue"]


def _version(sc: Scenario, node: str, w: int) -> str:
    return max(((uw, v) for n, uw, v in sc.upgrades if n == node and uw <= w), default=(-1, FIRST_VERSION))[1]


def _enabled(sc: Scenario, node: str, w: int) -> list[str]:
    return DEFAULT_ENABLED + sorted(f for f, at in sc.flags_enabled.items() if node in at and at[node] <= w)


def _stepped(sc: Scenario, node: str, w: int) -> int:
    """How far the node's wall clock is off in window w (Scenario.clock_steps)."""
    return sum(step for n, at, step in sc.clock_steps if n == node and at <= w)


def _active(spans: list[tuple[str, int, int]], w: int, name: str) -> bool:
    return any(qn == name and s <= w < e for qn, s, e in spans)


class _Queue:
    def __init__(self, spec: QueueSpec) -> None:
        self.spec = spec
        self.counters = dict.fromkeys(COUNTERS, 0)
        self.depth = 0
        self.unacked = 0
        self.consumers = spec.consumers
        self.inflight = 0


def generate(sc: Scenario, root: Path, max_bytes: int = 48 * 1024) -> dict:
    """Writes <root>/<node>/snapshots/snapshots-<n>.ndjson for every node; returns
    {"records": how many, "files": how many}."""
    rng = random.Random(sc.seed)
    nodes = sc.nodes
    phase = {n: rng.randint(600, 4400) for n in nodes}
    boot = {n: 0 for n in nodes}
    seq = {n: 0 for n in nodes}
    boot_wall = {n: ms(0) for n in nodes}
    writers = {n: SnapshotWriter(str(root / n), None, interval=PERIOD_MS / 1000, max_bytes=max_bytes, keep_files=1000)
               for n in nodes}  # fmt: skip
    queues = {q.name: _Queue(q) for q in sc.queues}
    replica = {q.name: {} for q in sc.queues if q.type == "quorum"}  # queue -> node -> state copy
    commit = dict.fromkeys(sc.groups, 0)
    applied = {g: dict.fromkeys(m, 0) for g, m in sc.groups.items()}
    known_term = dict.fromkeys(sc.groups, 1)
    was_down: set[str] = set()
    written = 0

    for w in range(sc.windows):
        alive = [n for n in nodes if not any(s <= w < e and n == d for s, e, d in sc.down)]
        comp = {n: 0 for n in alive}
        for s, e, comps in sc.partitions:
            if s <= w < e:
                for i, c in enumerate(comps):
                    for n in c:
                        comp[n] = i
        reach = {n: {m for m in alive if m != n and comp[m] == comp[n]} for n in alive}
        for s, e, src, dst in sc.one_way:
            if s <= w < e and dst in reach:
                reach[dst].discard(src)

        commit_start = dict(commit)
        wall = {n: ms(w) + phase[n] + rng.randint(-200, 200) for n in alive}

        # restarts: classic queues come back with what they stored, counters from zero
        for n in alive:
            if n in was_down:
                was_down.discard(n)
                boot[n] += 1
                seq[n] = 0
                boot_wall[n] = ms(w)
                writers[n] = SnapshotWriter(str(root / n), None, interval=PERIOD_MS / 1000, max_bytes=max_bytes,
                                            keep_files=1000)  # fmt: skip
                for q in queues.values():
                    if q.spec.home == n:
                        q.counters = dict.fromkeys(COUNTERS, 0)
                        q.counters["recovered"] = q.depth
                        q.unacked = 0
                        q.inflight = 0
        for n in nodes:
            if n not in alive and n not in was_down:
                was_down.add(n)
                if n in sc.torn and writers[n]._file is not None:
                    writers[n]._file.write(b'{"schema_version":1,"node":"' + n.encode() + b'","wall_ms":17')
                    writers[n]._file.flush()
                writers[n]._close()

        # who leads what
        claims: dict[str, dict[str, int]] = {}
        true_leader: dict[str, str | None] = {}
        advancing: dict[str, bool] = {}
        for g, members in sc.groups.items():
            c = {}
            for s, e, who in sc.leadership.get(g, []):
                if s <= w < e:
                    c.update({n: t for n, t in who.items() if n in alive})
            claims[g] = c
            top = max(c.items(), key=lambda kv: (kv[1], kv[0]))[0] if c else None
            true_leader[g] = top
            if c:
                known_term[g] = max(known_term[g], max(c.values()))
            advancing[g] = top is not None and 2 * sum(1 for m in members if m in alive and comp[m] == comp[top]) > len(
                members)

        # queue traffic
        for q in queues.values():
            spec = q.spec
            if spec.type == "classic":
                active = spec.home in alive
            else:
                active = advancing[spec.group]
            if not active:
                continue
            q.consumers = 0 if _active(sc.consumer_stops, w, spec.name) else spec.consumers
            backlog = _active(sc.backlogs, w, spec.name)
            p = rng.randint(40, 120)
            if q.consumers == 0:
                a = dl = dr = 0
            elif backlog:
                a, dl, dr = max(0, p - 20), 0, 0
            else:
                dl = rng.randint(0, 2)
                dr = rng.randint(0, 1)
                a = p - dl - dr + (q.depth - spec.target) // 2 + rng.randint(-8, 8)
                if any(qn == spec.name and w == s - 1 for qn, s, _ in sc.backlogs):
                    a = max(a, p - dl - dr)  # the backlog begins exactly where the scenario says
                a = max(0, min(a, q.depth + p - dl - dr))
            c = q.counters
            c["published"] += p
            q.inflight = rng.randint(0, 5)
            c["confirmed"] = max(c["confirmed"], c["published"] - c["rejected"] - q.inflight)
            c["acknowledged"] += a
            c["dead_lettered"] += dl
            c["dropped"] += dr
            c["expired"] += min(dr, 1) if dr else 0
            redel = rng.randint(0, 2) if q.consumers else 0
            c["redelivered"] += redel
            q.depth += p - a - dl - dr
            q.unacked = rng.randint(0, min(q.depth, 10)) if q.consumers else 0
            c["delivered"] += a + redel + (q.unacked if q.consumers else 0) // 2
            for qn, wl, k in sc.losses:
                if qn == spec.name and wl == w:
                    q.depth -= k
                    q.unacked = min(q.unacked, q.depth)
            if spec.type == "quorum":
                commit[spec.group] += p + a + dl + dr + 1

        # Raft progress
        for g, members in sc.groups.items():
            if not advancing[g]:
                continue
            if g not in {q.spec.group for q in queues.values()}:
                commit[g] += rng.randint(12, 25)
            top = true_leader[g]
            for q in queues.values():
                if q.spec.group == g:
                    for m in members:
                        if m in alive and comp[m] == comp[top]:
                            replica[q.spec.name][m] = copy.deepcopy((q.counters, q.depth, q.unacked, q.consumers))

        # the records
        for n in alive:
            if (n, w) in sc.skips:
                continue
            groups = []
            for g, members in sc.groups.items():
                if n not in members:
                    continue
                mine = claims[g].get(n)
                visible = {c: t for c, t in claims[g].items() if comp[c] == comp[n]}
                follows = max(visible.items(), key=lambda kv: (kv[1], kv[0]))[0] if visible else None
                if mine is not None:
                    role, term, follows = "leader", mine, n
                elif follows is not None:
                    role, term = "follower", visible[follows]
                else:
                    role, term = "candidate", known_term[g]
                connected = true_leader[g] is not None and comp[true_leader[g]] == comp[n]
                if connected:  # the commit index grows steadily through the window
                    now = commit_start[g] + (commit[g] - commit_start[g]) * (wall[n] - ms(w)) // PERIOD_MS
                    behind = rng.randint(0, 1) if n == true_leader[g] else rng.randint(0, 2)
                    applied[g][n] = max(applied[g][n], now - behind)
                else:
                    now = applied[g][n]
                groups.append({
                    "name": g, "role": role, "term": term, "leader": None if follows is None else mid(follows),
                    "commit_index": now, "last_applied": applied[g][n],
                    "members": [mid(m) for m in members], "reachable": sorted(mid(m) for m in reach[n] if m in members),
                })  # fmt: skip
            qrecs = []
            for q in queues.values():
                spec = q.spec
                if spec.type == "classic":
                    if spec.home != n:
                        continue
                    state, leader = (q.counters, q.depth, q.unacked, q.consumers), True
                else:
                    if n not in sc.groups[spec.group] or n not in replica[spec.name]:
                        continue
                    state = replica[spec.name][n]
                    leader = claims[spec.group].get(n) is not None and advancing[spec.group] and comp[n] == comp[
                        true_leader[spec.group]]
                counters, depth, unacked, consumers = state
                qrecs.append({"vhost": "/", "name": spec.name, "type": spec.type, "durable": True, "leader": leader,
                              "group": spec.group, "depth": depth, "unacked": unacked, "consumers": consumers,
                              "counters": dict(counters)})  # fmt: skip
            rec = {
                "schema_version": 1, "node": n, "member_id": mid(n), "boot_id": f"{n}-boot{boot[n]}",
                "seq": seq[n], "wall_ms": wall[n] + _stepped(sc, n, w), "mono_ms": 1_000_000 + wall[n] - boot_wall[n],
                "interval_ms": PERIOD_MS, "version": _version(sc, n, w),
                "feature_flags": {"supported": VERSION_FLAGS[_version(sc, n, w)], "enabled": _enabled(sc, n, w)},
                "groups": groups, "connections": 3, "sessions": 3, "links": 6, "queues": qrecs, "alarms": [],
            }  # fmt: skip
            if (n, w) in sc.doubles:  # an earlier record in the same window, wildly off: the later one must win
                early = copy.deepcopy(rec)
                early["wall_ms"] = ms(w) + 1 + _stepped(sc, n, w)
                early["mono_ms"] = 1_000_000 + ms(w) + 1 - boot_wall[n]
                for qr in early["queues"]:
                    qr["depth"] += 1000
                    qr["consumers"] = 0
                validate_record(early)
                writers[n].append(early)
                seq[n] += 1
                rec["seq"] = seq[n]
                written += 1
            validate_record(rec)
            writers[n].append(rec)
            seq[n] += 1
            written += 1
    for wr in writers.values():
        wr._close()
    files = sum(1 for _ in root.rglob("*.ndjson"))
    return {"records": written, "files": files}


# ------------------------------------------------------------------ the two sets the tests use

N3 = ["n1", "n2", "n3"]
QQ = "qq:/qq1"


def faulty(seed: int = 7) -> Scenario:
    """3 nodes, 125 windows of 5 s. What the audit must find is listed in test_audit_jobs.py."""
    return Scenario(
        nodes=N3, windows=125, seed=seed,
        groups={"metadata": N3, QQ: N3},
        leadership={
            "metadata": [(0, 30, {"n1": 1}), (32, 115, {"n2": 2}), (119, 999, {"n2": 3})],
            QQ: [(0, 60, {"n2": 1}), (60, 70, {"n3": 2}), (70, 75, {"n1": 3, "n3": 3}), (75, 90, {"n3": 4}),
                 (91, 115, {"n1": 5}), (119, 999, {"n1": 6})],
        },
        queues=[QueueSpec("qq1", "quorum", group=QQ), QueueSpec("cq1", "classic", home="n3"),
                QueueSpec("cq2", "classic", home="n1", target=50)],
        partitions=[(30, 45, [["n1"], ["n2", "n3"]]), (115, 119, [["n1"], ["n2"], ["n3"]])],
        one_way=[(20, 25, "n1", "n3")],
        down=[(90, 93, "n3")],
        losses=[("cq1", 50, 7), ("qq1", 80, 3)],
        consumer_stops=[("cq2", 100, 111)],
        backlogs=[("qq1", 100, 114)],
        torn=["n3"],
        # a rolling upgrade: n3 comes back from its restart on 0.2.0, n1 and n2 follow; stream_queue,
        # new in 0.2.0, is enabled once all three run it (n2 learns of it a window later)
        upgrades=[("n3", 93, "0.2.0"), ("n1", 100, "0.2.0"), ("n2", 105, "0.2.0")],
        flags_enabled={"stream_queue": {"n1": 110, "n3": 110, "n2": 111}},
    )  # fmt: skip


def healthy(seed: int = 11) -> Scenario:
    """4 nodes, 120 windows, nothing wrong; timer drift (a doubled and a skipped record), and
    the wall clock of n3 (qq1's leader) stepped 7 minutes ahead for 15 windows."""
    nodes = ["n1", "n2", "n3", "n4"]
    return Scenario(
        nodes=nodes, windows=120, seed=seed,
        groups={"metadata": nodes, QQ: ["n2", "n3", "n4"]},
        leadership={"metadata": [(0, 999, {"n1": 1})], QQ: [(0, 999, {"n3": 1})]},
        queues=[QueueSpec("qq1", "quorum", group=QQ), QueueSpec("cq1", "classic", home="n2"),
                QueueSpec("cq2", "classic", home="n4", target=20, consumers=1)],
        doubles=[("n2", 50), ("n4", 77)],
        skips=[("n1", 60), ("n4", 90)],
        clock_steps=[("n3", 70, 420_000), ("n3", 85, -420_000)],
    )  # fmt: skip
