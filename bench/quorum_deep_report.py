"""The report of bench/quorum_deep.py: per-phase figures and the markdown table it prints."""

from __future__ import annotations

MIB = 1 << 20


def mib(x: float | None) -> str:
    return "—" if x is None else f"{x / MIB:,.0f}"


def at_depth(samples: list[dict], leader: int, want: int, phase: str = "publish") -> dict | None:
    """The first sample (publish or later) whose leader depth reached `want`."""
    started = False
    for s in samples:
        started = started or s["phase"] == phase
        d = s["nodes"][leader].get("depth")
        if started and d is not None and d >= want:
            return s
    return None


def last_of(samples: list[dict], phase: str) -> dict | None:
    found = [s for s in samples if s["phase"] == phase]
    return found[-1] if found else None


def window_max(records: list[tuple[float, float | None]], lo: float, hi: float) -> float | None:
    """Longest answer among probes that were in flight at some time in [lo, hi]."""
    vals = [took for start, took in records if took is not None and start <= hi and start + took >= lo]
    return max(vals) if vals else None


def pct(vals: list[float], q: float) -> float | None:
    if not vals:
        return None
    vals = sorted(vals)
    return vals[min(len(vals) - 1, int(q * len(vals)))]


def _growth(before: dict, after: dict) -> str:
    if before.get("rss") is None or after.get("rss") is None:
        return "—"
    return f"{(after['rss'] - before['rss']) / MIB:+,.0f}"


def _heap(h: dict | None) -> str:
    return "—" if h is None else f"{h['system'] / MIB:,.1f} / {h['in_use'] / MIB:,.1f}"


