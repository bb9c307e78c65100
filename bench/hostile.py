#!/usr/bin/env python3
"""Hostile and careless clients (issue 14): does the node keep serving?

For each attack of issue 14's table (bench/hostile_attacks.py) on a fresh
Warren node: the attack sets itself up, then an arrow publish/consume pair
runs on a transient classic queue while the attack runs beside it. Reported
per attack: the pair's rate as a fraction of its quiet rate (the same pair
with no attack, median of `--quiet-runs`), the node's peak RSS (psutil,
every 50 ms) and the longest loop stall (bench/loop_probe.py: a new
connection every 20 ms, timed to the node's protocol-header reply).

    .venv/bin/python bench/hostile.py                       # every attack (~6 min)
    .venv/bin/python bench/hostile.py --attacks 2,5 --seconds 5 --json /tmp/hostile.json

Targets (issue 14): every fraction >= 0.8, no stall over 100 ms, RSS bounded
by the node's settings. The pair's rate is its receiver's count over the
time from the sender's start to the last receive. An attack runs for at most
`--attack-cap` seconds after the pair starts; a pair slower than
seconds/cap of its quiet rate finishes after the attack has stopped, so
such a fraction is an upper bound.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import pair  # noqa: E402
import procs  # noqa: E402
from hostile_attacks import ATTACKS  # noqa: E402

PAIR_QUEUE = "pair"


class Node:
    """One Warren node on free loopback ports in a fresh data dir, optionally
    under a descriptor limit (`ulimit -n`)."""

    def __init__(self, nofile: int | None = None, flags: list[str] | None = None):
        self.dir = tempfile.mkdtemp(prefix="warren-hostile-")
        self.log = os.path.join(self.dir, "node.log")
        cmd = [sys.executable, "-m", "node.cli", "server", "--data-dir", os.path.join(self.dir, "data"),
               "--listen-host", "127.0.0.1", "--amqp-port", "0", "--http-port", "0", "--metrics-port", "0",
               "--grpc-port", "0", *(flags or [])]  # fmt: skip
        if nofile is not None:  # exec keeps the pid: the shell becomes the node
            cmd = ["sh", "-c", f"ulimit -n {nofile} && exec {shlex.join(cmd)}"]
        env = dict(os.environ, PYTHONPATH=str(REPO))
        self.proc = procs.spawn(cmd, env=env, log_path=self.log, cwd=str(REPO))
        procs.wait_for(self._listening, 60, "warren node", proc=self.proc, log_path=self.log)

    def _listening(self) -> bool:
        with open(self.log, errors="replace") as f:
            m = re.search(r"listening on amqp://[^:]+:(\d+) http=(\d+)", f.read())
        if m:
            self.port, self.http_port = int(m.group(1)), int(m.group(2))
        return m is not None

    def declare(self, queue: str) -> None:
        req = urllib.request.Request(f"http://127.0.0.1:{self.http_port}/api/queues/%2F/{queue}",
                                     data=b'{"durable": false}', method="PUT",
                                     headers={"Authorization": "Basic Z3Vlc3Q6Z3Vlc3Q=",
                                              "Content-Type": "application/json"})  # fmt: skip
        urllib.request.urlopen(req, timeout=30).close()

    def stop(self) -> None:
        procs.stop(self.proc, term_timeout=20)
        shutil.rmtree(self.dir, ignore_errors=True)


class RssSampler:
    """The node's peak resident memory, sampled every `interval` seconds."""

    def __init__(self, pid: int, interval: float = 0.05):
        self.process = psutil.Process(pid)
        self.interval = interval
        self.peak = self.start = self._rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _rss(self) -> int:
        try:
            return self.process.memory_info().rss
        except psutil.Error:
            return 0

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, self._rss())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


