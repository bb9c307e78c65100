"""How long a node of several workers takes to move classic queues between its workers with
their messages (issue 36, docs/architecture.md "Workers"). Warren only: RabbitMQ has no
workers, so no peer runs beside it.

1. More workers at a start (node/workers/take_over.py): a node of one process holding
   QUEUES durable queues of COUNT messages of SIZE bytes is stopped and started again, once
   with 1 worker and once with WORKERS (its queues spread over them, their messages copied
   before any store opens), then once more with WORKERS (nothing moves): the difference
   between the last two is the spreading's cost.
2. A lost worker at run time (node/workers/lost_workers.py): a node of 3 workers, the queues
   on worker 2 hold COUNT messages each; worker 2 is killed 3 times, and the clock runs from
   the third kill until the API shows every moved queue with all its messages on another
   worker, the other workers serving meanwhile.

    .venv/bin/python bench/worker_moves.py --queues 8 --count 25000 --size 1024 --workers 2
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import time
import urllib.request

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import pair  # noqa: E402
import procs  # noqa: E402
from workers import HOST, Warren  # noqa: E402


def api(node: Warren, method: str, path: str) -> object:
    request = urllib.request.Request(f"http://{HOST}:{node.http_port}{path}", method=method, headers={
        "Authorization": "Basic " + base64.b64encode(b"guest:guest").decode()})  # fmt: skip
    with urllib.request.urlopen(request, timeout=30) as response:
        body = response.read()
        return json.loads(body) if body else None


def counts(node: Warren) -> dict[str, tuple[int, int | None]]:
    return {q["name"]: (q.get("messages"), q.get("worker")) for q in api(node, "GET", "/api/queues")}


def publish(node: Warren, names: list[str], count: int, size: int) -> float:
    started = time.monotonic()
    for name in names:
        subprocess.run([pair.DEFAULT_ARROW, "send", "-H", HOST, "-P", str(node.port), "-a", f"/queues/{name}",
                        "-c", str(count), "-b", str(size), "-d", "-u", "guest", "-p", "guest"],
                       check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    return time.monotonic() - started


def wait_counts(node: Warren, names: list[str], count: int, timeout: float = 600.0) -> None:
    procs.wait_for(lambda: all(counts(node).get(n, (None,))[0] == count for n in names), timeout,
                   "every queue's messages", interval=0.05)  # fmt: skip


def started(workers: int, base: str, port: int, http_port: int) -> tuple[Warren, float]:
    node = Warren(workers, port, http_port)
    node.base = base  # the same data directory again
    began = time.monotonic()
    node.start()
    return node, time.monotonic() - began


def spread_at_start(args: argparse.Namespace) -> None:
    names = [f"spread-{i}" for i in range(args.queues)]
    node = Warren(1, args.port, args.http_port)
    node.start()
    node.declare(names)
    publish(node, names, args.count, args.size)
    wait_counts(node, names, args.count)
    node.stop()
    node, baseline = started(1, node.base, args.port, args.http_port)  # the same data, one worker
    node.stop()
    node, spreading = started(args.workers, node.base, args.port, args.http_port)
    wait_counts(node, names, args.count)
    on = [worker for _, worker in counts(node).values()]
    moved = sum(1 for worker in on if worker != 0)
    megabytes = moved * args.count * args.size / 1e6
    node.stop()
    node, steady = started(args.workers, node.base, args.port, args.http_port)  # placed already: nothing moves
    node.stop()
    print(f"a node of one process started with {args.workers} workers: {spreading:.2f} s to serve (the same data: "
          f"{baseline:.2f} s with 1 worker, {steady:.2f} s with {args.workers} once spread), {moved} of "
          f"{args.queues} queues and {megabytes:.0f} MB moved, queues per worker "
          f"{[on.count(w) for w in range(args.workers)]}")  # fmt: skip


def lost_at_run_time(args: argparse.Namespace) -> None:
    node = Warren(3, args.port, args.http_port)
    node.start()
    names = [f"lost-{i}" for i in range(6)]
    node.declare(names)
    on_2 = [name for name, (_, worker) in counts(node).items() if worker == 2]
    publish(node, on_2, args.count, args.size)
    wait_counts(node, on_2, args.count)
    victim = None
    for _ in range(3):  # three exits within 30 s: the supervisor gives worker 2 up
        victim = _worker(node, 2, other_than=victim.pid if victim else None)
        victim.kill()
        victim.wait(10)
    began = time.monotonic()
    procs.wait_for(lambda: all(worker not in (2, None) and messages == args.count for name, (messages, worker)
                               in counts(node).items() if name in on_2), 600, "the lost worker's queues",
                   interval=0.02)  # fmt: skip
    took = time.monotonic() - began
    megabytes = len(on_2) * args.count * args.size / 1e6
    node.stop()
    print(f"lost worker 2 of 3: its {len(on_2)} queues ({megabytes:.0f} MB) served by the others "
          f"{took:.2f} s after its third exit ({megabytes / took:.0f} MB/s)")


def _worker(node: Warren, index: int, other_than: int | None) -> psutil.Process:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for child in psutil.Process(node.proc.pid).children():
            try:
                if child.environ().get("WARREN_WORKER") == str(index) and child.pid != other_than:
                    return child
            except psutil.NoSuchProcess:
                continue
        time.sleep(0.01)
    raise RuntimeError(f"worker {index} did not start")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--count", type=int, default=25000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--port", type=int, default=5694)
    ap.add_argument("--http-port", type=int, default=15694)
    args = ap.parse_args()
    procs.install_handlers()
    spread_at_start(args)
    lost_at_run_time(args)


if __name__ == "__main__":
    main()