def report(res: dict) -> str:
    samples = res.get("samples") or []
    if not samples:
        return f"no samples: {res.get('aborted') or res}"
    n = len(samples[0]["nodes"])
    leader = res.get("leader", 0)
    total = res["messages"]
    body_bytes = total * res["body"]
    lines = []
    role = {}
    for i in range(n):
        parts = ["leader" if i == leader else "follower"]
        if i == res.get("publisher"):
            parts.append("publisher")
        if i == res.get("consumer"):
            parts.append("consumer")
        if (res.get("restart") or {}).get("node") == i:
            parts.append("restarted")
        role[i] = " + ".join(parts)
    marks = [(f"{int(f * 100)} % ({int(total * f):,})", at_depth(samples, leader, int(total * f)))
             for f in (0.25, 0.5, 0.75, 1.0)]  # fmt: skip
    marks.insert(0, ("0 (idle, queue declared)", last_of(samples, "idle")))
    marks.append(("full, end of the rest before the drain", last_of(samples, "full")))
    marks.append(("after the drain (0 left)", last_of(samples, "drained")))
    marks.append(("end (rest after the drain)", last_of(samples, "end")))
    hdr = " | ".join(f"n{i} {role[i]}" for i in range(n))
    lines.append(f"RSS MiB per node (body bytes published: {body_bytes / MIB:,.0f} MiB)\n")
    lines.append(f"| depth (leader's view) | t s | {hdr} | load avg |")
    lines.append("|---|---|" + "---|" * n + "---|")
    for label, s in marks:
        if s is None:
            lines.append(f"| {label} | — |" + " — |" * n + " — |")
            continue
        cells = " | ".join(mib(x.get("rss")) for x in s["nodes"])
        lines.append(f"| {label} | {s['t']:.0f} | {cells} | {s['load1']:.1f} |")
    idle = marks[0][1]
    for label, s in (("**growth idle → 100 %**", marks[4][1]), ("growth idle → full, after the rest", marks[5][1]),
                     ("growth idle → after the drain", marks[6][1])):  # fmt: skip
        if idle is not None and s is not None:
            cells = " | ".join(_growth(idle["nodes"][i], s["nodes"][i]) for i in range(n))
            lines.append(f"| {label} | | {cells} | |")
    peak = [max((s["nodes"][i].get("hwm", 0) for s in samples), default=0) for i in range(n)]
    peak_rss = [max((s["nodes"][i].get("rss", 0) for s in samples), default=0) for i in range(n)]
    lines.append(f"| **peak (VmHWM)** | | {' | '.join(f'**{mib(p)}**' for p in peak)} | |")
    lines.append(f"| peak / body bytes | | {' | '.join(f'{p / body_bytes:.2f}' for p in peak)} | |")
    lines.append("")

    full = at_depth(samples, leader, total) or last_of(samples, "full")
    lines.append("| per node | " + " | ".join(f"n{i}" for i in range(n)) + " |")
    lines.append("|---|" + "---|" * n)

    def row(label: str, cells: list[str]) -> None:
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    fulls = last_of(samples, "full") or full
    row("peak VmRSS sampled MiB", [mib(p) for p in peak_rss])
    if fulls:
        row("snapshot file at full depth", [f"{x.get('snap', 0) / MIB:.1f} MiB" for x in fulls["nodes"]])
        row("data dir at full depth MiB", [mib(x.get("disk")) for x in fulls["nodes"]])
        row("of which Raft log store MiB", [mib(x.get("log_disk")) for x in fulls["nodes"]])
    end = last_of(samples, "end") or samples[-1]
    row("data dir at the end MiB", [mib(x.get("disk")) for x in end["nodes"]])
    writes = res.get("snap_writes") or [[] for _ in range(n)]
    pub_t = res.get("publish_t") or [0, 0]
    con_t = res.get("consume_t") or [1e18, 1e18]
    row("snapshots written (publish / drain)",
        [f"{sum(1 for t, _ in w if pub_t[0] <= t <= pub_t[-1] + 1)} / "
         f"{sum(1 for t, _ in w if con_t[0] <= t <= con_t[-1] + 1)}" for w in writes])  # fmt: skip
    row("largest snapshot MiB", [f"{max((sz for _, sz in w), default=0) / MIB:.1f}" for w in writes])
    for phase, heaps in (res.get("heap") or {}).items():  # idle, full, drained (--malloc-stats)
        row(f"glibc heap {phase}: held / in use MiB", [_heap(h) for h in heaps])
    probes = res.get("probes") or [[] for _ in range(n)]
    ok = [[took for _, took in p if took is not None] for p in probes]
    row("API answers (GET /api/overview)", [str(len(v)) for v in ok])
    row("answer p50 / p99 ms", [f"{(pct(v, 0.5) or 0) * 1e3:.0f} / {(pct(v, 0.99) or 0) * 1e3:.0f}" for v in ok])
    row("longest answer s, publish", [f"{window_max(p, pub_t[0], pub_t[-1]) or 0:.2f}" for p in probes])
    row("longest answer s, drain", [f"{window_max(p, con_t[0], con_t[-1]) or 0:.2f}" for p in probes])
    row("longest answer s, overall", [f"{max(v, default=0):.2f}" for v in ok])
    comp = []
    for i in range(n):
        vals = [window_max(probes[i], t - 2.0, t + 0.5) or 0 for t, _ in writes[i]]
        comp.append(f"{max(vals, default=0):.2f} (over {len(vals)})")
    row("longest answer s within 2 s of a snapshot write", comp)
    row("probe still waiting at the end s", [f"{x:.1f}" for x in res.get("probe_waiting_at_end", [0] * n)])
    lines.append("")
    lines.append(f"- published {res.get('published_accepted', 0):,} accepted ({res.get('published_other', 0)} "
                 f"other outcomes) at {res.get('publish_rate', 0):,} msg/s; consumed {res.get('consumed', 0):,} at "
                 f"{res.get('consume_rate', 0):,} msg/s; left in the queue after the drain: "
                 f"{res.get('left_in_queue')}")  # fmt: skip
    lines.append(f"- every replica held all messages {res.get('replicas_full_after_s')} s after the last confirm; "
                 f"load average at start {res.get('load_start')}, publish start/end {res.get('load_publish_start')} / "
                 f"{res.get('load_publish_end')}, drain start/end {res.get('load_consume_start')} / "
                 f"{res.get('load_consume_end')}, max seen "
                 f"{max(s['load1'] for s in samples):.1f}")  # fmt: skip
    if res.get("restart"):
        lines.append(f"- restart: {res['restart']}")
    if res.get("aborted"):
        lines.append(f"- **ABORTED: {res['aborted']}**")
    errs = (res.get("publish_errors") or []) + ([res["receiver"]["error"]] if res.get("receiver", {}).get("error")
                                               else [])  # fmt: skip
    if errs:
        lines.append(f"- client errors: {errs}")
    return "\n".join(lines)
