#!/usr/bin/env python3
"""Streams side by side: Warren and RabbitMQ 3.10 (AMQP 1.0 plugin) in one run.

    .venv/bin/python bench/stream.py                                 # both, 1 node, every workload but `large`
    .venv/bin/python bench/stream.py --stream-messages 100000 --count 50000      # quick
    .venv/bin/python bench/stream.py --workloads large --large-gb 3  # RSS and disk of a 3 GB stream
    .venv/bin/python bench/stream.py --nodes 3                       # streams of 3 replicas on 3 local nodes

Brokers run one after the other (Warren first), each on a fresh cluster of `--nodes`
(bench/clusters.py; every client on node 1, where the streams are declared). Each
workload uses fresh streams declared over the HTTP API (`x-queue-type: stream`,
`x-initial-cluster-size` = nodes). Workloads:

- `send-12b`, `send-1kb`: one `arrow send` of `--count` durable messages, window 1000,
  to one stream; the rate is arrow's (first send to last outcome).
- `first`: `stream_tool fill` writes `--stream-messages` durable 12 B messages, each
  annotated `x-stream-filter-value` v0..v99 in turn; `stream_tool read` then reads
  them all from `first` (credit 1000). Rate = messages / (attach to last message).
- `filtered`: on that same stream, a consumer that wants 1% (value v7). Warren filters
  on the broker (`rabbitmq:stream-filter`); RabbitMQ 3.10 has no stream filters, so
  its consumer reads everything and keeps the 1% itself (and Warren is also run that
  way, as a control). Time = attach to the last wanted message.
- `fanout`: a fanout exchange bound to 3 fresh streams; one `arrow send` of `--count`
  durable 12 B messages to the exchange; a message is confirmed once all 3 stored it.
- `fanout-classic`: the same to 3 durable classic queues (the routing path without streams).
- `large`: `arrow send` of `--large-gb` of 1 KB durable messages to one stream, then a
  read from `first` of all of it (or `--large-read` messages); node RSS (process tree, sampled every 0.5 s) peak
  while writing, at rest after, peak while reading, and the node's data on disk.

The table gives each rate, the ratio Warren / RabbitMQ, the 1-minute load average
before each workload and the brokers' CPU per message (all nodes, user + system; per
message of the stream for the reads), which a busy machine disturbs least (it is
shared: compare within one run only).
`bench/stream_tool.c` is built on first use (like arrow: libqpid-proton11-dev).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from clusters import RabbitCluster, WarrenCluster, load_avg, quote, trees_cpu_seconds  # noqa: E402
from rabbitmq import RabbitNode  # noqa: E402

ARROW = os.path.join(HERE, "arrow")
TOOL = os.path.join(HERE, "stream_tool")
WORKLOADS = ("send-12b", "send-1kb", "first", "filtered", "fanout", "fanout-classic", "large")
DEFAULT_WORKLOADS = ("send-12b", "send-1kb", "first", "filtered", "fanout")
WANTED = "v7"  # one of the 100 filter values stream_tool fill cycles through: 1%


def build_tool() -> None:
    src = TOOL + ".c"
    if os.path.exists(TOOL) and os.path.getmtime(TOOL) >= os.path.getmtime(src):
        return
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libqpid-proton"], capture_output=True, text=True,
                           check=True).stdout.split()  # fmt: skip
    subprocess.run(["cc", "-O2", "-Wall", "-o", TOOL, src, *flags], check=True)


def run_json(cmd: list[str], timeout: float) -> dict:
    """Runs a client to the end; its last stdout line is its JSON result."""
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s: {' '.join(cmd)}"}
    lines = res.stdout.strip().splitlines()
    try:
        out = json.loads(lines[-1])
    except (IndexError, ValueError):
        return {"error": f"no result (exit {res.returncode}): {res.stderr.strip()[-300:]}"}
    if res.returncode != 0 and "error" not in out:
        out["error"] = f"exit {res.returncode}: {res.stderr.strip()[-300:]}"
    return out


# --------------------------------------------------------------------------- the brokers
class Side:
    """What the workloads need of one broker's cluster."""

    def __init__(self, cluster, nodes: int) -> None:
        self.cluster, self.nodes = cluster, nodes
        self.key, self.label = cluster.key, cluster.label

    @property
    def port(self) -> int:
        return self.cluster.amqp_port(0)

    def stream_arguments(self, kind: str = "stream") -> dict:
        if kind == "classic":
            return {"x-queue-type": "classic"}
        return {"x-queue-type": "stream", "x-initial-cluster-size": self.nodes}

    def trees(self) -> list[list[int]]:
        return self.cluster.process_trees()


