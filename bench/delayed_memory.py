"""Where a pending delayed message's bytes go, on a real node in this process.

Starts a single node (node/broker.py, its own data directory), declares an
x-delayed-message exchange, publishes COUNT messages delayed by an hour straight
through the exchange's publisher side (node/vhosts/delayed_messages.py's
DelayedPublish: the same path a client's publish takes once routed), waits until
every one is stored and as many as the scheduler takes are held, and reports, per
pending message, the Python heap that tracemalloc attributes to each part:

    machine        queues/quorum/ state of the queue's Raft machine (ready list,
                   checked-out dict and tuples, live-index counts, ...)
    link           queues/quorum/links.py + credit_lease.py: this replica's
                   record of what it handed its local consumers
    scheduler      routing/delay_index.py + node/vhosts/delayed_messages.py:
                   the scheduler's own index of due times
    raft / bodies  the Raft log and the body store's buffers (raft/, storage/,
                   queues/quorum/bodies.py)
    other          everything else

and the process's RSS growth. Numbers go to docs/benchmarks.md.

    .venv/bin/python bench/delayed_memory.py --count 200000 [--window N]

`--window` sets delayed_message_memory_window (0 leaves the node's default).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from proton import Message  # noqa: E402

from node.broker import Broker  # noqa: E402
from node.config import Config  # noqa: E402
from queues.base import QueueMessage  # noqa: E402

EXCHANGE = "later"
BATCH = 2000

PARTS = (
    ("link", ("queues/quorum/links.py", "queues/quorum/credit_lease.py")),
    ("bodies", ("queues/quorum/bodies.py",)),
    ("machine", ("queues/quorum/",)),
    ("scheduler", ("routing/delay_index.py", "node/vhosts/delayed_messages.py", "routing/delay_window.py")),
    ("raft", ("raft/", "storage/", "pysyncobj")),
)


def part_of(filename: str) -> str:
    name = filename.replace("\\", "/")
    for part, marks in PARTS:
        if any(m in name for m in marks):
            return part
    return "other"


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


async def wait_for(check, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.05)  # a bench's poll of counts, not a test's synchronisation


async def publish(broker: Broker, vhost, payload: bytes, count: int) -> None:
    """`count` messages delayed by an hour, in batches of BATCH awaited until stored."""
    for start in range(0, count, BATCH):
        n = min(BATCH, count - start)
        done = asyncio.get_running_loop().create_future()
        left = [n]

        def confirmed(_outcome, left=left, done=done) -> None:
            left[0] -= 1
            if left[0] == 0 and not done.done():
                done.set_result(None)

        publisher = broker.delayed.publisher(vhost, EXCHANGE, 3_600_000)
        for _ in range(n):
            publisher.publish(QueueMessage(0, payload, True, None, 0, False, EXCHANGE, ["k"]), confirmed)
        await done


async def at_rest(queues: list, count: int) -> None:
    """Every message stored, and the scheduler done taking and moving them."""
    await wait_for(lambda: sum(q.message_count + q.unacked_count for q in queues) == count, "all stored", 300)
    settle_for = time.monotonic() + 2
    last = None
    while time.monotonic() < settle_for or last != [(q.message_count, q.unacked_count) for q in queues]:
        last = [(q.message_count, q.unacked_count) for q in queues]
        await asyncio.sleep(1.0)


async def run(count: int, window: int, data: Path, top: int = 0, trace: bool = True) -> dict:
    cfg = Config(data_dir=str(data), listen_host="127.0.0.1", amqp_port=0, http_port=0, metrics_port=0,
                 grpc_port=0, node_name="warren@bench", amqps_port=0, https_port=0, metrics_tls_port=0)  # fmt: skip
    if window:
        cfg.delayed_message_memory_window = window
    broker = Broker(cfg)
    await broker.start()
    try:
        vhost = broker.vhosts["/"]
        await vhost.declare_exchange(EXCHANGE, "x-delayed-message", arguments={"x-delayed-type": "direct"})
        await vhost.declare_queue("target", True)
        backing = "amq.delayed." + EXCHANGE
        await wait_for(lambda: backing in vhost.queues and vhost.queues[backing].consumer_count >= 1,
                       "the scheduler attached", 30)  # fmt: skip
        queue = vhost.queues[backing]
        payload = Message(body=b"x" * 100, durable=True).encode()
        gc.collect()
        if trace:  # off: RSS alone, without tracemalloc's own records in it
            tracemalloc.start(1)
        base = tracemalloc.take_snapshot() if trace else None
        rss0 = rss()
        started = time.monotonic()
        later = vhost.queues.get("amq.delayed-later." + EXCHANGE)  # absent before the bounded window
        both = [q for q in (queue, later) if q is not None]
        phases = []
        for upto in (count // 2, count):  # the marginal cost is what a million more would add
            sent = phases[-1]["count"] if phases else 0
            await publish(broker, vhost, payload, upto - sent)
            await at_rest(both, upto)
            gc.collect()
            snap = tracemalloc.take_snapshot() if trace else None
            parts: dict[str, int] = {}
            for stat in snap.compare_to(base, "filename") if snap is not None else ():
                p = part_of(stat.traceback[0].filename)
                parts[p] = parts.get(p, 0) + stat.size_diff
            phases.append({"count": upto, "parts": parts, "rss": rss() - rss0, "snap": snap})
        published_s = time.monotonic() - started
        if trace:
            tracemalloc.stop()
        half, full = phases
        if top and trace:
            for stat in full["snap"].compare_to(half["snap"], "lineno")[:top]:
                print(f"{stat.size_diff / (count - half['count']):8.1f} B/msg more  {stat.traceback[0]}",
                      file=sys.stderr)  # fmt: skip
        added = count - half["count"]
        names = sorted(set(full["parts"]) | set(half["parts"]))
        marginal = {k: round((full["parts"].get(k, 0) - half["parts"].get(k, 0)) / added, 1) for k in names}
        return {
            "count": count,
            "window": getattr(broker.delayed, "window", None),  # None: before the bounded window
            "publish_and_settle_s": round(published_s, 1),
            "ready": sum(q.message_count for q in both),
            "checked_out": sum(q.unacked_count for q in both),
            "waiting_later": later.message_count if later is not None else 0,
            "held_by_scheduler": sum(len(s.index) for s in broker.delayed._schedulers.values()),
            "average_bytes_per_message": {k: round(v / count, 1) for k, v in sorted(full["parts"].items())},
            "average_traced_total": round(sum(full["parts"].values()) / count, 1),
            "marginal_bytes_per_message": marginal,
            "marginal_traced_total": round(sum(marginal.values()), 1),
            "marginal_rss_per_message": round((full["rss"] - half["rss"]) / added, 1),
            "rss_growth_mb": {"half": round(half["rss"] / 1e6, 1), "all": round(full["rss"] / 1e6, 1)},
            "traced_total_mb": round(sum(full["parts"].values()) / 1e6, 1),
            "extrapolated_1m_mb": round(
                (sum(full["parts"].values()) + sum(marginal.values()) * (1_000_000 - count)) / 1e6, 1
            ),  # fmt: skip
        }
    finally:
        await broker.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=200_000)
    ap.add_argument("--window", type=int, default=0)
    ap.add_argument("--rss-only", action="store_true", help="no tracemalloc: RSS alone")
    ap.add_argument("--top", type=int, default=0, help="also print the N source lines that grew most")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="warren-delayed-mem-") as tmp:
        result = asyncio.run(run(args.count, args.window, Path(tmp), args.top, not args.rss_only))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
