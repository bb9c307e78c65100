#!/usr/bin/env python3
"""Run one arrow receiver and one arrow sender against the same address.

Python counterpart of ``shared/tools/arrow/pair.sh``: the receiver starts first;
the sender starts once the receiver is connected (its TCP connection to the broker
is ESTABLISHED, read from /proc, plus a short grace for open/attach/flow), or once
a caller-supplied ``ready()`` check passes.  arrow prints nothing before it ends,
so there is no better in-band readiness signal.

Result (dict)::

    e2e_rate       messages / (receiver's last receive - sender's first send)
    sender_rate    sender's own rate (first send .. last outcome)
    receiver_rate  receiver's own rate (first .. last receive)
    lat_ms         {p50, p90, p99, p999, max} send-to-receive latency, from the receiver
    ok             both sides completed the full count without error
    sender, receiver  the raw arrow JSON lines;  error  set when not ok

Command line (prints the result as JSON)::

    bench/pair.py -P 5682 -a /amq/queue/bench-durable -c 20000 -b 12 --durable
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_ARROW = os.path.join(HERE, "arrow")


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    fd_dir = f"/proc/{pid}/fd"
    try:
        for fd in os.listdir(fd_dir):
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        pass
    return inodes


def connected(pid: int, port: int) -> bool:
    """True when process pid has an ESTABLISHED TCP connection to remote port `port`."""
    inodes = _socket_inodes(pid)
    if not inodes:
        return False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    remote, state, inode = parts[2], parts[3], parts[9]
                    if state == "01" and inode in inodes and int(remote.rsplit(":", 1)[1], 16) == port:
                        return True
        except OSError:
            continue
    return False


def arrow_args(host: str, port: int, address: str, count: int, body: int, credit: int, window: int,
               durable: bool, settled: bool, idle_timeout: float) -> list[str]:
    args = ["-H", host, "-P", str(port), "-a", address, "-c", str(count), "-b", str(body),
            "-C", str(credit), "-w", str(window), "-t", str(idle_timeout)]
    if durable:
        args.append("-d")
    if settled:
        args.append("-s")
    return args


def run_pair(*, host: str = "127.0.0.1", port: int = 5672, address: str = "/queues/q", count: int = 200_000,
             body: int = 12, credit: int = 1000, window: int = 1000, durable: bool = False,
             settled: bool = False, idle_timeout: float = 10.0, arrow: str = DEFAULT_ARROW,
             ready: Callable[[], bool] | None = None, ready_timeout: float = 15.0, grace: float = 0.2,
             timeout: float | None = None) -> dict:
    """Run the pair once and return the parsed result (see module docstring).

    ready: optional extra readiness check run after the receiver is connected (e.g. a
    broker API reporting a consumer on the queue); grace: seconds slept after the
    readiness signal, for the receiver's attach and first flow to land.
    timeout: overall limit in seconds (default: generous, from count).
    """
    if not os.access(arrow, os.X_OK):
        raise RuntimeError(f"arrow not found at {arrow}: run bench/setup.sh")
    if timeout is None:
        timeout = 60 + count / 1000  # >= 1k msg/s, plus start-up
    common = arrow_args(host, port, address, count, body, credit, window, durable, settled, idle_timeout)
    with tempfile.TemporaryDirectory(prefix="warren-bench-pair-") as tmp:
        r_out, s_out = os.path.join(tmp, "r"), os.path.join(tmp, "s")
        r_err, s_err = os.path.join(tmp, "r.err"), os.path.join(tmp, "s.err")
        recv = sender = None
        try:
            with open(r_out, "wb") as o, open(r_err, "wb") as e:
                recv = subprocess.Popen([arrow, "receive", *common], stdout=o, stderr=e,
                                        stdin=subprocess.DEVNULL)
            deadline = time.monotonic() + ready_timeout
            while not connected(recv.pid, port):
                if recv.poll() is not None or time.monotonic() > deadline:
                    break
                time.sleep(0.01)
            if ready is not None:
                while recv.poll() is None and time.monotonic() < deadline and not ready():
                    time.sleep(0.05)
            if recv.poll() is None:
                time.sleep(grace)
            with open(s_out, "wb") as o, open(s_err, "wb") as e:
                sender = subprocess.Popen([arrow, "send", *common], stdout=o, stderr=e,
                                          stdin=subprocess.DEVNULL)
            end = time.monotonic() + timeout
            sc = sender.wait(max(1.0, end - time.monotonic()))
            rc = recv.wait(max(1.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            sc = rc = None
        finally:
            for p in (sender, recv):
                if p is not None and p.poll() is None:
                    p.kill()
                    p.wait()
        return _result(_load(s_out), _load(r_out), sc, rc, _read(s_err) + _read(r_err))


def _read(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read().strip()
    except OSError:
        return ""


def _load(path: str) -> dict | None:
    text = _read(path)
    for line in reversed(text.splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None


def _result(s: dict | None, r: dict | None, sc: int | None, rc: int | None, stderr: str) -> dict:
    res: dict = {"e2e_rate": 0, "sender_rate": 0, "receiver_rate": 0, "lat_ms": None, "ok": False,
                 "sender": s, "receiver": r}
    errors = []
    if s is None or r is None:
        errors.append("no result from " + " and ".join(n for n, x in (("sender", s), ("receiver", r))
                                                       if x is None))
    else:
        span = r["t_last"] - s["t_first"]
        res.update(e2e_rate=round(r["done"] / span) if span > 0 else 0, sender_rate=s["rate"],
                   receiver_rate=r["rate"], lat_ms=r.get("lat_ms"),
                   ok=s["done"] >= s["count"] and r["done"] >= r["count"] and sc == 0 and rc == 0)
        for name, x in (("sender", s), ("receiver", r)):
            if "error" in x:
                errors.append(f"{name}: {x['error']}")
        if s.get("rejected") or s.get("released") or s.get("modified"):
            errors.append(f"sender outcomes: accepted {s.get('accepted')}, rejected {s.get('rejected')}, "
                          f"released {s.get('released')}, modified {s.get('modified')}")
            res["ok"] = False
    if sc is None or rc is None:
        errors.append("timed out")
    if stderr:
        errors.append(stderr[-500:])
    if errors and not res["ok"]:
        res["error"] = "; ".join(errors)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run an arrow sender/receiver pair and print the result as JSON.")
    ap.add_argument("-H", "--host", default="127.0.0.1")
    ap.add_argument("-P", "--port", type=int, default=5672)
    ap.add_argument("-a", "--address", default="/queues/q")
    ap.add_argument("-c", "--count", type=int, default=200_000)
    ap.add_argument("-b", "--body", type=int, default=12, help="body bytes (>= 8: holds the send timestamp)")
    ap.add_argument("-C", "--credit", type=int, default=1000)
    ap.add_argument("-w", "--window", type=int, default=1000, help="max unsettled sends")
    ap.add_argument("-d", "--durable", action="store_true", help="durable messages")
    ap.add_argument("-s", "--settled", action="store_true", help="pre-settled sends")
    ap.add_argument("-t", "--idle-timeout", type=float, default=10.0)
    ap.add_argument("--arrow", default=DEFAULT_ARROW)
    args = ap.parse_args(argv)
    res = run_pair(host=args.host, port=args.port, address=args.address, count=args.count, body=args.body,
                   credit=args.credit, window=args.window, durable=args.durable, settled=args.settled,
                   idle_timeout=args.idle_timeout, arrow=args.arrow)
    print(json.dumps(res))
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
