"""Filtered reads of a stream in process, no network: how fast one reader
goes through a stream with per-message filters that keep 1% of it (the
issue's "filtered consumer reading 1%"), against reading everything, the
application-properties filter and several SQL filter expressions, side by
side in one run. The reader drains to the end; time covers every message
examined, including the loop turns the filter budget yields.

    PYTHONPATH=. .venv/bin/python bench/stream_sql_filter.py --count 200000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time

from stream_host import Host

from amqp.message import Message
from amqp.types import Symbol
from queues.base import QueueMessage
from queues.stream.queue import StreamQueue
from queues.stream.spec import ReadSpec

OFFSET = {"rabbitmq:stream-offset-spec": "first"}
SQL = Symbol("amqp:sql-filter")
CASES = [
    ("no filter (everything)", {}),
    ("application-properties filter bucket = 7", {Symbol("amqp:application-properties-filter"): {"bucket": 7}}),
    ("SQL bucket = 7", {SQL: "bucket = 7"}),
    ("SQL bucket = 7 AND region IN ('emea', 'latam', 'apj')", {SQL: "bucket = 7 AND region IN ('emea', 'latam', 'apj')"}),
    ("SQL p.subject LIKE 'order.%' AND bucket = 7", {SQL: "p.subject LIKE 'order.%' AND bucket = 7"}),
    ("SQL p.subject LIKE '%er.cr%' AND bucket = 7", {SQL: "p.subject LIKE '%er.cr%' AND bucket = 7"}),
    ("SQL p.subject LIKE 'o_der.%ted' AND bucket = 7 (NFA)", {SQL: "p.subject LIKE 'o_der.%ted' AND bucket = 7"}),
    ("SQL h.priority > 4 OR bucket = 7", {SQL: "h.priority > 4 OR bucket = 7"}),
]
REGIONS = ("emea", "amer", "apj", "latam")


class Reader:
    presettled = True

    def __init__(self, done: asyncio.Event) -> None:
        self.n, self.done = 0, done

    def deliver(self, queue, message) -> None:
        self.n += 1

    def credit_reply(self, delivery_count, credit, available, drain) -> None:
        if drain:
            self.done.set()

    def queue_deleted(self) -> None:
        pass


async def fill(stream: StreamQueue, count: int) -> None:
    left, done = count, asyncio.Event()

    def confirm(_outcome) -> None:
        nonlocal left
        left -= 1
        if left == 0:
            done.set()

    subjects = ("order.created", "order.paid", "invoice.sent")
    for i in range(count):
        payload = Message.build(b"x" * 12, header={"priority": 4},
                                properties={"subject": subjects[i % 3]},
                                application_properties={"bucket": i % 100, "region": REGIONS[i % 4]}).payload  # fmt: skip
        stream.publish(QueueMessage(0, payload, True, exchange="", routing_keys=["k"]), confirm)
        if i % 1000 == 999:
            await asyncio.sleep(0)  # let flushes run
    await done.wait()


async def run(count: int) -> list[tuple[str, int, float]]:
    rows = []
    with tempfile.TemporaryDirectory() as d:
        stream = StreamQueue("/", "bench", {}, os.path.join(d, "s"), Host(), asyncio.get_running_loop())
        await fill(stream, count)
        for name, filters in CASES:
            done = asyncio.Event()
            reader = Reader(done)
            t0 = time.perf_counter()
            stream.attach_reader(reader, ReadSpec.from_filter_set({**OFFSET, **filters}))
            stream.credit(reader, 0, count + 1, True, False)  # drained: the reply comes at the end of the log
            await done.wait()
            rows.append((name, reader.n, count / (time.perf_counter() - t0)))
            stream.detach_consumer(reader)
        stream.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=200_000)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}, {args.count:,} messages of 12 B with a header, a subject and "
          "2 application properties")  # fmt: skip
    print("| filter | delivered | examined msg/s |\n|---|---|---|")
    for name, delivered, rate in asyncio.run(run(args.count)):
        print(f"| {name} | {delivered:,} | {rate:,.0f} |")
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