class WarrenSide(Side):
    def http(self, method: str, path: str, body: dict | None = None) -> None:
        self.cluster.c[0].http(method, path, body, timeout=60)

    def declare_stream(self, name: str, kind: str = "stream") -> None:
        self.http("PUT", f"/api/queues/%2F/{quote(name)}",
                  {"durable": True, "arguments": self.stream_arguments(kind)})  # fmt: skip

    def declare_fanout(self, exchange: str, streams: list[str]) -> None:
        self.http("PUT", f"/api/exchanges/%2F/{quote(exchange)}", {"type": "fanout", "durable": True})
        for s in streams:
            self.http("POST", f"/api/bindings/%2F/e/{quote(exchange)}/q/{quote(s)}", {"routing_key": ""})

    def delete_stream(self, name: str) -> None:
        self.http("DELETE", f"/api/queues/%2F/{quote(name)}")

    @staticmethod
    def queue_address(name: str) -> str:
        return f"/queues/{quote(name)}"

    @staticmethod
    def exchange_address(name: str) -> str:
        return f"/exchanges/{quote(name)}"

    def data_dirs(self) -> list[str]:
        return [str(self.cluster.c[0].data_dir)]


class RabbitSide(Side):
    def api(self, method: str, path: str, body: dict | None = None) -> None:
        self.cluster.nodes[0].api(method, path, body, timeout=60)

    def declare_stream(self, name: str, kind: str = "stream") -> None:
        self.api("PUT", RabbitNode._q(name), {"durable": True, "auto_delete": False,
                                              "arguments": self.stream_arguments(kind)})  # fmt: skip

    def declare_fanout(self, exchange: str, streams: list[str]) -> None:
        self.api("PUT", f"/api/exchanges/%2F/{quote(exchange)}", {"type": "fanout", "durable": True})
        for s in streams:
            self.api("POST", f"/api/bindings/%2F/e/{quote(exchange)}/q/{quote(s)}", {"routing_key": ""})

    def delete_stream(self, name: str) -> None:
        self.api("DELETE", RabbitNode._q(name))

    @staticmethod
    def queue_address(name: str) -> str:
        return RabbitNode.address(name)  # /amq/queue/NAME: 3.10's address of an existing queue

    @staticmethod
    def exchange_address(name: str) -> str:
        return f"/exchange/{name}"

    def data_dirs(self) -> list[str]:
        return [self.cluster.nodes[0].base]


# --------------------------------------------------------------------------- measuring
class RssSampler:
    """Peak RSS of node 1's process tree, every `period` seconds, while running."""

    def __init__(self, side: Side, period: float = 0.5) -> None:
        import psutil

        self.procs = [psutil.Process(pid) for pid in side.trees()[0]]
        self.period, self.peak = period, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def now(self) -> int:
        total = 0
        for p in self.procs:
            try:
                total += p.memory_info().rss
            except Exception:  # noqa: BLE001 - a helper process that ended
                pass
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.now())
            self._stop.wait(self.period)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def disk_bytes(paths: list[str]) -> int:
    total = 0
    for root in paths:
        for d, _, files in os.walk(root):
            for f in files:
                try:
                    total += os.lstat(os.path.join(d, f)).st_blocks * 512
                except OSError:
                    pass
    return total


IDLE_S = 60  # a client gives up after this long without progress (--idle)


def arrow_send(side: Side, address: str, count: int, body: int) -> dict:
    cmd = [ARROW, "send", "-H", "127.0.0.1", "-P", str(side.port), "-a", address, "-c", str(count), "-b", str(body),
           "-w", "1000", "-d", "-t", str(IDLE_S)]  # fmt: skip
    return run_json(cmd, 120 + count / 500)


READ_CREDIT = 1000  # --credit


def tool(side: Side, mode: str, address: str, count: int, *extra: str) -> dict:
    cmd = [TOOL, mode, "-P", str(side.port), "-a", address, "-c", str(count), "-t", str(IDLE_S),
           "-C", str(READ_CREDIT), *extra]  # fmt: skip
    return run_json(cmd, 2 * IDLE_S + count / 500)


def rate_of(r: dict) -> dict:
    out = {"rate": int(r.get("rate") or 0), "seconds": r.get("seconds")}
    if "error" in r:
        out["error"] = r["error"]
        out["received"] = r.get("received", r.get("done"))
    return out


def node_cpu_seconds(side: Side) -> list[float]:
    return trees_cpu_seconds(side.trees())


