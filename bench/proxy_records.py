#!/usr/bin/env python3
"""CPU per message of the cross-node queue path's encoding: one AMQP list per
message (before flag queue_proxy_records) against items of one `queue.proxy`
batch record (node/vhosts/proxy_records.py), encode and decode, per kind.

This process's CPU time (time.process_time), so other load on the machine
matters less than for wall-clock rates; the end-to-end figures are
bench/quorum.py's.

    .venv/bin/python bench/proxy_records.py [--batch 100] [--body 12] [--rounds 200]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from amqp import codec  # noqa: E402
from node.vhosts import proxy_records  # noqa: E402


def items(body: int) -> dict[str, list]:
    payload = b"\x00Sp\xc0\x01\x00\x00Su\xb0" + len(b"x" * body).to_bytes(4, "big") + b"x" * body
    return {
        "pub": ["pub", "/", "qq1-bench", 7, payload, True, None, "", ["qq1-bench"], None],
        "conf": ["conf", 7, "accepted"],
        "deliver": ["deliver", 3, 99, payload, 0, False, True, "", ["qq1-bench"], None],
        "settle": ["settle", 3, [99], "accepted", False, False, None],
        "credit": ["credit", 3, 1000, 1000, False, False],
        "flow": ["flow", 3, 1000, 1000, 20, False],
    }


def cpu_us(fn, n: int) -> float:
    t = time.process_time()
    fn()
    return (time.process_time() - t) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=100, help="items per queue.proxy record")
    ap.add_argument("--body", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args()
    n = args.batch * args.rounds
    print(f"| kind | AMQP list: encode + decode µs | queue.proxy, batches of {args.batch}: encode + decode µs | ratio |")
    print("|---|---|---|---|")
    for kind, item in items(args.body).items():
        batch = [item] * args.batch
        old = [codec.dumps(item) for _ in batch]
        new = proxy_records.encode_batch(batch)

        def old_enc(batch=batch):
            for _ in range(args.rounds):
                for it in batch:
                    codec.dumps(it)

        def old_dec(old=old):
            for _ in range(args.rounds):
                for data in old:
                    proxy_records.decode_message(data)

        def new_enc(batch=batch):
            for _ in range(args.rounds):
                proxy_records.encode_batch(batch)

        def new_dec(new=new):
            for _ in range(args.rounds):
                proxy_records.decode_message(new)

        before = cpu_us(old_enc, n) + cpu_us(old_dec, n)
        after = cpu_us(new_enc, n) + cpu_us(new_dec, n)
        print(f"| {kind} | {before:.2f} | {after:.2f} | {before / after:.1f}× |")


if __name__ == "__main__":
    main()
