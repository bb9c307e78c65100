"""Commits per second of a 3-member group in one process (not a test).

    .venv/bin/python bench/raft_log.py [KINDS] [N] [COMPACT_EVERY]

KINDS is a comma list of raft_harness kinds (default "ours,stock,stock-mem"):
"ours" is RaftGroup + DurableLog with one group-commit fsync per member per
step; "stock" is pysyncobj's mmap FileJournal (never fsynced); "stock-mem"
its in-memory journal. Commands carry a 100-byte body; at most 5,000 are in
flight. Every message is pickled across the in-memory network, as a real
transport would serialize it, so absolute figures are lower than pysyncobj's
own in-process numbers; compare kinds with each other.
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "raft"))  # raft_harness

from raft_harness import Cluster  # noqa: E402

from raft.records import command  # noqa: E402


@command("bench.put", version=1)
@dataclass(frozen=True)
class Put:
    value: int
    body: bytes


BODY = b"x" * 100


def run(kind: str, n: int, compact_every: int) -> float:
    root = Path(tempfile.mkdtemp(prefix="warren-raft-bench-"))
    c = Cluster.start(
        kind, root, logCompactionMinEntries=compact_every, logCompactionMinTime=10**6, commandsQueueSize=100_000
    )
    try:
        leader = c.wait_leader()
        done = [0]

        def cb(res, err):
            done[0] += 1

        sent = 0
        t = time.perf_counter()
        while done[0] < n:
            while sent < n and sent - done[0] < 5000:
                sent += 1
                if kind == "ours":
                    leader.obj.propose(Put(sent, BODY), callback=cb)
                else:
                    leader.obj.append(BODY, callback=cb)
            c.step()
        dt = time.perf_counter() - t
    finally:
        c.destroy()
    return n / dt


def main() -> None:
    kinds = (sys.argv[1] if len(sys.argv) > 1 else "ours,stock,stock-mem").split(",")
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 30_000
    compact_every = int(sys.argv[3]) if len(sys.argv) > 3 else 10**9
    for kind in kinds:
        rate = run(kind, n, compact_every)
        print(f"{kind:10s} {rate:8.0f} commits/s  ({n} commands, compaction every {compact_every} entries)")


if __name__ == "__main__":
    main()
