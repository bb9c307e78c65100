#!/usr/bin/env python3
"""`warren migrate` with a node killed: N x 1 KB in a RabbitMQ 3.10 durable
classic queue move into a quorum queue of a 3-node Warren (migrate
--queue-type quorum --follow, ack-mode on-confirm) while a producer keeps
publishing to RabbitMQ; when a third has moved, the Warren node running the
shovel is killed with -9 (and started again, as a supervisor would). Every
message RabbitMQ confirmed must arrive in Warren; copies that arrive twice
are counted: they may only come from the in-flight window (the prefetch).

    .venv/bin/python bench/migrate_failover.py                  # N = 100,000
    .venv/bin/python bench/migrate_failover.py --messages 5000 --prefetch 200

tests/node/cluster/test_migrate_failover.py runs `scenario` with a small N.
The numbers measured are in docs/benchmarks.md ("warren migrate with a node killed").
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
QUEUE = "moving"
BODY = b"x" * 1024


class Sender(MessagingHandler):
    """Sends ids [first, first + count) to `address` with up to `window`
    unsettled; `confirmed` holds the ids RabbitMQ accepted (a durable
    message it accepted is on disk: what on-confirm publishing means)."""

    def __init__(self, url: str, address: str, first: int, count: int, window: int = 500):
        super().__init__(auto_settle=True)
        self.url, self.address, self.window = url, address, window
        self.next, self.end = first, first + count
        self.confirmed: set[int] = set()
        self.outstanding: dict[object, int] = {}

    def on_start(self, event):
        self.conn = event.container.connect(self.url)
        self.sender = event.container.create_sender(self.conn, self.address)

    def on_sendable(self, event):
        while self.next < self.end and event.sender.credit and len(self.outstanding) < self.window:
            delivery = event.sender.send(Message(id=self.next, body=BODY, durable=True))
            self.outstanding[delivery] = self.next
            self.next += 1

    def on_accepted(self, event):
        self.confirmed.add(self.outstanding.pop(event.delivery))
        self._finish()
        self.on_sendable(event)

    def on_rejected(self, event):
        self.outstanding.pop(event.delivery, None)
        self._finish()

    def _finish(self):
        if self.next >= self.end and not self.outstanding:
            self.conn.close()


def send(url: str, first: int, count: int) -> Sender:
    s = Sender(url, f"/amq/queue/{QUEUE}", first, count)
    Container(s).run()
    return s


def receive_all(url: str, want: set[int], timeout: float) -> dict[int, int]:
    """Reads the Warren queue until every id of `want` came, then what
    follows within 3 s of quiet (late duplicates): id -> copies."""
    from proton.utils import BlockingConnection

    conn = BlockingConnection(url, timeout=60)
    receiver = conn.create_receiver(f"/queues/{QUEUE}", credit=1000)
    seen: dict[int, int] = {}
    deadline = time.monotonic() + timeout
    try:
        while not want.issubset(seen):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{len(want - set(seen))} confirmed messages never arrived in Warren")
            m = receiver.receive(timeout=min(left, 60))
            receiver.accept()
            seen[m.id] = seen.get(m.id, 0) + 1
        while True:
            try:
                m = receiver.receive(timeout=3)
            except Exception:  # proton's Timeout: nothing more
                return seen
            receiver.accept()
            seen[m.id] = seen.get(m.id, 0) + 1
    finally:
        conn.close()


def shovels(node) -> list[dict]:
    try:
        return node.http("GET", "/api/shovels")
    except Exception:  # that node is down or electing
        return []


def scenario(cluster, rabbit, n: int, prefetch: int, extra: int | None = None, log=None) -> dict:
    """Runs the whole thing on a started 3-node `cluster` (tests/support/
    cluster_procs.ClusterProcesses) and `rabbit` (bench/rabbitmq.RabbitNode);
    returns the report. Raises AssertionError where a promise is broken."""
    extra = n // 10 if extra is None else extra
    log = log or (lambda text: print(text, file=sys.stderr, flush=True))
    rabbit_url = f"amqp://guest:guest@127.0.0.1:{rabbit.amqp_port}"
    cluster[0].http("PUT", "/api/feature_flags/quorum_queue_v1/enable", {})
    rabbit.declare_queue(QUEUE, durable=True)
    t0 = time.monotonic()
    backlog = send(rabbit_url, 0, n)
    log(f"[migrate] {len(backlog.confirmed)} x 1 KB confirmed by RabbitMQ in {time.monotonic() - t0:.1f} s")
    wait(lambda: rabbit.queue_info(QUEUE).get("messages") == n, 60, "RabbitMQ counting the backlog")
    via = 1  # the node `warren migrate` talks to
    out = tempfile.TemporaryFile("w+")
    cmd = [sys.executable, "-m", "node.cli", "migrate", "--from", f"http://guest:guest@127.0.0.1:{rabbit.mgmt_port}",
           "--amqp", rabbit_url, "--host", "127.0.0.1", "--port", str(cluster[via].http_port), "--follow",
           "--queue-type", "quorum", "--prefetch", str(prefetch), "--interval", "1"]  # fmt: skip
    started = time.monotonic()
    migrate = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    producer = Sender(rabbit_url, f"/amq/queue/{QUEUE}", n, extra)
    producing = threading.Thread(target=Container(producer).run, daemon=True)
    try:
        wait(lambda: [s["state"] for s in shovels(cluster[0])] == ["running"], 120, "the shovel running")
        producing.start()  # publishes while the shovel moves
        [status] = shovels(cluster[0])
        runner = next(node.index for node in cluster.nodes if node.name == status["node"])
        wait(lambda: (shovels(cluster[runner]) or [{}])[0].get("forwarded", 0) >= n // 3, 300, "a third moved")
        moved_before = shovels(cluster[runner])[0]["forwarded"]
        cluster.kill9(runner)
        killed = time.monotonic()
        survivor = cluster[(runner + 1) % 3]
        wait(lambda: [s["node"] not in ("", cluster[runner].name) and s["state"] == "running"
                      for s in shovels(survivor)] == [True], 60, "another node running the shovel")  # fmt: skip
        takeover = time.monotonic() - killed
        log(f"[migrate] killed {cluster[runner].name} (-9) after {moved_before} moved; taken over in {takeover:.1f} s")
        cluster.restart(runner)
        producing.join(600)
        confirmed = backlog.confirmed | producer.confirmed
        seen = receive_all(f"amqp://guest:guest@127.0.0.1:{survivor.amqp_port}", confirmed, timeout=600)
        elapsed = time.monotonic() - started
        wait(lambda: rabbit.queue_info(QUEUE).get("messages") == 0, 60, "RabbitMQ's queue empty")
        migrate.send_signal(signal.SIGINT)  # producers moved: Ctrl-C leaves the shovel, --stop removes it
        migrate.wait(60)
    finally:
        if migrate.poll() is None:
            migrate.kill()
    out.seek(0)
    said = out.read()
    assert migrate.returncode == 0 and "the shovels keep running" in said, said[-2000:]
    stop = subprocess.run(cmd[:cmd.index("--follow")] + ["--stop"], capture_output=True, text=True, cwd=REPO)  # fmt: skip
    assert stop.returncode == 0 and "deleted shovel migrate-moving" in stop.stdout, stop.stdout + stop.stderr
    duplicates = sum(c - 1 for c in seen.values())
    report = {"messages": n, "published_during": len(producer.confirmed), "confirmed": len(confirmed),
              "arrived_distinct": len(seen), "duplicates": duplicates, "unconfirmed_arrived": len(set(seen) - confirmed),
              "prefetch": prefetch, "takeover_s": round(takeover, 1), "seconds": round(elapsed, 1),
              "msg_per_s": round(len(confirmed) / elapsed)}  # fmt: skip
    log("[migrate] " + json.dumps(report))
    assert confirmed.issubset(seen), "a confirmed message was lost"
    assert duplicates <= prefetch, f"{duplicates} duplicates, more than the in-flight window {prefetch}"
    return report


def wait(predicate, timeout: float, what: str) -> None:
    """Polls a management read (neither API has an event to await)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--prefetch", type=int, default=1000)
    args = ap.parse_args(argv)
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(REPO, "tests", "support"))
    from cluster_procs import ClusterProcesses, free_ports
    from rabbitmq import RabbitNode

    amqp, mgmt, dist = free_ports(3)
    with tempfile.TemporaryDirectory(prefix="warren-bench-migrate-") as root, \
            RabbitNode(amqp_port=amqp, mgmt_port=mgmt, dist_port=dist, nodename="warren_migrate_bench@localhost") as rabbit:  # fmt: skip
        cluster = ClusterProcesses(Path(root), 3)
        try:
            cluster.start(90)
            scenario(cluster, rabbit, args.messages, args.prefetch)
        finally:
            cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