class Probe:
    """bench/loop_probe.py in its own process (its timing must not wait on our GIL)."""

    def __init__(self, port: int, limit: float):
        self.proc = subprocess.Popen([sys.executable, str(HERE / "loop_probe.py"), "--port", str(port),
                                      "--limit", str(limit)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip

    def stop(self) -> dict:
        out, _ = self.proc.communicate(timeout=60)
        return json.loads(out.strip().splitlines()[-1])


class Attack:
    """bench/hostile_attacks.py ROW in its own process: set-up, go, stop."""

    def __init__(self, row: int, node: Node, cap: float, extra: list[str]):
        self.row = row
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, str(HERE / "hostile_attacks.py"), str(row), "--port",
                                      str(node.port), "--http-port", str(node.http_port), "--cap", str(cap), *extra],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, text=True,
                                     env=dict(os.environ, PYTHONPATH=str(REPO)))  # fmt: skip
        self.ready = self._line("ready")

    def _line(self, key: str) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(30)
            self.err.seek(0)
            raise RuntimeError(f"attack {self.row} ended without {key!r}: {self.err.read().decode()[-1500:]}")
        return json.loads(line)[key]

    def go(self) -> None:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def stop(self) -> dict:
        try:
            self.proc.stdin.write("stop\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # it reached its cap and ended: its report is waiting
        try:
            done = self._line("done")
        except (RuntimeError, ValueError) as e:
            done = {"error": str(e)[-500:]}
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return done


def arrows_connected(port: int) -> bool:
    """Both arrow processes of the running pair hold a connection to the node."""
    kids = [p for p in psutil.Process().children() if p.name() == "arrow"]
    return len(kids) == 2 and all(pair.connected(p.pid, port) for p in kids)


def measure(row: int | None, args, count: int) -> dict:
    """One fresh node, the attack (if any) set up, then the pair beside it."""
    node = Node(nofile=1024 if row == 3 else None, flags=args.node_arg)
    attack = None
    try:
        node.declare(PAIR_QUEUE)
        if row is not None:
            attack = Attack(row, node, args.attack_cap, args.attack_arg or [])
            log(f"  attack {row} ready: {attack.ready}")
        probe = Probe(node.port, limit=args.attack_cap + 120)
        rss = RssSampler(node.proc.pid)
        started: list[float] = []

        def start_attack() -> bool:  # pair.run_pair calls this once the receiver is connected
            started.append(time.time())  # the sender starts right after: arrow's clock is CLOCK_REALTIME
            if attack is not None and row == 3:  # descriptors run out: let the pair connect first
                threading.Thread(target=lambda: (procs.wait_for(lambda: arrows_connected(node.port), 30,
                                                                "pair connected", interval=0.01),
                                                 attack.go()), daemon=True).start()  # fmt: skip
            elif attack is not None:
                attack.go()
            return True

        res = pair.run_pair(port=node.port, address=f"/queues/{PAIR_QUEUE}", count=count, body=args.body,
                            credit=args.credit, window=1000, idle_timeout=args.attack_cap + 60,
                            ready=start_attack, grace=0, timeout=args.attack_cap + 120)  # fmt: skip
        done = attack.stop() if attack is not None else {}
        stall = probe.stop()
        peak = rss.stop()
    finally:
        if attack is not None and attack.proc.poll() is None:
            attack.proc.kill()
        node.stop()
    received = (res.get("receiver") or {}).get("done", 0)
    span = res["receiver"]["t_last"] - started[0] if res.get("receiver") and started else 0
    return {"row": row, "rate": round(received / span) if span > 0 else 0, "ok": res["ok"],
            "error": res.get("error"), "rss_start_mb": round(rss.start / 2**20, 1),
            "rss_peak_mb": round(peak / 2**20, 1), "stall_ms": stall["max_ms"], "stall_p99_ms": stall["p99_ms"],
            "probes": stall["probes"], "unanswered": stall["unanswered"], "attack": done,
            "lat_ms": res.get("lat_ms")}  # fmt: skip


def log(msg: str) -> None:
    print(f"[hostile] {msg}", file=sys.stderr, flush=True)


def table(quiet: dict, results: list[dict], cap: float) -> str:
    """The markdown table; "<=" marks a fraction the attack's cap cut short (it
    stopped before the pair was done, so the pair ended at full speed)."""
    lines = ["| row | attack | pair rate (msg/s) | fraction of quiet | peak RSS MB | longest stall ms |",
             "|---|---|---|---|---|---|"]  # fmt: skip

    def stall(r: dict) -> str:
        extra = f" ({r['unanswered']} of {r['probes']} probes unanswered)" if r["unanswered"] else ""
        return f"{r['stall_ms']:.0f}{extra}"

    lines.append(f"| - | none (quiet) | {quiet['rate']:,} | 1.00 | {quiet['rss_peak_mb']:.0f} | {stall(quiet)} |")
    for r in results:
        frac = r["rate"] / quiet["rate"] if quiet["rate"] else 0
        flag = "" if r["ok"] else " (pair failed)"
        bound = "<= " if r["attack"].get("seconds", 0) >= cap - 0.5 else ""
        lines.append(f"| {r['row']} | {ATTACKS[r['row']][0]} | {r['rate']:,}{flag} | {bound}{frac:.2f} | "
                     f"{r['rss_peak_mb']:.0f} | {stall(r)} |")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Issue 14's attacks beside a publish/consume pair on one Warren node.")
    ap.add_argument(
        "--attacks",
        default=",".join(str(r) for r in ATTACKS),
        help=f"rows of issue 14's table (default all: {','.join(str(r) for r in ATTACKS)})",
    )
    ap.add_argument("--seconds", type=float, default=6.0, help="pair length at the quiet rate (sets --count)")
    ap.add_argument("--count", type=int, help="messages per pair run (default: quiet rate x --seconds)")
    ap.add_argument("--body", type=int, default=12, help="pair message body bytes")
    ap.add_argument("--credit", type=int, default=1000)
    ap.add_argument("--quiet-runs", type=int, default=3, help="quiet runs; the median rate is the reference")
    ap.add_argument("--attack-cap", type=float, default=60.0, help="seconds an attack runs at most")
    ap.add_argument("--attack-arg", action="append", help="passed to hostile_attacks.py (e.g. --attack-arg=--links=10)")
    ap.add_argument("--node-arg", action="append", help="passed to the node (e.g. --node-arg=--ingest-per-turn=0)")
    ap.add_argument("--json", help="write every result here")
    args = ap.parse_args(argv)
    rows = [int(r) for r in args.attacks.split(",") if r.strip()]
    unknown = [r for r in rows if r not in ATTACKS]
    if unknown:
        ap.error(f"no attack for rows {unknown}; rows: {sorted(ATTACKS)}")
    if not os.access(pair.DEFAULT_ARROW, os.X_OK):
        ap.error(f"{pair.DEFAULT_ARROW} missing: run bench/setup.sh")
    procs.install_handlers()
    count = args.count
    if count is None:
        log("calibrating the pair (100k messages)")
        count = max(20_000, int(measure(None, args, 100_000)["rate"] * args.seconds))
    log(f"pair: {count} x {args.body} B, transient classic queue, credit {args.credit}")
    quiet_runs = []
    for i in range(args.quiet_runs):
        quiet_runs.append(measure(None, args, count))
        log(f"quiet run {i + 1}: {quiet_runs[-1]['rate']} msg/s, stall {quiet_runs[-1]['stall_ms']} ms")
    quiet = sorted(quiet_runs, key=lambda r: r["rate"])[(len(quiet_runs) - 1) // 2]
    results = []
    for row in rows:
        log(f"attack {row}: {ATTACKS[row][0]}")
        try:
            r = measure(row, args, count)
        except Exception as e:  # one broken attack must not lose the others' numbers
            log(f"  attack {row} failed: {e}")
            continue
        results.append(r)
        log(
            f"  {r['rate']} msg/s ({r['rate'] / quiet['rate']:.2f}), peak RSS {r['rss_peak_mb']} MB, "
            f"stall {r['stall_ms']} ms, attack {r['attack']}" + (f", pair error {r['error']}" if r["error"] else "")
        )
    load = os.getloadavg()
    print(table(quiet, results, args.attack_cap))
    print(
        f"\npair: arrow, {count} x {args.body} B non-durable messages on a transient classic queue, credit "
        f"{args.credit}, window 1000; quiet rate = median of {len(quiet_runs)} runs "
        f"({', '.join(str(r['rate']) for r in quiet_runs)} msg/s); a fresh node per row; "
        f"attacks capped at {args.attack_cap:.0f} s; load average after: {load[0]:.2f}"
    )
    for r in results:
        print(
            f"- row {r['row']}: node RSS {r['rss_start_mb']:.0f} MB when the pair started; attack "
            f"{json.dumps(r['attack'])}" + (f"; pair error: {r['error'][:200]}" if r["error"] else "")
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"count": count, "quiet_runs": quiet_runs, "quiet": quiet, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
