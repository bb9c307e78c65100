"""Both ends of the queue proxy (node/vhosts/remote_queue.py) around a real classic queue,
without a node: what the queue asks of its host, a consumer link that records what it gets,
and a QueueService over any transport with the cluster transport's face (tests/support/:
shared by the proxy's tests over gRPC between nodes and over Unix sockets between workers)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from metadata.feature_flags import QUEUE_PROXY_RECORDS
from node.vhosts.remote_queue import QueueService
from queues.base import QueueMessage


class Host:
    """What a classic queue asks of its node here (no TTL, no dead letters)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def now_ms(self) -> int:
        return int(self.loop.time() * 1000)

    monotonic_ms = now_ms

    def call_later(self, delay_s: float, fn):
        return self.loop.call_later(delay_s, fn)

    def dead_letter(self, *args, **kwargs) -> None:
        raise AssertionError("nothing is dead-lettered here")

    def count_dropped(self, queue, reason: str, n: int) -> None:
        raise AssertionError(f"{n} dropped ({reason})")

    def queue_deleted(self, queue) -> None:
        pass

    queue_expired = queue_deleted


class Consumer:
    """The client's link on the client's side: what it receives, and whether it was ended."""

    presettled = False

    def __init__(self) -> None:
        self.got: list[QueueMessage] = []
        self.ended: str | None = None

    def deliver(self, queue, message: QueueMessage) -> None:
        self.got.append(message)

    def credit_reply(self, delivery_count: int, credit: int, available: int, drain: bool) -> None:
        pass

    def queue_unavailable(self, description: str, condition: str) -> None:
        self.ended = condition

    def queue_deleted(self) -> None:
        self.ended = "deleted"


def service(transport, queues: dict) -> QueueService:
    """A QueueService on `transport` serving `queues` (vhost "/")."""
    channels: dict = {}
    transport.on_node_message = lambda peer, channel, payload: channels[channel](peer, payload)
    cluster = SimpleNamespace(transport=transport, rpc=SimpleNamespace(channels=channels), liveness=None)
    vhosts = {"/": SimpleNamespace(queues=queues)}
    projections = SimpleNamespace(feature_flags={QUEUE_PROXY_RECORDS})
    return QueueService(cluster, asyncio.get_running_loop(), vhosts, projections, consumer_lease=0)


def classic_record(name: str, leader: str, durable: bool = False) -> SimpleNamespace:
    """The metadata's record of a classic queue led by `leader`, as a RemoteQueue reads it."""
    return SimpleNamespace(name=name, durable=durable, exclusive_owner=None, auto_delete=False, type="classic",
                           leader=leader, replicas=())  # fmt: skip
