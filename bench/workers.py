#!/usr/bin/env python3
"""A node with several workers (issue 36) against one, and RabbitMQ 3.10, in one run.

For each setup (Warren with each --workers count given, then RabbitMQ 3.10), on a
fresh broker: QUEUES durable classic queues, each with one arrow sender and one arrow
receiver running at the same time (bench/pair.py), COUNT messages of BODY bytes per
queue. Reported per setup: the aggregate rate (every message received, over the time
from the first pair's first send to the last pair's last receive), the slowest pair's
own end-to-end rate, the broker's CPU per message (user + system of every broker
process over the run, divided by the messages delivered), per Warren worker and in
total, and how the kernel spread the clients' connections over the workers.

    .venv/bin/python bench/workers.py --workers 1,2 --queues 8 --count 50000
    .venv/bin/python bench/workers.py --workers 1,2 --queues 1 --count 200000 --no-rabbit
    .venv/bin/python bench/workers.py --workers 1,2 --queues 8 --quorum   # 3 nodes each, quorum queues

With --quorum every setup is a cluster of three nodes (three RabbitMQ 3.10 nodes for the
peer) and the queues are quorum queues of three replicas, declared through node i % 3;
queue i's sender and receiver connect to that node.

The clients share the machine's cores with the broker (on this 2-core machine that
matters: arrow's 16 processes take a part of them)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import pair  # noqa: E402
import procs  # noqa: E402
from clusters import RabbitCluster, WarrenCluster, trees_cpu_seconds  # noqa: E402
from rabbitmq import RabbitNode  # noqa: E402
from run import QueueSpec, declare_warren_queues  # noqa: E402

HOST = "127.0.0.1"


class Warren:
    def __init__(self, workers: int, port: int, http_port: int) -> None:
        self.workers, self.port, self.http_port = workers, port, http_port
        self.label = f"Warren, {workers} worker{'s' if workers > 1 else ''}"
        self.base = tempfile.mkdtemp(prefix="warren-bench-workers-")
        self.proc = None

    def start(self) -> None:
        procs.require_free(HOST, self.port, "Warren AMQP")
        cmd = [sys.executable, "-m", "node.cli", "server", "--data-dir", os.path.join(self.base, "data"),
               "--listen-host", HOST, "--amqp-port", str(self.port), "--http-port", str(self.http_port),
               "--metrics-port", "-1", "--grpc-port", "-1", "--workers", str(self.workers)]  # fmt: skip
        self.proc = procs.spawn(cmd, log_path=os.path.join(self.base, "server.out"), cwd=REPO)
        procs.wait_for(lambda: len(self._listening()) == self.workers and self._api_up(), 60, "Warren",
                       proc=self.proc, interval=0.1)  # fmt: skip

    def _listening(self) -> list[int]:
        out = []
        for p in self.pids():
            try:
                if any(c.status == psutil.CONN_LISTEN and c.laddr.port == self.port
                       for c in psutil.Process(p).net_connections("tcp")):  # fmt: skip
                    out.append(p)
            except psutil.Error:
                pass
        return out

    def _api_up(self) -> bool:
        return procs.port_open(HOST, self.http_port)

    def pids(self) -> list[int]:
        """The processes that serve (the workers; the node's one process with --workers 1)."""
        root = psutil.Process(self.proc.pid)
        children = root.children()
        return [c.pid for c in children] if self.workers > 1 else [root.pid]

    def declare(self, names: list[str]) -> None:
        declare_warren_queues(HOST, self.http_port, [QueueSpec(name, durable=True) for name in names])

    def address(self, name: str) -> str:
        return f"/queues/{name}"

    def port_for(self, i: int) -> int:
        return self.port

    def stop(self) -> None:
        if self.proc is not None:
            procs.stop(self.proc, term_timeout=30.0)


class Rabbit:
    label = "RabbitMQ 3.10"

    def __init__(self, port: int) -> None:
        self.port = port
        self.node = RabbitNode(amqp_port=port)

    def start(self) -> None:
        self.node.start()
        self.label = f"RabbitMQ {'.'.join(self.node.version().split('.')[:2])}"

    def pids(self) -> list[int]:
        root = psutil.Process(self.node.proc.pid)
        return [root.pid, *(c.pid for c in root.children(recursive=True))]

    def declare(self, names: list[str]) -> None:
        for name in names:
            self.node.declare_queue(name, durable=True)

    def address(self, name: str) -> str:
        return RabbitNode.address(name)

    def port_for(self, i: int) -> int:
        return self.port

    def stop(self) -> None:
        self.node.stop()


class Quorum:
    """Three nodes (bench/clusters.py's WarrenCluster or RabbitCluster) and quorum queues of three
    replicas; queue i is declared through node i % 3, whose port its clients use."""

    def __init__(self, cluster, label: str) -> None:
        self.cluster, self.label = cluster, label

    def start(self) -> None:
        self.cluster.start()
        self.label = self.label.replace("RabbitMQ 3.10", self.cluster.label)

    def pids(self) -> list[int]:
        return [pid for tree in self.cluster.process_trees() for pid in tree]

    def declare(self, names: list[str]) -> None:
        for i, name in enumerate(names):
            self.cluster.declare(name, 3, via=i % 3)
        for name in names:
            self.cluster.wait_queue(name)

    def address(self, name: str) -> str:
        return self.cluster.address(name)

    def port_for(self, i: int) -> int:
        return self.cluster.amqp_port(i % 3)

    def stop(self) -> None:
        self.cluster.stop()


def measure(broker, queues: int, args) -> dict:
    names = [f"bench-{i}" for i in range(queues)]
    broker.declare(names)
    results: list[dict | None] = [None] * queues

    def one(i: int) -> None:
        results[i] = pair.run_pair(host=HOST, port=broker.port_for(i), address=broker.address(names[i]), count=args.count,
                                   body=args.body, credit=args.credit, window=args.credit, durable=True,
                                   arrow=args.arrow, idle_timeout=30.0)  # fmt: skip

    pids = broker.pids()
    rss_start = rss_mb(pids)
    before = trees_cpu_seconds([[p] for p in pids])
    threads = [threading.Thread(target=one, args=(i,)) for i in range(queues)]
    for t in threads:
        t.start()
    time.sleep(2.0)  # every pair connected by now
    ports = {broker.port_for(i) for i in range(queues)}
    spread = [connections(p, ports) for p in pids]
    for t in threads:
        t.join()
    spent = [b - a for a, b in zip(before, trees_cpu_seconds([[p] for p in pids]), strict=True)]
    rss_end = rss_mb(pids)
    ok = all(r is not None and r.get("ok") for r in results)
    done = [r for r in results if r and r.get("ok")]
    messages = queues * args.count
    span = (max(r["receiver"]["t_last"] for r in done) - min(r["sender"]["t_first"] for r in done)) if done else 0
    return {"ok": ok, "aggregate": messages / span if ok and span > 0 else 0.0,
            "slowest": min((r["e2e_rate"] for r in done), default=0.0), "span_s": span,
            "connections_by_process": spread, "cpu_us_per_msg": sum(spent) / messages * 1e6,
            "cpu_us_per_msg_by_process": [s / messages * 1e6 for s in spent],
            "rss_mb_start": rss_start, "rss_mb_end": rss_end,
            "errors": [r.get("error") for r in results if r and not r.get("ok")]}  # fmt: skip


def rss_mb(pids: list[int]) -> list[float]:
    """Each process's resident memory now, MB (0 for one gone)."""
    out = []
    for p in pids:
        try:
            out.append(psutil.Process(p).memory_info().rss / 1e6)
        except psutil.Error:
            out.append(0.0)
    return out


def connections(pid: int, ports: set[int]) -> int:
    try:
        return sum(1 for c in psutil.Process(pid).net_connections("tcp")
                   if c.status == psutil.CONN_ESTABLISHED and c.laddr.port in ports)  # fmt: skip
    except psutil.Error:
        return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", default="1,2", help="comma list of Warren worker counts")
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--count", type=int, default=50_000, help="messages per queue")
    ap.add_argument("--body", type=int, default=12)
    ap.add_argument("--credit", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=1, help="runs per setup on fresh brokers; the median is reported")
    ap.add_argument("--no-rabbit", action="store_true")
    ap.add_argument("--port", type=int, default=5674)
    ap.add_argument("--http-port", type=int, default=15674)
    ap.add_argument("--rabbit-port", type=int, default=5682)
    ap.add_argument("--arrow", default=pair.DEFAULT_ARROW)
    ap.add_argument("--json", help="write the raw results here")
    ap.add_argument("--quorum", action="store_true", help="3-node clusters and quorum queues (see above)")
    args = ap.parse_args(argv)
    procs.install_handlers()
    counts = [int(w) for w in args.workers.split(",")]
    if args.quorum:
        setups = [lambda w=w: Quorum(WarrenCluster(3, extra_args=["--workers", str(w)]),
                                     f"Warren, 3 nodes x {w} worker{'s' if w > 1 else ''}") for w in counts]
        if not args.no_rabbit:
            setups.append(lambda: Quorum(RabbitCluster(3), "RabbitMQ 3.10, 3 nodes"))
    else:
        setups = [lambda w=w: Warren(w, args.port, args.http_port) for w in counts]
        if not args.no_rabbit:
            setups.append(lambda: Rabbit(args.rabbit_port))
    rows = []
    for make in setups:
        runs = []
        for _ in range(args.repeat):
            broker = make()
            broker.start()
            try:
                runs.append(measure(broker, args.queues, args))
            finally:
                broker.stop()
            print(f"[bench] {broker.label}: {runs[-1]}", file=sys.stderr)
        best = sorted(runs, key=lambda r: r["aggregate"])[len(runs) // 2]
        rows.append((broker.label, best, [r["aggregate"] for r in runs]))
    base = rows[0][1]["aggregate"] or 1.0
    kind = "quorum queues of 3 replicas" if args.quorum else "durable classic queues"
    print(f"\n{args.queues} {kind}, 1 arrow sender + 1 receiver each, {args.count:,} x "
          f"{args.body} B per queue, credit {args.credit}\n")
    print("| setup | aggregate msg/s | vs first row | slowest pair | broker CPU µs/msg (per process) "
          "| connections per worker | RSS MB per process, declared -> after the run | runs |")
    print("|---|---|---|---|---|---|---|---|")
    for label, r, all_runs in rows:
        warren = "Warren" in label
        per = " + ".join(f"{x:.1f}" for x in r["cpu_us_per_msg_by_process"]) if warren else "-"
        spread = " / ".join(str(n) for n in r["connections_by_process"] if n or not args.quorum) if warren else "-"
        rss = " + ".join(f"{a:.0f} -> {b:.0f}" for a, b in zip(r["rss_mb_start"], r["rss_mb_end"], strict=True))
        print(f"| {label} | {r['aggregate']:,.0f} | {r['aggregate'] / base:.2f}x | {r['slowest']:,.0f} | "
              f"{r['cpu_us_per_msg']:.1f} ({per}) | {spread} | {rss} | {', '.join(f'{x:,.0f}' for x in all_runs)} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"setup": label, **r} for label, r, _ in rows], f, indent=1)
    return 0 if all(r["ok"] for _, r, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
