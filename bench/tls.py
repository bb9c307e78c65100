#!/usr/bin/env python3
"""TLS cost: a durable classic queue pair over AMQPS and over plain AMQP,
Warren vs RabbitMQ 3.10 (its listeners.ssl.default with the same
certificates), in one run, one broker at a time; and a login storm
(connect, TLS handshake, SASL PLAIN, OPEN, CLOSE, one after another).

arrow (bench/pair.py) has no TLS options, so both sides of the pair are
python-qpid-proton (bench/tls_client.py): proton's engine and OpenSSL are C,
but its handler runs Python per message, so these rates are lower than
bench/run.py's arrow rates and only comparable with each other. Broker CPU
per message is the broker's process group's user+system time over the run
divided by the messages, from /proc.

    .venv/bin/python bench/tls.py [--count 20000] [--logins 200] [--brokers warren,rabbitmq] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import procs  # noqa: E402
from rabbitmq import RabbitNode  # noqa: E402
from run import QueueSpec, declare_warren_queues  # noqa: E402

PYTHON = sys.executable
CLIENT = os.path.join(HERE, "tls_client.py")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def group_cpu_seconds(pgid: int) -> float:
    """User + system CPU of every live process in the process group."""
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # pgrp
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / CLK_TCK


def client(*args: str) -> subprocess.Popen:
    return subprocess.Popen([PYTHON, CLIENT, *args], stdout=subprocess.PIPE, text=True)


def result(proc: subprocess.Popen, timeout: float) -> dict:
    out, _ = proc.communicate(timeout=timeout)
    return json.loads(out.strip().splitlines()[-1])


def run_pair(url: str, address: str, count: int, ca: str, pgid: int) -> dict:
    cpu0 = group_cpu_seconds(pgid)
    recv = client("recv", url, address, str(count), "--ca", ca)
    time.sleep(1.0)  # the receiver attaches first (its link credit is out before the first send)
    send = client("send", url, address, str(count), "--ca", ca)
    s, r = result(send, 600), result(recv, 600)
    cpu = group_cpu_seconds(pgid) - cpu0
    elapsed = r["last"] - s["first"]
    return {"rate": round(count / elapsed), "broker_cpu_us_per_msg": round(cpu / count * 1e6, 1),
            "received": r["count"]}


def run_logins(url: str, count: int, ca: str, pgid: int) -> dict:
    cpu0 = group_cpu_seconds(pgid)
    r = result(client("logins", url, str(count), "--ca", ca), 600)
    cpu = group_cpu_seconds(pgid) - cpu0
    return {"per_s": round(count / (r["last"] - r["first"]), 1), "broker_cpu_ms_per_login": round(cpu / count * 1e3, 2)}


def measure(urls: dict, address: str, args, ca: str, pgid: int) -> dict:
    out = {}
    for mode in ("plain", "tls"):
        run_pair(urls[mode], address, min(2000, args.count), ca, pgid)  # warm-up, drained
        out[f"pair_{mode}"] = run_pair(urls[mode], address, args.count, ca, pgid)
        out[f"logins_{mode}"] = run_logins(urls[mode], args.logins, ca, pgid)
        print(f"[bench-tls]   {mode}: {out[f'pair_{mode}']} {out[f'logins_{mode}']}", file=sys.stderr)
    return out


def bench_warren(args, certs: str) -> dict:
    base = tempfile.mkdtemp(prefix="warren-bench-tls-")
    cmd = (f"{PYTHON} -m node.cli server --data-dir {base}/data --amqp-port {args.warren_port} "
           f"--amqps-port {args.warren_tls_port} --http-port {args.warren_http_port} --metrics-port -1 "
           f"--https-port -1 --metrics-tls-port -1 --grpc-port 0 --listen-host 127.0.0.1 "
           f"--tls-cert {certs}/server.pem --tls-key {certs}/server.key")
    proc = procs.spawn(shlex.split(cmd), log_path=f"{base}/server.out", cwd=REPO,
                       env=dict(os.environ, PYTHONPATH=REPO))
    try:
        procs.wait_for(lambda: procs.port_open("127.0.0.1", args.warren_tls_port), 60, "Warren", proc=proc,
                       log_path=f"{base}/server.out")
        declare_warren_queues("127.0.0.1", args.warren_http_port, [QueueSpec("bench-tls", True)])
        urls = {"plain": f"amqp://localhost:{args.warren_port}", "tls": f"amqps://localhost:{args.warren_tls_port}"}
        return measure(urls, "/queues/bench-tls", args, f"{certs}/ca.pem", proc.pid)
    finally:
        procs.stop(proc)
        shutil.rmtree(base, ignore_errors=True)


def bench_rabbitmq(args, certs: str) -> dict:
    tls = {"port": args.rabbit_tls_port, "cert": f"{certs}/server.pem", "key": f"{certs}/server.key",
           "ca": f"{certs}/ca.pem"}
    with RabbitNode(amqp_port=args.rabbit_port, tls=tls) as node:
        node.declare_queue("bench-tls", durable=True)
        urls = {"plain": f"amqp://localhost:{args.rabbit_port}", "tls": f"amqps://localhost:{args.rabbit_tls_port}"}
        out = measure(urls, RabbitNode.address("bench-tls"), args, f"{certs}/ca.pem", node.proc.pid)
        out["version"] = node.version()
        return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", default="warren,rabbitmq")
    ap.add_argument("--count", type=int, default=20_000)
    ap.add_argument("--logins", type=int, default=200)
    ap.add_argument("--warren-port", type=int, default=5672)
    ap.add_argument("--warren-tls-port", type=int, default=5671)
    ap.add_argument("--warren-http-port", type=int, default=15699)
    ap.add_argument("--rabbit-port", type=int, default=5682)
    ap.add_argument("--rabbit-tls-port", type=int, default=5681)
    ap.add_argument("--json")
    args = ap.parse_args()
    certs = tempfile.mkdtemp(prefix="warren-bench-certs-")
    results = {}
    try:
        subprocess.run(["bash", os.path.join(REPO, "scripts", "gen-certs.sh"), certs], check=True,
                       capture_output=True)
        for name in args.brokers.split(","):
            print(f"[bench-tls] {name}", file=sys.stderr)
            results[name] = (bench_warren if name == "warren" else bench_rabbitmq)(args, certs)
    finally:
        shutil.rmtree(certs, ignore_errors=True)
    print(json.dumps(results, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