def measured(side: Side, run, messages: int) -> dict:
    """run() -> a client's result, with the brokers' CPU per message (every node's
    process tree, user + system): what a busy machine disturbs least; `cpu_us_nodes`
    per node (node 1, where the streams lead, first)."""
    before = node_cpu_seconds(side)
    r = rate_of(run())
    per = [(b - a) / max(messages, 1) * 1e6 for a, b in zip(before, node_cpu_seconds(side), strict=True)]
    r["cpu_us"] = round(sum(per), 1)
    r["cpu_us_nodes"] = [round(x, 1) for x in per]
    return r


# --------------------------------------------------------------------------- workloads
def run_side(side: Side, workloads: list[str], args: argparse.Namespace) -> dict:
    results: dict[str, dict] = {}

    def record(key: str, r: dict, load: float) -> None:
        r["load"] = load
        results[key] = r
        print(f"[bench] {side.label} {key}: {json.dumps(r)}", file=sys.stderr)

    for body, key in ((12, "send-12b"), (1024, "send-1kb")):
        if key in workloads:
            load = load_avg()[0]
            name = f"send-{body}"
            side.declare_stream(name)
            address = side.queue_address(name)
            record(key, measured(side, lambda a=address, b=body: arrow_send(side, a, args.count, b), args.count), load)
            side.delete_stream(name)
    if "first" in workloads or "filtered" in workloads:
        load = load_avg()[0]
        side.declare_stream("log")
        address = side.queue_address("log")
        n = args.stream_messages
        record("fill", measured(side, lambda: tool(side, "fill", address, n), n), load)
        if "first" in workloads:
            load = load_avg()[0]
            record("first", measured(side, lambda: tool(side, "read", address, n), n), load)
        if "filtered" in workloads:
            wanted = args.stream_messages // 100
            if side.key == "warren":
                load = load_avg()[0]
                record("filtered", measured(side, lambda: tool(side, "read", address, wanted, "-f", WANTED), n), load)
            load = load_avg()[0]
            record("filtered-client", measured(side, lambda: tool(side, "read", address, wanted, "-F", WANTED), n),
                   load)  # fmt: skip
        side.delete_stream("log")
    for key, kind in (("fanout", "stream"), ("fanout-classic", "classic")):
        if key in workloads:
            load = load_avg()[0]
            queues = [f"{key}-{i}" for i in range(3)]
            for q in queues:
                side.declare_stream(q, kind)
            side.declare_fanout(key, queues)
            address = side.exchange_address(key)
            record(key, measured(side, lambda a=address: arrow_send(side, a, args.count, 12), args.count), load)
            for q in queues:
                side.delete_stream(q)
    if "large" in workloads:
        large(side, args, record)
    return results


def large(side: Side, args: argparse.Namespace, record) -> None:
    count = int(args.large_gb * (1 << 30) / 1024)
    side.declare_stream("large")
    address = side.queue_address("large")
    load = load_avg()[0]
    with RssSampler(side) as write_rss:
        w = arrow_send(side, address, count, 1024)
    time.sleep(args.rest)  # at rest: let the node settle before the resting sample
    rest = write_rss.now()
    load_read = load_avg()[0]
    with RssSampler(side) as read_rss:
        r = tool(side, "read", address, min(count, args.large_read or count))
    out = {"large-write": {**rate_of(w), "load": load, "messages": count, "peak_rss": write_rss.peak,
                           "rest_rss": rest, "disk": disk_bytes(side.data_dirs())},
           "large-read": {**rate_of(r), "load": load_read, "peak_rss": read_rss.peak}}  # fmt: skip
    for k, v in out.items():
        record(k, v, v["load"])
    side.delete_stream("large")


# --------------------------------------------------------------------------- report
ROWS = (
    ("send-12b", "send-only to one stream, 12 B (msg/s)"),
    ("send-1kb", "send-only to one stream, 1 KB (msg/s)"),
    ("fill", "publish annotated 12 B messages, stream_tool (msg/s)"),
    ("first", "consume from `first` (msg/s)"),
    ("filtered", "filtered consumer, 1%, broker filters: seconds to the last wanted message"),
    ("filtered-client", "filtered consumer, 1%, client filters: seconds to the last wanted message"),
    ("fanout", "fanout exchange to 3 streams, 12 B (msg/s published)"),
    ("fanout-classic", "fanout exchange to 3 durable classic queues, 12 B (msg/s published)"),
    ("large-write", "large stream, 1 KB: write (msg/s)"),
    ("large-read", "large stream: read from `first` (msg/s)"),
)
SECONDS_ROWS = ("filtered", "filtered-client")


def cell(r: dict | None, key: str) -> str:
    if r is None:
        return "-"
    if "error" in r:
        return f"error: {r['error'][:80]}"
    value = f"{r['seconds']} s" if key in SECONDS_ROWS else f"{r['rate']:,}"
    cpu = f", {r['cpu_us']} us CPU/msg" if "cpu_us" in r else ""
    if len(r.get("cpu_us_nodes") or ()) > 1:
        cpu += " = " + " + ".join(str(x) for x in r["cpu_us_nodes"])
    return f"{value} (load {r['load']:.1f}{cpu})"


