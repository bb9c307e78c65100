#!/usr/bin/env python3
"""A deep classic queue, Warren beside RabbitMQ 3.10 in the same run.

Issue [3/9] "Deep queues": a backlog larger than memory must live on disk, and
a restart must not read it back. For each broker in turn (one node, fresh
data directory) this script:

1. declares two durable classic queues through the HTTP API; on `shallow`
   runs an arrow pair (sender and receiver together, so the queue stays
   empty) of ``--baseline`` messages: the empty queue's publish and drain
   rates, the reference for the deep ones;
2. publishes ``--messages`` (1,000,000) durable messages of ``--body``
   (1024) B to `deep` with confirms (``arrow send``, window 1000), no
   consumer: the publish rate and the peak RSS;
3. rests ``--rest`` s: RSS at rest;
4. stops the node (SIGTERM, or SIGKILL with ``--restart kill``; a list such
   as ``kill,clean`` does one after the other) and starts
   it again on the same data: the time
   from the start to the AMQP port accepting ("listening") and to the first
   message received by a receiver started as soon as the port accepts (it
   takes 1 message), then rests: RSS after the restart;
5. drains the rest with ``arrow receive``: the drain rate and peak RSS, then
   rests: RSS after the drain.

RSS is VmRSS sampled every ``--interval`` (0.25 s) and summed over the
broker's process tree (RabbitMQ's beam.smp and helpers; Warren is one
process). The output is a markdown table (stdout) and, with ``--json``, the
raw figures; progress goes to stderr.

    .venv/bin/python bench/deep.py                           # 1M x 1 KB, both brokers
    .venv/bin/python bench/deep.py --messages 100000         # quick
    .venv/bin/python bench/deep.py --messages 5000000 --brokers warren
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import pair  # noqa: E402
import procs  # noqa: E402
from quorum_deep_sampling import tree_pids  # noqa: E402
from rabbitmq import RabbitNode  # noqa: E402
from run import declare_warren_queues  # noqa: E402

MIB = 1024 * 1024
DEEP, SHALLOW = "deep", "shallow"


def rss_bytes(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
                        break
        except OSError:
            pass
    return total


class Sampler(threading.Thread):
    """RSS of the broker's process tree every `interval` s; `mark()` starts a
    new phase whose peak is kept."""

    def __init__(self, side: Any, interval: float) -> None:
        super().__init__(daemon=True)
        self.side, self.interval = side, interval
        self.stopped = threading.Event()
        self.last = 0
        self.peak = 0

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            pid = self.side.pid()
            if pid is None:
                continue
            rss = rss_bytes(tree_pids(pid))
            self.last = rss
            self.peak = max(self.peak, rss)

    def mark(self) -> int:
        """The peak since the last mark; a new phase starts."""
        peak, self.peak = self.peak, 0
        return peak

    def now(self) -> int:
        """RSS sampled right now."""
        pid = self.side.pid()
        return rss_bytes(tree_pids(pid)) if pid is not None else 0


class WarrenSide:
    key, label = "warren", "Warren"
    host = "127.0.0.1"

    def __init__(self, args: Any) -> None:
        self.port, self.http_port = args.warren_port, args.warren_http_port
        self.base = tempfile.mkdtemp(prefix="warren-bench-deep-")
        self.data_dir = os.path.join(self.base, "data")
        self.log_path = os.path.join(self.base, "server.out")
        self.proc: subprocess.Popen | None = None
        self.keep = args.keep

    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def spawn(self) -> float:
        """Starts the node; returns the wall time it was started at."""
        procs.require_free(self.host, self.port, "Warren AMQP")
        cmd = [sys.executable, "-m", "node.cli", "server", "--data-dir", self.data_dir, "--listen-host", self.host,
               "--amqp-port", str(self.port), "--http-port", str(self.http_port), "--metrics-port", "-1",
               "--grpc-port", "0"]  # fmt: skip
        t0 = time.time()
        self.proc = procs.spawn(cmd, log_path=self.log_path, cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO))
        return t0

    def start(self) -> None:
        self.spawn()
        procs.wait_for(lambda: procs.port_open(self.host, self.port), 120, "Warren", proc=self.proc, interval=0.05,
                       log_path=self.log_path)  # fmt: skip
        declare_warren_queues(self.host, self.http_port, [_Q(DEEP), _Q(SHALLOW)])

    def stop_node(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None:
            procs.stop(self.proc, term_timeout=60.0, sig=sig)
            self.proc = None

    def close(self) -> None:
        self.stop_node()
        if not self.keep:
            shutil.rmtree(self.base, ignore_errors=True)

    def address(self, queue: str) -> str:
        return f"/queues/{queue}"

    def version(self) -> str:
        return subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip()  # fmt: skip


class _Q:
    def __init__(self, name: str) -> None:
        self.name, self.durable = name, True


class RabbitSide:
    key, label = "rabbitmq", "RabbitMQ 3.10"
    host = "127.0.0.1"

    def __init__(self, args: Any) -> None:
        self.base = tempfile.mkdtemp(prefix="warren-bench-deep-rabbit-")
        # Ports and node name of its own, so that a long run does not clash with
        # another benchmark's RabbitMQ node on the same machine.
        self.node = RabbitNode(base_dir=self.base, amqp_port=args.rabbit_port, mgmt_port=args.rabbit_mgmt_port,
                               dist_port=args.rabbit_dist_port, nodename=args.rabbit_nodename)  # fmt: skip
        self.port = self.node.amqp_port
        self.keep = args.keep
        self._starter: threading.Thread | None = None

    def pid(self) -> int | None:
        proc = self.node.proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def spawn(self) -> float:
        """Starts the node in a thread (RabbitNode.start waits for its HTTP
        API too); returns the wall time it was started at."""
        t0 = time.time()
        self._starter = threading.Thread(target=self.node.start, daemon=True)
        self._starter.start()
        return t0

    def start(self) -> None:
        self.node.start()
        for q in (DEEP, SHALLOW):
            self.node.declare_queue(q, durable=True)

    def stop_node(self, sig: int = signal.SIGTERM) -> None:
        if self._starter is not None:
            self._starter.join(300)
            self._starter = None
        if sig != signal.SIGTERM and self.node.proc is not None:
            procs.stop(self.node.proc, sig=sig)
            self.node.proc = None
        self.node.stop()

    def close(self) -> None:
        self.stop_node()
        if not self.keep:
            shutil.rmtree(self.base, ignore_errors=True)

    def address(self, queue: str) -> str:
        return RabbitNode.address(queue)

    def version(self) -> str:
        return self.node.version() if self.pid() is not None else "3.10"


def arrow(args: Any, side: Any, mode: str, count: int, timeout: float) -> dict:
    a = pair.arrow_args(side.host, side.port, side.address(DEEP), count, args.body, args.credit, args.window,
                        durable=True, settled=False, idle_timeout=args.idle_timeout)  # fmt: skip
    res = subprocess.run([args.arrow, mode, *a], capture_output=True, text=True, timeout=timeout)
    try:
        out = json.loads(res.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        raise RuntimeError(f"arrow {mode} gave no result: {res.stdout!r} {res.stderr!r}") from None
    if out.get("done") != count:
        raise RuntimeError(f"arrow {mode}: {out}")
    return out


def measure(args: Any, side: Any) -> dict:
    r: dict[str, Any] = {"broker": side.label}
    n = args.messages
    print(f"[deep] {side.label}: starting", file=sys.stderr)
    side.start()
    r["version"] = side.version()
    sampler = Sampler(side, args.interval)
    sampler.start()
    try:
        time.sleep(args.rest)  # settle after the start
        r["rss_idle"] = sampler.now()
        print(f"[deep] {side.label}: empty-queue pair of {args.baseline}", file=sys.stderr)
        base = pair.run_pair(host=side.host, port=side.port, address=side.address(SHALLOW), count=args.baseline,
                             body=args.body, credit=args.credit, window=args.window, durable=True,
                             arrow=args.arrow, idle_timeout=args.idle_timeout)  # fmt: skip
        if not base["ok"]:
            raise RuntimeError(f"baseline pair failed: {base.get('error')}")
        r["empty_publish_rate"] = base["sender_rate"]
        r["empty_drain_rate"] = base["receiver_rate"]
        sampler.mark()

        print(f"[deep] {side.label}: publishing {n}", file=sys.stderr)
        sent = arrow(args, side, "send", n, timeout=n / 500 + 600)
        r["publish_rate"] = sent["rate"]
        r["publish_seconds"] = sent["seconds"]
        time.sleep(args.rest)
        r["rss_peak_publish"] = sampler.mark()
        r["rss_rest"] = sampler.now()
        r["disk_bytes"] = du(side.base)
        print(f"[deep] {side.label}: published {json.dumps(r)}", file=sys.stderr)  # kept if a later phase fails

        r["restarts"] = [restart(args, side, sampler, kind) for kind in args.restart.split(",")]
        r.update({key: value for key, value in r["restarts"][0].items() if key != "restart"})  # older readers
        r["restart"] = args.restart

        left = n - len(r["restarts"])  # each restart's receiver took one
        print(f"[deep] {side.label}: draining {left}", file=sys.stderr)
        got = arrow(args, side, "receive", left, timeout=n / 500 + 600)
        r["drain_rate"] = got["rate"]
        r["drain_seconds"] = got["seconds"]
        time.sleep(args.rest)
        r["rss_peak_drain"] = sampler.mark()
        r["rss_after_drain"] = sampler.now()
    finally:
        sampler.stopped.set()
        side.close()
    print(f"[deep] {side.label}: {json.dumps(r)}", file=sys.stderr)
    return r


def restart(args: Any, side: Any, sampler: Sampler, kind: str) -> dict:
    """Stops the node (SIGTERM for "clean", SIGKILL for "kill") and starts it
    again: the times to listening and to the first delivery (one message
    taken), then the RSS after a rest."""
    r: dict[str, Any] = {"restart": kind}
    print(f"[deep] {side.label}: restarting ({kind})", file=sys.stderr)
    t_stop = time.monotonic()
    side.stop_node(signal.SIGKILL if kind == "kill" else signal.SIGTERM)
    r["stop_seconds"] = time.monotonic() - t_stop
    sampler.mark()  # the next peak is the restarted node's
    t0 = side.spawn()
    while not procs.port_open(side.host, side.port, timeout=0.2):
        if time.time() - t0 > args.restart_timeout:
            raise RuntimeError(f"{side.label} did not listen within {args.restart_timeout} s")
        time.sleep(0.02)
    r["restart_listening_s"] = time.time() - t0
    first = arrow(args, side, "receive", 1, timeout=args.restart_timeout)
    r["restart_first_delivery_s"] = first["t_first"] - t0
    if isinstance(side, RabbitSide):
        side._starter.join(300)  # its HTTP API, before the node counts as up
    time.sleep(args.rest)
    r["rss_peak_restart"] = sampler.mark()
    r["rss_after_restart"] = sampler.now()
    print(f"[deep] {side.label}: {json.dumps(r)}", file=sys.stderr)
    return r


def du(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.stat(os.path.join(root, f)).st_blocks * 512
            except OSError:
                pass
    return total


ROWS = (
    ("empty-queue publish rate (msg/s)", "empty_publish_rate", "rate"),
    ("deep publish rate (msg/s)", "publish_rate", "rate"),
    ("peak RSS while publishing", "rss_peak_publish", "mib"),
    ("RSS at rest, full", "rss_rest", "mib"),
    ("data on disk, full", "disk_bytes", "mib"),
    ("restart: to listening", "restart_listening_s", "s"),
    ("restart: to first delivery", "restart_first_delivery_s", "s"),
    ("RSS after restart, at rest", "rss_after_restart", "mib"),
    ("peak RSS around the restart", "rss_peak_restart", "mib"),
    ("empty-queue drain rate (msg/s)", "empty_drain_rate", "rate"),
    ("deep drain rate (msg/s)", "drain_rate", "rate"),
    ("peak RSS while draining", "rss_peak_drain", "mib"),
    ("RSS after the drain", "rss_after_drain", "mib"),
    ("RSS of the idle node", "rss_idle", "mib"),
)


def fmt(v: Any, kind: str) -> str:
    if v is None:
        return "-"
    if kind == "rate":
        return f"{v:,.0f}"
    if kind == "mib":
        return f"{v / MIB:,.0f} MiB"
    return f"{v:.2f} s"


def table(results: list[dict], args: Any) -> str:
    head = "| " + " | ".join(["measure"] + [f"{r['broker']} ({r.get('version', '')})" for r in results]) + " |"
    lines = [head, "|" + "---|" * (len(results) + 1)]
    for label, key, kind in ROWS:
        if key.startswith("restart_") or key == "rss_after_restart" or key == "rss_peak_restart":
            for i, kind_of_restart in enumerate(args.restart.split(",")):
                values = [fmt(r["restarts"][i].get(key) if len(r.get("restarts", ())) > i else None, kind)
                          for r in results]  # fmt: skip
                lines.append("| " + " | ".join([f"{label} ({kind_of_restart})"] + values) + " |")
            continue
        lines.append("| " + " | ".join([label] + [fmt(r.get(key), kind) for r in results]) + " |")
    load = os.getloadavg()
    lines.append("")
    lines.append(f"{args.messages:,} x {args.body} B durable messages, one durable classic queue, confirms, "
                 f"restarts: {args.restart.replace('kill', 'kill -9').replace(',', ' then ')} "
                 f"(arrow window {args.window}, credit {args.credit}); empty-queue rates from a pair of "
                 f"{args.baseline:,}. Machine: {platform.node()}, {os.cpu_count()} CPUs, "
                 f"load average at the end {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}.")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--body", type=int, default=1024)
    ap.add_argument("--baseline", type=int, default=100_000, help="messages of the empty-queue pair")
    ap.add_argument("--brokers", default="warren,rabbitmq")
    ap.add_argument("--rest", type=float, default=10.0, help="seconds of rest before each at-rest sample")
    ap.add_argument("--interval", type=float, default=0.25)
    ap.add_argument("--credit", type=int, default=1000)
    ap.add_argument("--window", type=int, default=1000)
    ap.add_argument("--idle-timeout", type=float, default=300.0)
    ap.add_argument("--restart-timeout", type=float, default=900.0)
    ap.add_argument("--warren-port", type=int, default=5692)
    ap.add_argument("--warren-http-port", type=int, default=15693)
    ap.add_argument("--rabbit-port", type=int, default=5682)
    ap.add_argument("--rabbit-mgmt-port", type=int, default=15682)
    ap.add_argument("--rabbit-dist-port", type=int, default=25682)
    ap.add_argument("--rabbit-nodename", default="warren_bench_rabbit@localhost")
    ap.add_argument("--arrow", default=pair.DEFAULT_ARROW)
    ap.add_argument("--restart", default="clean",
                    help="restarts in order, comma-separated: clean (SIGTERM) or kill (SIGKILL, crash recovery);"
                         " e.g. kill,clean")  # fmt: skip
    ap.add_argument("--keep", action="store_true", help="keep the data directories")
    ap.add_argument("--json", help="write the raw figures here")
    args = ap.parse_args(argv)
    if not args.restart or set(args.restart.split(",")) - {"clean", "kill"}:
        ap.error(f"--restart: clean or kill, comma-separated, not {args.restart!r}")
    if not os.access(args.arrow, os.X_OK):
        print(f"arrow not found at {args.arrow}: run bench/setup.sh", file=sys.stderr)
        return 2
    sides = {"warren": WarrenSide, "rabbitmq": RabbitSide}
    results = []
    for key in args.brokers.split(","):
        results.append(measure(args, sides[key](args)))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)
    print(table(results, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
