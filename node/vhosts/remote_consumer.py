"""The queue's side of a consumer link of another node (or another worker of this node):
what the queue here delivers to, whose deliveries and credit replies go back on the queue
proxy (node/vhosts/remote_queue.py, `QueueService`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from amqp.errors import Condition
from queues.base import Queue, QueueMessage

if TYPE_CHECKING:
    from .remote_queue import QueueService

__all__ = ["RemoteConsumer"]


class RemoteConsumer:
    """A consumer link of another node, as the queue here sees it."""

    __slots__ = ("service", "peer", "cid", "presettled", "queue", "streams")

    def __init__(self, service: QueueService, peer: str, cid: int, presettled: bool, queue: Queue):
        self.service, self.peer, self.cid, self.presettled, self.queue = service, peer, cid, presettled, queue
        # (the peer's stream to us, ours to it) when it attached: it lives while both do
        self.streams = service.streams_with(peer)

    def deliver(self, queue: Queue, m: QueueMessage) -> None:
        keys = m.routing_keys
        self.service.send(self.peer, ["deliver", self.cid, m.seq, m.payload, m.delivery_count, m.acquired, m.durable,
                                      m.exchange, keys if type(keys) is list else list(keys), m.annotations])  # fmt: skip

    def credit_reply(self, delivery_count: int, credit: int, available: int, drain: bool) -> None:
        self.service.send(self.peer, ["flow", self.cid, delivery_count, credit, available, drain])

    def queue_deleted(self) -> None:
        self._end(Condition.RESOURCE_DELETED, f"queue '{self.queue.name}' in vhost '{self.queue.vhost}' was deleted")

    def queue_unavailable(self, description: str, condition: str) -> None:
        """A queue this node relays (another node's, `QueueService.relays`) cannot be reached:
        the peer's link ends as a link of this node's would."""
        self._end(condition, description)

    def timed_out(self, description: str) -> None:
        """The consumer timeout: the peer ends the link on "gone" and sends no detach back, so
        the queue here lets the consumer go now (what it still holds returns)."""
        self._end(Condition.RESOURCE_LIMIT_EXCEEDED, description)
        self.queue.detach_consumer(self)

    def _end(self, condition: str, description: str) -> None:
        self.service.served.pop((self.peer, self.cid), None)
        self.service.send(self.peer, ["gone", self.cid, condition, description])
