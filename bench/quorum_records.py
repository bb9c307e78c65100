"""CPU per message of a quorum queue's publish path around the Raft log, before and
after quorum.publish version 2 (not a test).

Before (`Publish`, version 1): the batch is an AMQP list; every replica, the
leader included, decodes the entry and re-encodes each message as an AMQP list
for the body store; a delivery decodes that list. After (`PublishBatch`,
version 2): the node that takes the publish packs each message once
(queues/quorum/message_format.py); the leader applies the object it proposed;
a follower slices the entry; every replica stores the slices as they are; a
delivery reads the packed header. Times are CPU time of this process
(time.process_time), so that a busy machine disturbs them less; the RocksDB
write itself is the same for both and left out.

    .venv/bin/python bench/quorum_records.py
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from amqp import codec  # noqa: E402
from queues.quorum import Publish, PublishBatch  # noqa: E402
from queues.quorum.message_format import read_stored  # noqa: E402
from raft import records  # noqa: E402

BATCH = 100  # messages per Raft entry (a loop turn's publishes)


def _messages(body: int) -> list[tuple]:
    payload = b"\x00Sp\xc0\x02\x01A" + b"\x00Su\xb0" + len(b"x" * body).to_bytes(4, "big") + b"x" * body
    return [(payload, True, None, "", ("q",), i, None) for i in range(BATCH)]


def _v1(messages: list[tuple]) -> dict:
    def propose():
        return records.encode(Publish(tuple(list(m) for m in messages), 1, "n1/1", 1), prefix=b"\x00")

    entry = propose()

    def apply():  # every replica, the leader too
        record = records.decode(entry, 1)
        return [codec.dumps([bytes(m[0]), bool(m[1]), m[3], list(m[4]), m[6]]) for m in record.messages]

    stored = apply()

    def deliver():
        return [codec.loads(v) for v in stored]

    return {"propose": propose, "leader apply": apply, "follower apply": apply, "deliver": deliver}


def _v2(messages: list[tuple]) -> dict:
    def propose():
        return records.encode(PublishBatch.of(messages, 1, "n1/1", 1), prefix=b"\x00")

    entry = propose()

    def follower_apply():
        return records.decode(entry, 1).stored

    stored = follower_apply()

    def deliver():
        return [read_stored(v) for v in stored]

    # the leader applies the object it proposed: propose packed its stored messages already
    return {"propose": propose, "leader apply": lambda: None, "follower apply": follower_apply, "deliver": deliver}


def _us_per_message(fn, budget: float = 0.3) -> float:
    n = 0
    start = time.process_time()
    while True:
        fn()
        n += 1
        spent = time.process_time() - start
        if spent > budget:
            return spent / n / BATCH * 1e6


def main() -> None:
    print(f"µs of CPU per message, batches of {BATCH} (load average {os.getloadavg()[0]:.1f})")
    print("| body | step | v1 (AMQP lists) | v2 (binary, as received) | v1/v2 |")
    print("|---|---|---|---|---|")
    for body in (12, 1024):
        before, after = _v1(_messages(body)), _v2(_messages(body))
        for step in ("propose", "leader apply", "follower apply", "deliver"):
            b = _us_per_message(before[step])
            a = _us_per_message(after[step]) if step != "leader apply" else 0.0
            ratio = f"{b / a:.1f}x" if a else "—"
            print(f"| {body} B | {step} | {b:.2f} | {a:.2f} | {ratio} |")
        # a 3-replica queue: one propose, one leader apply, two follower applies, one delivery
        b3 = sum(_us_per_message(before[s]) for s in ("propose", "leader apply", "deliver")) + 2 * _us_per_message(
            before["follower apply"])
        a3 = sum(_us_per_message(after[s]) for s in ("propose", "deliver")) + 2 * _us_per_message(after["follower apply"])
        print(f"| {body} B | 3 replicas, whole path | {b3:.2f} | {a3:.2f} | {b3 / a3:.1f}x |")


if __name__ == "__main__":
    main()
