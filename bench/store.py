"""Micro benchmark: MessageStore puts/s with group commit (synced writes).

Each of P producers puts BATCH records in one loop turn, registers for the
ticket of the last one and waits until it is durable before the next batch,
like a publisher with BATCH unconfirmed messages outstanding. The
GroupCommitter merges whatever all producers wrote during one fsync into the
next commit. Prints puts/s, commits/s, puts per commit and the mean latency
from a batch's last put to its durable callback.

    .venv/bin/python bench/store.py [--seconds 2] [--body 100] [--producers 1 4] [--uvloop]

Not run by the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from storage.group_commit import GroupCommitter  # noqa: E402
from storage.message_store import MessageStore, Record  # noqa: E402

BATCHES = (1, 10, 100, 1000)


async def run_case(path: Path, batch: int, producers: int, seconds: float, body: bytes) -> dict[str, float]:
    store = MessageStore(path)
    gc = GroupCommitter(store)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    puts = 0
    latency_sum = 0.0
    latency_n = 0

    async def producer(p: int) -> None:
        nonlocal puts, latency_sum, latency_n
        queue = f"bench-{p}"
        seq = 0
        while loop.time() < deadline:
            now_ms = int(time.time() * 1000)
            for _ in range(batch):
                ticket = store.put(queue, seq, Record(body=body, enqueued_at=now_ms))
                seq += 1
            t0 = time.perf_counter()
            await gc.durable(ticket)
            latency_sum += time.perf_counter() - t0
            latency_n += 1
            puts += batch

    start = time.perf_counter()
    commits0 = store.commits
    await asyncio.gather(*(producer(p) for p in range(producers)))
    elapsed = time.perf_counter() - start
    commits = store.commits - commits0
    await gc.close()
    store.close()
    return {
        "puts_s": puts / elapsed,
        "commits_s": commits / elapsed,
        "per_commit": puts / max(commits, 1),
        "latency_ms": 1000 * latency_sum / max(latency_n, 1),
    }


def sync_baseline(path: Path, batch: int, seconds: float, body: bytes) -> float:
    """Same puts, committed inline on the calling thread (no loop, no worker)."""
    store = MessageStore(path)
    puts = 0
    seq = 0
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        for _ in range(batch):
            store.put("bench", seq, Record(body=body, enqueued_at=0))
            seq += 1
        store.commit()
        puts += batch
    store.close()
    return puts / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=2.0, help="duration of each case")
    ap.add_argument("--body", type=int, default=100, help="message body size in bytes")
    ap.add_argument("--producers", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--uvloop", action="store_true")
    ap.add_argument("--dir", default=None, help="where to put the databases (default: a temp dir)")
    args = ap.parse_args()
    body = b"x" * args.body
    run = asyncio.run
    if args.uvloop:
        import uvloop

        run = uvloop.run
    root = Path(tempfile.mkdtemp(prefix="warren-bench-store-", dir=args.dir))
    try:
        print(f"synced group commit, {args.body} B bodies, {args.seconds:g} s per case, db under {root}")
        print(f"{'producers':>9} {'batch':>6} {'puts/s':>10} {'commits/s':>10} {'puts/commit':>12} {'latency ms':>11}")
        case = 0
        for producers in args.producers:
            for batch in BATCHES:
                case += 1
                r = run(run_case(root / f"c{case}", batch, producers, args.seconds, body))
                print(
                    f"{producers:>9} {batch:>6} {r['puts_s']:>10,.0f} {r['commits_s']:>10,.0f}"
                    f" {r['per_commit']:>12,.1f} {r['latency_ms']:>11.2f}"
                )
        print("inline store.commit() per batch, no event loop (baseline):")
        for batch in BATCHES:
            case += 1
            rate = sync_baseline(root / f"c{case}", batch, args.seconds, body)
            print(f"{'-':>9} {batch:>6} {rate:>10,.0f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
