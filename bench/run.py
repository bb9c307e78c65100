#!/usr/bin/env python3
"""Side-by-side AMQP 1.0 throughput benchmark: Warren vs RabbitMQ 3.10.

For each broker (one at a time, so that they never share the 2 cores) and each
workload, runs an arrow sender/receiver pair (bench/pair.py) and prints a
markdown table::

    workload | RabbitMQ 3.10 rate, p50/p99 | Warren rate, p50/p99 | ratio Warren/RabbitMQ

Workloads: durable classic queue with durable messages, transient classic queue
with non-durable messages; 12 B and 1 KB bodies; credit 1000, window 1000;
200k messages each (``--count`` to change).  Every measured run uses a fresh,
empty queue.

Prerequisites: ``bench/setup.sh`` (RabbitMQ, arrow).  Examples::

    .venv/bin/python bench/run.py                          # both brokers, 200k messages
    .venv/bin/python bench/run.py --brokers rabbitmq --count 20000
    .venv/bin/python bench/run.py --warren-cmd '.venv/bin/warren server --data-dir {data_dir} \\
        --amqp-port {port}' --json results.json

Brokers are stopped (and their temp dirs removed) on exit, including on Ctrl-C.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import shlex
import shutil
import statistics
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import pair  # noqa: E402
import procs  # noqa: E402
from rabbitmq import RabbitNode  # noqa: E402

DEFAULT_WARREN_CMD = ("{repo}/.venv/bin/warren server --data-dir {data_dir} --amqp-port {port} "
                      "--http-port {http_port} --metrics-port 0 --grpc-port 0 --listen-host {host}")


# --------------------------------------------------------------------------- workloads
@dataclass(frozen=True)
class Workload:
    key: str
    label: str
    durable: bool  # durable queue and durable messages; else transient queue, non-durable messages
    body: int


WORKLOADS = [
    Workload("durable-12b", "classic durable queue, durable msgs, 12 B", True, 12),
    Workload("durable-1kb", "classic durable queue, durable msgs, 1 KB", True, 1024),
    Workload("transient-12b", "classic transient queue, 12 B", False, 12),
    Workload("transient-1kb", "classic transient queue, 1 KB", False, 1024),
]


@dataclass(frozen=True)
class QueueSpec:
    """A queue a workload needs declared before it runs."""

    name: str
    durable: bool


# --------------------------------------------------------------------------- brokers
class Broker:
    key = ""
    label = ""
    host = "127.0.0.1"
    port = 0

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def declare(self, queues: list[QueueSpec]) -> None: ...

    def cleanup_queue(self, queue: QueueSpec) -> None: ...

    def address(self, queue: QueueSpec) -> str:
        raise NotImplementedError

    def version(self) -> str:
        return ""


class RabbitBroker(Broker):
    key, label = "rabbitmq", "RabbitMQ 3.10"

    def __init__(self, args):
        self.node = RabbitNode(amqp_port=args.rabbit_port, mgmt_port=args.rabbit_mgmt_port,
                               dist_port=args.rabbit_dist_port, keep=args.keep)
        self.port = args.rabbit_port
        self._version = ""

    def start(self) -> None:
        self.node.start()
        self._version = self.node.version()
        self.label = f"RabbitMQ {'.'.join(self._version.split('.')[:2])}"

    def stop(self) -> None:
        self.node.stop()

    @property
    def keep(self) -> bool:
        return self.node.keep

    @keep.setter
    def keep(self, value: bool) -> None:
        self.node.keep = value

    @property
    def log_path(self) -> str | None:
        return self.node.base  # server.out and log/*.log are in there

    def declare(self, queues: list[QueueSpec]) -> None:
        for q in queues:
            self.node.declare_queue(q.name, durable=q.durable)

    def cleanup_queue(self, queue: QueueSpec) -> None:
        try:
            self.node.delete_queue(queue.name)
        except Exception as e:  # noqa: BLE001 - best effort
            print(f"[bench] could not delete {queue.name}: {e}", file=sys.stderr)

    def address(self, queue: QueueSpec) -> str:
        # The 3.x AMQP 1.0 plugin: an existing queue is /amq/queue/NAME
        # (/queue/NAME would auto-declare a non-durable one).
        return RabbitNode.address(queue.name)

    def version(self) -> str:
        return self._version


def declare_warren_queues(host: str, http_port: int, queues: list[QueueSpec]) -> None:
    """Declares `queues` through Warren's management HTTP API (RabbitMQ's
    shape: PUT /api/queues/{vhost}/{name}), as the RabbitMQ side does."""
    auth = base64.b64encode(b"guest:guest").decode()
    for q in queues:
        req = urllib.request.Request(
            f"http://{host}:{http_port}/api/queues/%2F/{urllib.parse.quote(q.name, safe='')}",
            data=json.dumps({"durable": q.durable, "auto_delete": False, "arguments": {}}).encode(),
            method="PUT",
            headers={"Authorization": f"Basic {auth}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            if resp.status not in (200, 201, 204):
                raise RuntimeError(f"declaring {q.name} on Warren: HTTP {resp.status}")


class WarrenBroker(Broker):
    key, label = "warren", "Warren"

    def __init__(self, args):
        self.cmd_template = args.warren_cmd
        self.port = args.warren_port
        self.http_port = args.warren_http_port
        self.start_timeout = args.warren_start_timeout
        self.keep = args.keep
        self.base: str | None = None
        self.proc = None
        self.log_path: str | None = None

    def start(self) -> None:
        procs.require_free(self.host, self.port, "Warren AMQP")
        self.base = tempfile.mkdtemp(prefix="warren-bench-warren-")
        data_dir = os.path.join(self.base, "data")
        os.makedirs(data_dir)
        cmd = [part.format(repo=REPO, data_dir=data_dir, port=self.port, host=self.host, http_port=self.http_port)
               for part in shlex.split(self.cmd_template)]
        self.log_path = os.path.join(self.base, "server.out")
        print(f"[bench] starting Warren: {shlex.join(cmd)}", file=sys.stderr)
        if not shutil.which(cmd[0]) and not os.access(cmd[0], os.X_OK):
            raise RuntimeError(f"Warren command not found: {cmd[0]} (see --warren-cmd)")
        self.data_dir = data_dir
        self.proc = procs.spawn(cmd, log_path=self.log_path, cwd=REPO)
        t0 = time.monotonic()
        procs.wait_for(lambda: procs.port_open(self.host, self.port), self.start_timeout,
                       "Warren server", proc=self.proc, interval=0.1, log_path=self.log_path)
        print(f"[bench] Warren ready on {self.host}:{self.port} in {time.monotonic() - t0:.1f} s; "
              f"dir {self.base}", file=sys.stderr)

    def stop(self) -> None:
        if self.proc is not None:
            code = procs.stop(self.proc, term_timeout=20.0)
            print(f"[bench] Warren stopped (exit {code})", file=sys.stderr)
            self.proc = None
        if self.base and not self.keep:
            shutil.rmtree(self.base, ignore_errors=True)
            self.base = None

    def declare(self, queues: list[QueueSpec]) -> None:
        declare_warren_queues(self.host, self.http_port, queues)

    def address(self, queue: QueueSpec) -> str:
        return f"/queues/{queue.name}"


BROKERS = {"warren": WarrenBroker, "rabbitmq": RabbitBroker}


# --------------------------------------------------------------------------- measuring
def cpu_idle(seconds: float = 0.5) -> float:
    """Fraction of all CPUs idle over `seconds` (the machine is shared: note contention)."""

    def snap():
        with open("/proc/stat") as f:
            vals = [int(x) for x in f.readline().split()[1:]]
        return vals[3] + vals[4], sum(vals)  # idle + iowait, total

    i0, t0 = snap()
    time.sleep(seconds)
    i1, t1 = snap()
    return (i1 - i0) / (t1 - t0) if t1 > t0 else 1.0


def wait_idle(min_idle: float, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    idle = cpu_idle()
    while idle < min_idle and time.monotonic() < deadline:
        idle = cpu_idle(1.0)
    return idle


def run_workload(broker: Broker, w: Workload, args, tag: str) -> dict:
    q = QueueSpec(f"bench-{w.key}-{tag}", durable=w.durable)
    broker.declare([q])
    idle = wait_idle(args.min_idle, args.wait_idle) if args.wait_idle > 0 else cpu_idle()
    if idle < 0.8:
        print(f"[bench] warning: CPU only {idle:.0%} idle before {broker.key}/{w.key}: "
              "something else is loading the machine", file=sys.stderr)
    res = pair.run_pair(host=broker.host, port=broker.port, address=broker.address(q), count=args.count,
                        body=w.body, credit=args.credit, window=args.window, durable=w.durable,
                        idle_timeout=args.idle_timeout, arrow=args.arrow)
    res["cpu_idle_before"] = round(idle, 3)
    res["queue"] = q.name
    broker.cleanup_queue(q)
    return res


def run_broker(broker: Broker, workloads: list[Workload], args) -> dict:
    """All workloads on one broker; returns {workload key: summary or error}."""
    out: dict = {}
    try:
        broker.start()
    except Exception as e:  # noqa: BLE001 - report and go on with the other broker
        print(f"[bench] {broker.label} did not start: {e}", file=sys.stderr)
        broker.keep = True  # keep its log for a look
        broker.stop()
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        last = [ln for ln in str(e).splitlines()[1:] if ln.strip()][-1:]
        msg = f"{broker.label} did not start: {first}" + (f" ({last[0].strip()})" if last else "")
        if getattr(broker, "log_path", None):
            msg += f"; log: {broker.log_path}"
        return {w.key: {"error": msg, "start_failed": True} for w in workloads}
    try:
        if args.warmup > 0:
            print(f"[bench] {broker.key}: warm-up ({args.warmup} msgs)", file=sys.stderr)
            try:
                q = QueueSpec("bench-warmup", durable=False)
                broker.declare([q])
                pair.run_pair(host=broker.host, port=broker.port, address=broker.address(q),
                              count=args.warmup, body=12, credit=args.credit, window=args.window,
                              idle_timeout=args.idle_timeout, arrow=args.arrow)
                broker.cleanup_queue(q)
            except Exception as e:  # noqa: BLE001
                print(f"[bench] warm-up failed: {e}", file=sys.stderr)
        for w in workloads:
            runs = []
            for i in range(args.repeat):
                print(f"[bench] {broker.key}: {w.key} run {i + 1}/{args.repeat} ({args.count} msgs)",
                      file=sys.stderr)
                try:
                    r = run_workload(broker, w, args, tag=f"r{i + 1}")
                except Exception as e:  # noqa: BLE001
                    r = {"ok": False, "error": f"{type(e).__name__}: {e}"}
                short = {k: r.get(k) for k in ("e2e_rate", "sender_rate", "receiver_rate", "lat_ms", "ok")}
                print(f"[bench]   -> {json.dumps(short)}" + (f" error: {r['error']}" if "error" in r else ""),
                      file=sys.stderr)
                runs.append(r)
            good = [r for r in runs if r.get("ok")]
            if good:
                # The run with the median end-to-end rate represents the workload.
                good.sort(key=lambda r: r["e2e_rate"])
                best = dict(good[(len(good) - 1) // 2])
                best["runs"] = runs
                best["e2e_rates"] = [r.get("e2e_rate") for r in runs]
                if len(good) > 1:
                    best["e2e_median"] = statistics.median(r["e2e_rate"] for r in good)
                out[w.key] = best
            else:
                out[w.key] = {"error": runs[-1].get("error", "failed"), "runs": runs}
    finally:
        broker.stop()
    return out


# --------------------------------------------------------------------------- reporting
def cell(r: dict | None) -> str:
    if r is None:
        return "not run"
    if "error" in r and not r.get("ok"):
        return "failed"
    lat = r.get("lat_ms") or {}
    return f"{r['e2e_rate']:,} msg/s, {lat.get('p50', 0):.1f} / {lat.get('p99', 0):.1f} ms"


def ratio(w: dict | None, rb: dict | None) -> str:
    if not w or not rb or not w.get("ok") or not rb.get("ok") or not rb.get("e2e_rate"):
        return "—"
    return f"{w['e2e_rate'] / rb['e2e_rate']:.2f}×"


def table(results: dict, workloads: list[Workload], labels: dict) -> str:
    rl, wl = labels.get("rabbitmq", "RabbitMQ 3.10"), labels.get("warren", "Warren")
    lines = [f"| workload | {rl} rate, p50/p99 | {wl} rate, p50/p99 | ratio Warren/RabbitMQ |",
             "|---|---|---|---|"]
    for w in workloads:
        rb = results.get("rabbitmq", {}).get(w.key)
        wr = results.get("warren", {}).get(w.key)
        lines.append(f"| {w.label} | {cell(rb)} | {cell(wr)} | {ratio(wr, rb)} |")
    return "\n".join(lines)


def notes(results: dict, workloads: list[Workload], args) -> list[str]:
    out = [f"arrow pair, 1 sender + 1 receiver, {args.count:,} messages, credit {args.credit}, "
           f"window {args.window}; rate = messages / (last receive - first send); latency "
           f"send-to-receive at the receiver; median of {args.repeat} run(s)."]
    idles = [r.get("cpu_idle_before") for b in results.values() for r in b.values()
             if isinstance(r, dict) and r.get("cpu_idle_before") is not None]
    if idles:
        out.append(f"CPU idle just before runs: min {min(idles):.0%} (2 cores; <80% means a noisy "
                   "neighbour, rerun).")
    for b, per in results.items():
        for w in workloads:
            r = per.get(w.key)
            if r and r.get("start_failed"):
                out.append(f"{b}: {r['error'][:400]}")
                break
            if r and "error" in r and not r.get("ok"):
                out.append(f"{b} / {w.key}: {' '.join(r['error'].split())[:300]}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Warren vs RabbitMQ 3.10 side by side (arrow pairs).")
    ap.add_argument("--brokers", default="warren,rabbitmq", help="comma list of: warren, rabbitmq")
    ap.add_argument("--workloads", default=",".join(w.key for w in WORKLOADS),
                    help="comma list of: " + ", ".join(w.key for w in WORKLOADS))
    ap.add_argument("--count", type=int, default=200_000)
    ap.add_argument("--credit", type=int, default=1000)
    ap.add_argument("--window", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=1, help="runs per workload; the median is reported")
    ap.add_argument("--warmup", type=int, default=2000, help="unmeasured messages per broker first (0: none)")
    ap.add_argument("--idle-timeout", type=float, default=30.0, help="arrow gives up after this idle time")
    ap.add_argument("--wait-idle", type=float, default=0.0,
                    help="wait up to this many seconds for the CPU to be --min-idle idle before each run")
    ap.add_argument("--min-idle", type=float, default=0.9)
    ap.add_argument("--arrow", default=pair.DEFAULT_ARROW)
    ap.add_argument("--warren-cmd", default=DEFAULT_WARREN_CMD,
                    help="command starting Warren; placeholders {repo} {data_dir} {port} {host} "
                         f"(default: {DEFAULT_WARREN_CMD!r})")
    ap.add_argument("--warren-port", type=int, default=5672)
    ap.add_argument("--warren-http-port", type=int, default=15699, help="Warren's HTTP API port (queue declarations)")
    ap.add_argument("--warren-start-timeout", type=float, default=60.0)
    ap.add_argument("--rabbit-port", type=int, default=5682)
    ap.add_argument("--rabbit-mgmt-port", type=int, default=15682)
    ap.add_argument("--rabbit-dist-port", type=int, default=25682)
    ap.add_argument("--keep", action="store_true", help="keep broker temp dirs (logs, data)")
    ap.add_argument("--json", help="write all raw results here")
    args = ap.parse_args(argv)

    procs.install_handlers()
    if not os.access(args.arrow, os.X_OK):
        print(f"arrow not found at {args.arrow}: run bench/setup.sh", file=sys.stderr)
        return 2
    broker_keys = [b.strip() for b in args.brokers.split(",") if b.strip()]
    for b in broker_keys:
        if b not in BROKERS:
            ap.error(f"unknown broker {b!r}")
    wanted = [k.strip() for k in args.workloads.split(",") if k.strip()]
    by_key = {w.key: w for w in WORKLOADS}
    for k in wanted:
        if k not in by_key:
            ap.error(f"unknown workload {k!r}")
    workloads = [by_key[k] for k in wanted]

    results: dict = {}
    labels: dict = {}
    versions: dict = {}
    try:
        for key in broker_keys:
            broker = BROKERS[key](args)
            results[key] = run_broker(broker, workloads, args)
            labels[key] = broker.label
            versions[key] = broker.version()
    except KeyboardInterrupt:
        print("[bench] interrupted; brokers stopped", file=sys.stderr)
        procs.cleanup_all()
        return 130

    print(table(results, workloads, labels))
    print()
    for n in notes(results, workloads, args):
        print(f"- {n}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "versions": versions, "host": platform.node(),
                       "cpus": os.cpu_count(), "workloads": [asdict(w) for w in workloads],
                       "results": results, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, f, indent=1)
    failed = any(not r.get("ok") for per in results.values() for r in per.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
