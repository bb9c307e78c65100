#!/usr/bin/env python3
"""Warren's shovel against RabbitMQ 3.10's own shovel plugin, side by side in
one run: both move the same number of messages from the same RabbitMQ
durable classic queue into a Warren queue over AMQP 1.0, with ack-mode
on-confirm and the same prefetch.

For each contender: the RabbitMQ queue is filled by ``arrow send`` (1 KB,
confirmed), a fresh Warren queue is declared, the shovel is created (on
Warren: a `shovel` parameter, amqp10 source and local destination; on
RabbitMQ: a `shovel` parameter, its local amqp091 source and an amqp10
destination at Warren), and the time is taken until the Warren queue holds
every message (polled over Warren's HTTP API every 50 ms).

    .venv/bin/python bench/shovel.py                 # 100,000 x 1 KB
    .venv/bin/python bench/shovel.py --messages 20000 --prefetch 1000
    .venv/bin/python bench/shovel.py --publisher-credit 5000   # see below
    .venv/bin/python bench/shovel.py --nodes 3 --queue-type quorum   # the issue's 3-node quorum queue

RabbitMQ 3.10's shovel plugin sends to Warren with RabbitMQ's Erlang AMQP 1.0
client and forwards each message the moment its source delivers it, up to
src-prefetch-count at once. It does not wait for link credit: a send the
client refuses for want of credit (`{error, insufficient_credit}`) crashes the
worker, which restarts after its reconnect-delay (5 s) and sends again what
was not yet confirmed (fixed in RabbitMQ 3.13). Its client does not honour the
session incoming-window either: past `session_window` Warren ends the session
(window-violation), with the same restart. So the plugin runs at full speed
only with src-prefetch-count at most half of Warren's publisher credit (256:
--prefetch 128), or with both raised (--publisher-credit 2048
--session-window 2048 for the default prefetch of 1000); RabbitMQ 4 grants
170 credit and a 400 window and would meet the same. `extra` counts messages
that arrived more than once (restarts). Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import pair  # noqa: E402
import procs  # noqa: E402
from rabbitmq import RabbitNode  # noqa: E402

SOURCE = "shovel-src"
AUTH = "Basic " + base64.b64encode(b"guest:guest").decode()


def http(port: int, method: str, path: str, body: dict | None = None) -> dict | None:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode())  # fmt: skip
    req.add_header("Authorization", AUTH)
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=30) as r:
        text = r.read()
    return json.loads(text) if text else None


def settings_env(args: argparse.Namespace) -> dict[str, str]:
    """The node settings given on the command line, as Warren's environment variables."""
    env = {}
    if args.publisher_credit:
        env["WARREN_PUBLISHER_CREDIT"] = str(args.publisher_credit)
    if args.session_window:
        env["WARREN_SESSION_WINDOW"] = str(args.session_window)
    return env


class Warren:
    def __init__(self, args: argparse.Namespace) -> None:
        self.port, self.http_port = procs_free(), procs_free()
        self.base = tempfile.mkdtemp(prefix="warren-bench-shovel-")
        self.log_path = os.path.join(self.base, "server.out")
        cmd = [sys.executable, "-m", "node.cli", "server", "--data-dir", os.path.join(self.base, "data"),
               "--listen-host", "127.0.0.1", "--amqp-port", str(self.port), "--http-port", str(self.http_port),
               "--metrics-port", "-1", "--grpc-port", "0"]  # fmt: skip
        env = dict(os.environ, PYTHONPATH=REPO, **settings_env(args))
        self.proc = procs.spawn(cmd, log_path=self.log_path, cwd=REPO, env=env)
        procs.wait_for(lambda: procs.port_open("127.0.0.1", self.port), 120, "Warren", proc=self.proc,
                       interval=0.05, log_path=self.log_path)  # fmt: skip

    def messages(self, queue: str) -> int:
        return http(self.http_port, "GET", f"/api/queues/%2F/{queue}")["messages"]

    def close(self) -> None:
        procs.stop(self.proc)
        shutil.rmtree(self.base, ignore_errors=True)


class WarrenNodes(Warren):
    """`--nodes N` (N > 1): a cluster of N `warren server` processes (bench/clusters.py); both
    shovels reach node 0, and a quorum queue has a replica on every node."""

    def __init__(self, args: argparse.Namespace) -> None:
        from clusters import WarrenCluster

        self.cluster = WarrenCluster(args.nodes, env=settings_env(args))
        self.cluster.start()
        self.port, self.http_port = self.cluster.amqp_port(0), self.cluster.c[0].http_port

    def close(self) -> None:
        self.cluster.stop()


def procs_free() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fill(args: argparse.Namespace, rabbit: RabbitNode) -> None:
    a = pair.arrow_args("127.0.0.1", rabbit.amqp_port, RabbitNode.address(SOURCE), args.messages, args.body,
                        1000, 1000, durable=True, settled=False, idle_timeout=30)  # fmt: skip
    res = subprocess.run([args.arrow, "send", *a], capture_output=True, text=True, timeout=args.messages / 200 + 300)
    out = json.loads(res.stdout.strip().splitlines()[-1])
    if out.get("done") != args.messages:
        raise RuntimeError(f"arrow send: {out}")


