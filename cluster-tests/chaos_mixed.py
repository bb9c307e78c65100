"""A long mixed run: a fresh cluster, every kind of queue under load at once, metadata changes,
and the randomised nemesis (chaos_nemesis.py) for DURATION seconds; then every fault healed,
the cluster converged, the queues drained, and every checker run.

    .venv/bin/python cluster-tests/chaos_mixed.py --seed 7 --duration 180 [--out DIR]
    make chaos SEED=7 DURATION=180

The workload (each queue's clients with a history of their own, checked on its own):
- a quorum queue declared through the metadata leader, publishers on every node, consumers on
  the others; total-queue checker;
- a classic queue on the second node, publishers on every node and consumers on the others
  (through the proxy); total-queue checker;
- a stream on the third node, publishers on every node, one consumer on its node reading by
  offset (chaos_stream.py); total-queue checker (every confirmed offset read, none twice) and
  check_stream_order (each publisher's messages in publish order);
- dead-lettering: a quorum queue whose messages expire at once (x-message-ttl 100 ms),
  dead-lettered at least once to another quorum queue, publishers on every node and
  consumers of the target on the others; total-queue checker from the source's confirms to
  the target's deliveries (copies allowed unmarked: at least once);
- Direct Reply-To requests (chaos_rpc.py) through a quorum request queue: requesters on
  every node, responders on the others; check_rpc;
- exchanges, bindings, queues, users, vhosts, policies and permissions made and removed
  through random nodes (MetadataWorkload); check_metadata.

Writes (in --out, default cluster-tests/chaos-runs/seed-N): history.json (nemesis and
metadata), history-<queue type>.json, history-rpc.json, schedule.txt, report.txt, row.md (the docs/chaos.md
table row) and, when a check failed, every node's log. Exit status 1 when any check failed.
"""

from __future__ import annotations

import argparse
import secrets
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))  # http_json, as conftest.py

from chaos_audit import check_audit, export_snapshots, run_audit, write_events
from chaos_checker import ENQUEUE, QueueCheck, check_stream_order, check_total_queue
from chaos_cluster import ComposeCluster
from chaos_history import OK, History
from chaos_nemesis import CLOCK_KINDS, DEFAULT_KINDS, KINDS, Nemesis, Step, schedule
from chaos_report import Report
from chaos_rpc import RpcCheck, RpcWorkload, check_rpc
from chaos_scenarios import converge, poll
from chaos_stream import StreamWorkload
from chaos_workload import MetadataWorkload, QueueWorkload, declare_queue, finish_all

RATE = 10.0  # messages/s per publisher: 12 publishers on a 2-core machine
METADATA_RATE = 2.0
RPC_RATE = 4.0  # requests/s per requester
QUEUE_TYPES = ("quorum", "classic", "stream")
# a quorum queue whose messages expire at once, dead-lettered to its target queue at least once
DEAD_LETTER_ARGUMENTS = {"x-message-ttl": 100, "x-dead-letter-exchange": "", "x-dead-letter-strategy": "at-least-once",
                         "x-overflow": "reject-publish"}  # fmt: skip