def ratio(w: dict | None, rb: dict | None, key: str) -> str:
    if not w or not rb or "error" in w or "error" in rb:
        return "-"
    if key in SECONDS_ROWS:
        return f"{rb['seconds'] / w['seconds']:.2f}x" if w["seconds"] else "-"
    return f"{w['rate'] / rb['rate']:.2f}x" if rb["rate"] else "-"


def cpu_ratio(w: dict | None, rb: dict | None) -> str:
    if not w or not rb or "error" in w or "error" in rb or not w.get("cpu_us"):
        return "-"
    return f"{rb['cpu_us'] / w['cpu_us']:.2f}x"


def table(results: dict, nodes: int) -> str:
    w, rb = results.get("warren", {}), results.get("rabbitmq", {})
    lines = [f"| {nodes} node(s), replicas {nodes} | RabbitMQ 3.10 | Warren | Warren / RabbitMQ | CPU/msg RabbitMQ / Warren |",
             "|---|---|---|---|---|"]  # fmt: skip
    for key, label in ROWS:
        if key in w or key in rb:
            lines.append(f"| {label} | {cell(rb.get(key), key)} | {cell(w.get(key), key)} | "
                         f"{ratio(w.get(key), rb.get(key), key)} | {cpu_ratio(w.get(key), rb.get(key))} |")  # fmt: skip
    for key in ("large-write", "large-read"):
        if key in w or key in rb:
            mib = [f"{(x.get(key) or {}).get('peak_rss', 0) / 2**20:,.0f}" for x in (rb, w)]
            lines.append(f"| {key}: peak RSS of node 1 (MiB) | {mib[0]} | {mib[1]} | | |")
    if "large-write" in w or "large-write" in rb:
        for field, label in (("rest_rss", "at rest after the write: RSS (MiB)"), ("disk", "data on disk (MiB)")):
            vals = [f"{(x.get('large-write') or {}).get(field, 0) / 2**20:,.0f}" for x in (rb, w)]
            lines.append(f"| large stream {label} | {vals[0]} | {vals[1]} | | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    global IDLE_S, READ_CREDIT
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--brokers", default="warren,rabbitmq")
    ap.add_argument("--nodes", type=int, default=1, choices=(1, 3))
    ap.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS), help=f"of {','.join(WORKLOADS)}")
    ap.add_argument("--count", type=int, default=200_000, help="messages per send-only and fanout run")
    ap.add_argument("--stream-messages", type=int, default=1_000_000, help="the stream read from first / filtered")
    ap.add_argument("--large-gb", type=float, default=3.0)
    ap.add_argument("--large-read", type=int, default=0, help="messages of the large stream read back (0: all)")
    ap.add_argument("--rest", type=float, default=10.0, help="seconds between the large write and its RSS sample")
    ap.add_argument("--credit", type=int, default=1000, help="a reader's link credit (topped up at half)")
    ap.add_argument("--idle", type=float, default=60.0, help="seconds a client waits without progress")
    ap.add_argument("--warren-setting", action="append", default=[], metavar="NAME=VALUE",
                    help="a Warren setting for every node (as WARREN_NAME), e.g. max_unconfirmed=2048; repeatable")
    ap.add_argument("--json", help="write every result here")
    ap.add_argument("--table", help="print the table of a --json file and exit")
    args = ap.parse_args(argv)
    IDLE_S, READ_CREDIT = args.idle, args.credit
    if args.table:
        with open(args.table) as f:
            print(table(json.load(f), args.nodes))
        return 0
    workloads = [w for w in args.workloads.split(",") if w]
    unknown = set(workloads) - set(WORKLOADS)
    if unknown:
        ap.error(f"unknown workloads {sorted(unknown)}")
    build_tool()
    results: dict[str, dict] = {}
    for key in args.brokers.split(","):
        env = {f"WARREN_{n.upper()}": v for n, _, v in (x.partition("=") for x in args.warren_setting)}
        cluster = WarrenCluster(n=args.nodes, env=env or None) if key == "warren" else \
            RabbitCluster(n=args.nodes, amqp_base=5801, mgmt_base=15801, dist_base=25801, name="warren_stream")  # fmt: skip
        side = (WarrenSide if key == "warren" else RabbitSide)(cluster, args.nodes)
        try:
            cluster.start()
            side.label = cluster.label
            results[key] = run_side(side, workloads, args)
        finally:
            cluster.stop()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    print(table(results, args.nodes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
