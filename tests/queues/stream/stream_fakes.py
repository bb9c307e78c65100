"""What a StreamQueue needs around it in the stream tests: a host clock and
timer, a consumer that records what it is given, and helpers to publish and
wait."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from queues.base import Outcome, QueueMessage
from queues.stream.queue import StreamQueue


class Host:
    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def call_later(self, delay_s, fn):
        return asyncio.get_running_loop().call_later(delay_s, fn)


class Consumer:
    presettled = False

    def __init__(self) -> None:
        self.got: list[QueueMessage] = []
        self.replies: list[tuple] = []
        self.deleted = False
        self.event = asyncio.Event()

    def deliver(self, queue, message) -> None:
        self.got.append(message)
        self.event.set()

    def credit_reply(self, delivery_count, credit, available, drain) -> None:
        self.replies.append((delivery_count, credit, available, drain))
        self.event.set()

    def queue_deleted(self) -> None:
        self.deleted = True


async def until(consumer: Consumer, predicate) -> None:
    while not predicate():
        consumer.event.clear()
        await asyncio.wait_for(consumer.event.wait(), 10)


async def publish_payloads(stream: StreamQueue, payloads: Iterable[bytes]) -> list[Outcome]:
    """Publish durable messages and wait until every one is confirmed."""
    messages = [QueueMessage(0, p, True, exchange="", routing_keys=["k"]) for p in payloads]
    outcomes: list[Outcome] = []
    done = asyncio.Event()

    def confirm(outcome: Outcome) -> None:
        outcomes.append(outcome)
        if len(outcomes) == len(messages):
            done.set()

    for message in messages:
        stream.publish(message, confirm)
    await done.wait()
    return outcomes
