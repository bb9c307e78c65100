"""A stream's storage in process, no network: publish-to-confirm rate of
StreamQueue (chunks per loop turn, fsync on a worker thread) and the rate
of one reader from `first`, for 12 B and 1 KB bodies. Separates the log's
own cost from AMQP framing (bench/run.py measures end to end).

    PYTHONPATH=. .venv/bin/python bench/stream_log.py --count 200000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time

from stream_host import Host

from amqp.message import Message
from queues.base import QueueMessage
from queues.stream.queue import StreamQueue
from queues.stream.spec import ReadSpec


class Reader:
    presettled = True

    def __init__(self, want: int, done: asyncio.Event) -> None:
        self.n, self.want, self.done = 0, want, done

    def deliver(self, queue, message) -> None:
        self.n += 1
        if self.n == self.want:
            self.done.set()

    def credit_reply(self, *args) -> None:
        pass

    def queue_deleted(self) -> None:
        pass


async def one(count: int, size: int, window: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as d:
        stream = StreamQueue("/", "bench", {}, os.path.join(d, "s"), Host(), asyncio.get_running_loop())
        payload = Message.build(b"x" * size).payload
        left = count
        done = asyncio.Event()
        window_free = asyncio.Event()
        in_flight = 0

        def confirm(_outcome) -> None:
            nonlocal left, in_flight
            left -= 1
            in_flight -= 1
            window_free.set()
            if left == 0:
                done.set()

        t0 = time.perf_counter()
        for _ in range(count):
            while in_flight >= window:  # a publisher's window of unconfirmed messages
                window_free.clear()
                await window_free.wait()
            in_flight += 1
            stream.publish(QueueMessage(0, payload, True, exchange="", routing_keys=["k"]), confirm)
        await done.wait()
        send_rate = count / (time.perf_counter() - t0)
        read_done = asyncio.Event()
        reader = Reader(count, read_done)
        t0 = time.perf_counter()
        stream.attach_reader(reader, ReadSpec.from_filter_set({"rabbitmq:stream-offset-spec": "first"}))
        stream.credit(reader, 0, count + 1, False, False)
        await read_done.wait()
        read_rate = count / (time.perf_counter() - t0)
        stream.close()
        return send_rate, read_rate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=200_000)
    ap.add_argument("--window", type=int, default=1000)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    print("| body | publish to confirm msg/s | read from first msg/s |\n|---|---|---|")
    for size in (12, 1024):
        send, read = asyncio.run(one(args.count, size, args.window))
        print(f"| {size} B | {send:,.0f} | {read:,.0f} |")


if __name__ == "__main__":
    main()