class MixedRun:
    def __init__(self, cluster: ComposeCluster, seed: int, duration: float, steps: list[Step] | None = None,
                 kinds: tuple[str, ...] = DEFAULT_KINDS) -> None:  # fmt: skip
        self.c = cluster
        self.seed, self.duration = seed, duration
        self.steps = schedule(seed, duration, cluster.nodes, kinds) if steps is None else steps
        self.report = Report(
            f"mixed seed {seed}", cluster.history, setup=f"{len(cluster.nodes)} nodes, {duration:.0f}s"
        )
        self.workloads: dict[str, QueueWorkload] = {}
        self.checks: dict[str, QueueCheck] = {}
        self.nemesis: Nemesis | None = None
        self.rpc: RpcWorkload | None = None
        self.rpc_check: RpcCheck | None = None
        self.tag = secrets.token_hex(3)  # queue names of their own: a cluster may serve several runs
        self.audit_data: dict | None = None  # the Spark audit's report data, once audit() ran

    def run(self) -> Report:
        r = self.report
        try:
            self._run()
        except Exception as e:  # the report says where it stopped
            r.check("ran to the end", False, f"{type(e).__name__}: {str(e)[:3000]}")
        finally:
            for w in self.workloads.values():
                w.stop()
            if self.rpc is not None:
                self.rpc.stop(drain_timeout=0)
        r.duration = time.monotonic() - r.started
        return r

    def _run(self) -> None:
        c, r = self.c, self.report
        leader = c.wait_converged(timeout=60)
        c.http(leader, "PUT", "/api/feature_flags/quorum_queue_v1/enable", {}, timeout=15)
        homes = [leader, *[n for n in c.nodes if n != leader]]
        for qtype, node in zip(QUEUE_TYPES, homes, strict=False):
            queue = f"chaos-mixed-{qtype}-{self.tag}"
            declare_queue(c, node, queue, qtype)
            others = [n for n in c.nodes if n != node]
            if qtype == "stream":  # one consumer, on the stream's node (chaos_stream.py)
                w = StreamWorkload(c, History(), queue, node, list(c.nodes), [node], rate=RATE)
            else:
                w = QueueWorkload(c, History(), queue, node, list(c.nodes), others, rate=RATE)
            self.workloads[qtype] = w
        # dead-lettering: messages expire in a quorum queue, at-least-once to another one
        source, target = f"chaos-mixed-dlx-{self.tag}", f"chaos-mixed-dlx-target-{self.tag}"
        declare_queue(c, leader, target, "quorum")
        declare_queue(c, leader, source, "quorum", DEAD_LETTER_ARGUMENTS | {"x-dead-letter-routing-key": target})
        consumers = [n for n in c.nodes if n != leader]
        self.workloads["dead-letter"] = QueueWorkload(c, History(), source, leader, list(c.nodes), consumers,
                                                      rate=RATE, consume_queue=target)  # fmt: skip
        rpc_queue = f"chaos-mixed-rpc-{self.tag}"
        declare_queue(c, leader, rpc_queue, "quorum")
        self.rpc = RpcWorkload(c, History(), rpc_queue, list(c.nodes), consumers, rate=RPC_RATE)
        self.rpc.start()
        metadata = MetadataWorkload(c, c.history, rate=METADATA_RATE)
        metadata.start()
        for w in self.workloads.values():
            w.start()
        r.check("every queue confirms before the faults", self._confirming(time.monotonic() - 3600, 60))

        self.nemesis = Nemesis(c, queue=self.workloads["quorum"].queue, keep=(self.workloads["classic"].queue_node,))
        stop = threading.Event()
        started = time.monotonic()
        try:
            self.nemesis.run(self.steps, stop, started)
            time.sleep(max(0.0, started + self.duration - time.monotonic()))
        finally:
            self.nemesis.heal_all()
        r.check("every scheduled fault was applied and healed", len(self.nemesis.applied) == len(self.steps),
                f"{len(self.nemesis.applied)} of {len(self.steps)}")  # fmt: skip
        converge(c, r, bound=60)
        healed = time.monotonic()
        r.check("every queue confirms again after the faults", self._confirming(healed, 60))
        metadata.stop()
        self.rpc.stop()
        finished = finish_all(list(self.workloads.values()), drain_timeout=90)
        for (qtype, w), drained in zip(self.workloads.items(), finished, strict=True):
            r.check(f"{qtype}: drained after the faults", drained, w.undrained or "")
        errors = [e for w in [*self.workloads.values(), metadata, self.rpc] for e in w.errors]
        r.check("workload clients ran without harness errors", not errors, "; ".join(errors)[:2000])
        for qtype, w in self.workloads.items():
            # at least once: a new leader re-sends what it holds, a copy the target cannot mark
            q = check_total_queue(w.history.ops(), allow_unmarked_duplicates=qtype == "dead-letter")
            self.checks[qtype] = q
            r.check(f"{qtype}: total-queue", q.valid, "; ".join(q.problems()))
            r.check(f"{qtype}: messages flowed", q.confirmed > 0 and q.consumed > 0, f"confirmed {q.confirmed}")
            if qtype == "stream":
                s = check_stream_order(w.history.ops())
                r.check("stream: each publisher's messages read in order, none twice", s.valid,
                        f"{s.read} read; " + "; ".join(s.problems()))  # fmt: skip
        rpc = self.rpc_check = check_rpc(self.rpc.history.ops())
        r.check("rpc: every reply reached the requester that asked, or is counted dropped", rpc.valid,
                rpc.summary())  # fmt: skip
        r.check("rpc: requests flowed, every confirmed request answered", rpc.received > 0 and rpc.unanswered == 0,
                rpc.summary())  # fmt: skip
        m = r.check_metadata(metadata.read_all)
        r.check("metadata changes were acknowledged", m.ok > 0, f"ok {m.ok} of {m.ops}")

    def audit(self, out: Path) -> None:
        """The Spark audit of the run (chaos_audit.py), its checks added to the report; the cluster
        must still be up (its snapshots are exported first)."""
        try:
            snapshots = export_snapshots(self.c, out / "snapshots")
            events = write_events(self.c.history, out / "events.ndjson")
            data = run_audit(snapshots, out / "events.ndjson", out / "audit")
        except Exception as e:
            self.report.check("audit: ran", False, f"{type(e).__name__}: {str(e)[:3000]}")
            return
        lost = {self.workloads[t].queue: len(q.lost) for t, q in self.checks.items() if t != "dead-letter"}
        check_audit(self.report, data, events, lost)
        self.audit_data = data

    def _confirming(self, since: float, timeout: float, count: int = 5) -> bool:
        """Until every queue has `count` confirms that ended after `since` (monotonic)."""

        def enough() -> bool:
            for w in self.workloads.values():
                origin = time.monotonic() - w.history.now()
                if sum(origin + o.end > since for o in w.history.ops(f=ENQUEUE, type=OK)) < count:
                    return False
            return True

        return bool(poll(enough, timeout, interval=0.25))

    # -- output -------------------------------------------------------------------------------------

    def schedule_text(self) -> str:
        hit = {id(step): what for step, what in (self.nemesis.applied if self.nemesis else [])}
        return "\n".join(s.describe() + (f"  -> {hit[id(s)]}" if id(s) in hit else "  (not run)") for s in self.steps)

    def totals(self) -> dict:
        qs = self.checks.values()
        return {"published": sum(q.attempted for q in qs), "confirmed": sum(q.confirmed for q in qs),
                "lost": sum(len(q.lost) for q in qs), "duplicated": sum(len(q.duplicated) for q in qs),
                "unavailability": max((q.longest_unavailability for q in qs), default=0.0)}  # fmt: skip

    def row(self) -> str:
        """The docs/chaos.md results row: seed | nodes | duration | faults | published |
        confirmed | lost | duplicated | longest unavailability | RPC replies received/dropped |
        metadata violations | result."""
        t = self.totals()
        kinds: dict[str, int] = {}
        for s in self.steps:
            kinds[s.kind] = kinds.get(s.kind, 0) + 1
        faults = f"{len(self.steps)}: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
        m, rpc = self.report.metadata, self.rpc_check
        replies = f"{rpc.received}/{rpc.dropped}" if rpc else "?"
        return (f"| {self.seed} | {len(self.c.nodes)} | {self.duration:.0f}s | {faults} | {t['published']} | "
                f"{t['confirmed']} | {t['lost']} | {t['duplicated']} | {t['unavailability']:.1f}s | {replies} | "
                f"{m.violations if m else '?'} | {'ok' if self.report.ok else 'FAILED'} |")  # fmt: skip

    def text(self) -> str:
        parts = [self.report.text(), "  schedule:", "    " + self.schedule_text().replace("\n", "\n    ")]
        for qtype, q in self.checks.items():
            parts.append(f"  {qtype}: " + q.summary().replace("\n", "\n    "))
        if self.rpc_check is not None:
            parts.append("  rpc: " + self.rpc_check.summary())
        return "\n".join(parts)

    def write(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.c.history.dump(out / "history.json")
        for qtype, w in self.workloads.items():
            w.history.dump(out / f"history-{qtype}.json")
        if self.rpc is not None:
            self.rpc.history.dump(out / "history-rpc.json")
        (out / "schedule.txt").write_text(self.schedule_text() + "\n")
        (out / "report.txt").write_text(self.text() + "\n")
        (out / "row.md").write_text(self.row() + "\n")


def main(argv: list[str]) -> int:
    from chaos_cluster import FIVE_NODES, NODES, prepare_docker

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--duration", type=float, default=180.0)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--out", default="")
    parser.add_argument("--kinds", default=",".join(DEFAULT_KINDS),
                        help=f"comma-separated fault kinds to draw from (known: {','.join(KINDS)})")  # fmt: skip
    parser.add_argument("--source", default="worktree", choices=["worktree", "head"])
    parser.add_argument("--no-audit", action="store_true", help="skip the Spark audit of the run's snapshots")
    args = parser.parse_args(argv)
    nodes = {len(NODES): NODES, len(FIVE_NODES): FIVE_NODES}.get(args.nodes)
    if nodes is None:
        parser.error(f"--nodes {args.nodes}: 3 (deploy/docker-compose.yml) or 5 (with docker-compose.five.yml)")
    if args.duration < 30:
        parser.error(f"--duration {args.duration}: at least 30 seconds")
    kinds = tuple(k for k in args.kinds.split(",") if k)
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown or not kinds:
        parser.error(f"--kinds {args.kinds!r}: unknown {unknown}; known: {','.join(KINDS)}")
    name = f"seed-{args.seed}" if args.nodes == len(NODES) else f"seed-{args.seed}-{args.nodes}-nodes"
    out = Path(args.out) if args.out else Path(__file__).resolve().parent / "chaos-runs" / name
    prepared = prepare_docker(source=args.source)
    cluster = ComposeCluster(prepared.image, History(), nodes=nodes, artifacts=out, compose=prepared.compose,
                             faketime=nodes if CLOCK_KINDS & set(kinds) else ())  # fmt: skip
    try:
        cluster.up()
        run = MixedRun(cluster, args.seed, args.duration, kinds=kinds)
        print("schedule:\n" + "\n".join(s.describe() for s in run.steps), flush=True)
        run.run()
        if not args.no_audit:
            run.audit(out)
        run.write(out)
        if not run.report.ok:
            cluster.save_artifacts()
    finally:
        cluster.down()
    print(run.text())
    print(f"\n{run.row()}\n(history and report in {out})")
    return 0 if run.report.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
