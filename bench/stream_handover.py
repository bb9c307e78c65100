"""How long a stream's publisher waits when the stream's leader goes: `warren ctl drain`
of the leader's node against kill -9 of it, on three local `warren server` processes.

A publisher on another node sends confirmed messages one at a time (proton, blocking,
reconnecting on failure); the figure is the longest gap between two confirms around
the event, and the drain's own duration. Each variant runs on a fresh cluster.

    python bench/stream_handover.py [--runs 3] [--warmup 2.0]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))

from cluster_procs import ClusterProcesses  # noqa: E402
from proton import Message  # noqa: E402
from proton.utils import BlockingConnection  # noqa: E402
from stream_logs import declare, leader_of, url  # noqa: E402


def publish(node, stop: threading.Event, times: list[float]) -> None:
    n = 0
    while not stop.is_set():
        try:
            conn = BlockingConnection(url(node), timeout=10)
            sender = conn.create_sender("/queues/s")
            while not stop.is_set():
                sender.send(Message(id=n, body=f"m{n}", durable=True))
                times.append(time.monotonic())
                n += 1
            conn.close()
        except Exception:
            n += 1
            time.sleep(0.05)


def run(variant: str, warmup: float) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as root:
        cluster = ClusterProcesses(Path(root), 3)
        try:
            cluster.start()
            declare(cluster, 0, "s")
            leader = cluster.wait_for(lambda: leader_of(cluster, "s"), 10, "the stream's leader")
            pub = next(i for i in range(3) if i != leader)
            stop, times = threading.Event(), []
            thread = threading.Thread(target=publish, args=(cluster[pub], stop, times), daemon=True)
            thread.start()
            time.sleep(warmup)
            at = time.monotonic()
            if variant == "drain":
                result = cluster.ctl(leader, "--json", "drain")
                assert result.returncode == 0, result.stderr
            else:
                cluster.kill9(leader)
            took = time.monotonic() - at
            cluster.wait_for(lambda: times and times[-1] > at + took + 1.0, 60, "publishing after the event")
            stop.set()
            thread.join(15)
            around = [t for t in times if at - 1.0 <= t]
            gaps = [b - a for a, b in zip(around, around[1:], strict=False)]
            return max(gaps), took
        finally:
            cluster.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warmup", type=float, default=2.0)
    args = parser.parse_args()
    for variant in ("drain", "kill9"):
        for _ in range(args.runs):
            gap, took = run(variant, args.warmup)
            print(f"{variant:6} longest publish wait {gap * 1000:7.0f} ms   ({variant} took {took:.2f} s)", flush=True)


if __name__ == "__main__":
    main()