def run_one(args: argparse.Namespace, who: str, rabbit: RabbitNode, warren: Warren) -> dict:
    dest = f"shovel-dst-{who}"
    http(warren.http_port, "PUT", f"/api/queues/%2F/{dest}",
         {"durable": True, "arguments": {"x-queue-type": args.queue_type}})  # fmt: skip
    rabbit.purge_queue(SOURCE)
    fill(args, rabbit)
    print(f"[shovel] {who}: {args.messages} x {args.body} B in RabbitMQ's {SOURCE}", file=sys.stderr)
    rabbit_uri = f"amqp://guest:guest@127.0.0.1:{rabbit.amqp_port}"
    warren_uri = f"amqp://guest:guest@127.0.0.1:{warren.port}"
    started = time.monotonic()
    if who == "warren":
        value = {"src-protocol": "amqp10", "src-uri": rabbit_uri, "src-address": RabbitNode.address(SOURCE),
                 "dest-protocol": "local", "dest-uri": "amqp://", "dest-queue": dest, "ack-mode": "on-confirm",
                 "src-prefetch-count": args.prefetch}  # fmt: skip
        http(warren.http_port, "PUT", "/api/parameters/shovel/%2F/bench", {"value": value})
    else:
        value = {"src-protocol": "amqp091", "src-uri": "amqp://", "src-queue": SOURCE,
                 "dest-protocol": "amqp10", "dest-uri": warren_uri, "dest-address": f"/queues/{dest}",
                 "ack-mode": "on-confirm", "src-prefetch-count": args.prefetch}  # fmt: skip
        rabbit.api("PUT", "/api/parameters/shovel/%2F/bench", {"value": value})
    deadline = started + args.timeout
    while (moved := warren.messages(dest)) < args.messages:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{who}'s shovel moved {moved} of {args.messages} in {args.timeout} s")
        time.sleep(0.05)
    elapsed = time.monotonic() - started
    # a restarted plugin sends again what was unconfirmed: wait for the source to drain, then count
    while rabbit.queue_info(SOURCE).get("messages", 1) != 0 and time.monotonic() < deadline:
        time.sleep(0.5)
    extra = warren.messages(dest) - args.messages
    if who == "warren":
        http(warren.http_port, "DELETE", "/api/parameters/shovel/%2F/bench")
    else:
        rabbit.api("DELETE", "/api/parameters/shovel/%2F/bench")
    rate = args.messages / elapsed
    print(f"[shovel] {who}: {args.messages} moved in {elapsed:.1f} s, {rate:.0f} msg/s, {extra} extra",
          file=sys.stderr)  # fmt: skip
    return {"shovel": who, "seconds": round(elapsed, 2), "rate": round(rate), "extra": extra}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--body", type=int, default=1024)
    ap.add_argument("--prefetch", type=int, default=1000)
    ap.add_argument("--queue-type", default="classic", choices=["classic", "quorum"])
    ap.add_argument("--nodes", type=int, default=1, help="Warren nodes (3: the issue's 3-node quorum queue)")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--publisher-credit", type=int, default=0,
                    help="Warren's publisher_credit (0: its default, 256). RabbitMQ 3.10's AMQP 1.0 client, the one "
                         "its shovel plugin sends with, crashes when it outruns the credit: see above")  # fmt: skip
    ap.add_argument("--session-window", type=int, default=0, help="Warren's session_window (0: its default, 400)")
    ap.add_argument("--arrow", default=pair.DEFAULT_ARROW)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    procs.install_handlers()
    rabbit = RabbitNode(amqp_port=procs_free(), mgmt_port=procs_free(), dist_port=procs_free(),
                        nodename=f"warren_bench_shovel_{os.getpid()}@localhost", plugins=("rabbitmq_shovel",))  # fmt: skip
    warren = None
    try:
        rabbit.start()
        rabbit.declare_queue(SOURCE, durable=True)
        warren = Warren(args) if args.nodes == 1 else WarrenNodes(args)
        results = [run_one(args, who, rabbit, warren) for who in ("warren", "rabbitmq")]
    finally:
        if warren is not None:
            warren.close()
        rabbit.stop()
    print(f"| shovel ({args.messages} x {args.body} B, RabbitMQ 3.10 -> Warren {args.queue_type} on {args.nodes} "
          f"node(s), on-confirm, "
          f"prefetch {args.prefetch}) | seconds | msg/s | extra |\n|---|---|---|---|")  # fmt: skip
    for r in results:
        print(f"| {'Warren' if r['shovel'] == 'warren' else 'RabbitMQ 3.10 shovel plugin'} | {r['seconds']} | "
              f"{r['rate']} | {r['extra']} |")  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
