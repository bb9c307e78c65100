#!/usr/bin/env python3
"""Row 6 of bench/hostile.py across `ingest_per_turn` values, side by side.

For each budget (0 = unbounded), on fresh nodes started with
`--ingest-per-turn BUDGET`, one after another:

- alone: row 6's client (15 MB messages with 1.4M application-properties to
  amq.direct) with nothing else running, for `--alone-seconds`: its MB/s;
- quiet: the publish/consume pair of bench/hostile.py alone: msg/s;
- beside: the pair with row 6's client beside it: the pair's msg/s as a
  fraction of this budget's quiet run, and the big client's MB/s.

What the budget trades: the pair's share of the node against what one
client of large messages gets through while the node is busy, and (alone)
what a bounded connection costs when nothing else runs.

    .venv/bin/python bench/hostile_ingest.py --budgets 0,65536 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import procs  # noqa: E402
from hostile import Attack, Node, log, measure  # noqa: E402
from hostile_attacks import huge_properties_message  # noqa: E402

ROW = 6


def alone(flags: list[str], seconds: float) -> float:
    """Row 6's client alone on a fresh node for `seconds`: MB/s it got in."""
    node = Node(flags=flags)
    attack = None
    try:
        attack = Attack(ROW, node, cap=seconds + 60, extra=[])
        size = attack.ready["message_bytes"]
        attack.go()
        time.sleep(seconds)  # a bench: the client runs for a while, then reports
        done = attack.stop()
    finally:
        if attack is not None and attack.proc.poll() is None:
            attack.proc.kill()
        node.stop()
    return done["outcomes"] * size / 2**20 / done["seconds"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budgets", default="0,32768,65536,131072", help="ingest_per_turn values (0 = unbounded)")
    ap.add_argument("--rounds", type=int, default=1, help="times each budget is measured, interleaved")
    ap.add_argument("--count", type=int, default=240_000, help="messages per pair run")
    ap.add_argument("--alone-seconds", type=float, default=6.0)
    ap.add_argument("--json", help="write every result here")
    args = ap.parse_args(argv)
    procs.install_handlers()
    budgets = [int(b) for b in args.budgets.split(",")]
    results: dict[int, list[dict]] = {b: [] for b in budgets}
    size_mb = len(huge_properties_message(1_400_000)) / 2**20  # row 6's message, as bench/hostile_attacks.py sends it
    for round_ in range(args.rounds):
        for budget in budgets:
            flags = [f"--ingest-per-turn={budget}"]
            pair_args = argparse.Namespace(node_arg=flags, attack_cap=60.0, attack_arg=[], body=12, credit=1000)
            big_alone = alone(flags, args.alone_seconds)
            quiet = measure(None, pair_args, args.count)
            beside = measure(ROW, pair_args, args.count)
            attack = beside["attack"]
            r = {"budget": budget, "alone_mb_s": round(big_alone, 1), "quiet": quiet["rate"],
                 "beside": beside["rate"], "fraction": round(beside["rate"] / quiet["rate"], 2),
                 "big_beside_mb_s": round(attack.get("outcomes", 0) * size_mb / attack["seconds"], 1)
                 if attack.get("seconds") else 0,
                 "stall_ms": beside["stall_ms"], "load": round(os.getloadavg()[0], 2)}  # fmt: skip
            results[budget].append(r)
            log(f"round {round_ + 1} budget {budget}: {r}")
    print("| ingest_per_turn | big client alone MB/s | pair quiet msg/s | pair beside row 6 msg/s | fraction | "
          "big client beside the pair MB/s | longest stall ms |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for budget in budgets:
        for r in results[budget]:
            label = "0 (unbounded)" if budget == 0 else f"{budget // 1024} KiB"
            print(f"| {label} | {r['alone_mb_s']} | {r['quiet']:,} | {r['beside']:,} | {r['fraction']:.2f} | "
                  f"{r['big_beside_mb_s']} | {r['stall_ms']:.0f} |")  # fmt: skip
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
