"""A replicated stream on a node without a copy of it: everything goes to the
leader through the queue proxy (node/vhosts/remote_queue.py), and a
consumer's filter set (offset spec, filters) travels with its attach, so the
leader's reader starts and filters as a local one would.

A consumer read through the proxy keeps its place: the proxy notes the
offset after the last message it passed on and the link's delivery-count
and credit. When the serving node goes away (killed, cut off, or no longer
holding the stream), the consumer is not detached: it waits, credit kept,
and is attached again from its next offset at the stream's leader, at once
when the metadata names a new leader, else every RETRY_S until the stream
is served again. Only after WAIT_S without a node to serve it is the link
detached, as any proxied consumer whose queue's node is unreachable.
A reader of a copy this node no longer has goes on through it the same way
(`adopt`, node/vhosts/stream_moves.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from amqp import serial
from amqp.errors import Condition
from queues.base import Consumer, QueueMessage
from queues.stream.spec import ReadSpec

from .remote_queue import RemoteQueue, end_consumer

if TYPE_CHECKING:
    from node.vhosts.remote_queue import ProxyNode
    from queues.stream.readers import Reader

__all__ = ["ProxiedReadSpec", "StreamProxy"]

RETRY_S = 0.25  # between attaches of a consumer whose stream is not served yet
WAIT_S = 60.0  # how long a consumer waits for its stream to be served again before it is detached
_WAITS = (Condition.DETACH_FORCED, Condition.NOT_FOUND)  # unreachable, or the stream's copy not open there yet


@dataclass(frozen=True, slots=True)
class ProxiedReadSpec(ReadSpec):
    filters: dict = field(default_factory=dict)  # the source's filter set, for the leader


class StreamProxy(RemoteQueue):
    def __init__(self, node: ProxyNode, vhost: str, record: Any, arguments: dict) -> None:
        super().__init__(node, vhost, record, arguments)
        self.served: dict[Any, Served] = {}  # a link's consumer -> its reader at the serving node

    def read_spec(self, filters: Any, sql_max_length: int) -> ProxiedReadSpec:
        """Checks the filter set here (raises QueueArgumentError) and keeps it to send."""
        spec = ReadSpec.from_filter_set(filters, sql_max_length)
        described = {str(k): v for k, v in (filters or {}).items()}  # descriptors kept: they name the filters
        return ProxiedReadSpec(*(getattr(spec, f.name) for f in fields(ReadSpec)), filters=described)

    def attach_reader(self, consumer: Consumer, spec: ReadSpec) -> None:
        self._serve(Served(consumer, spec), resend_credit=False)

    def adopt(self, r: Reader) -> None:
        """A reader of this node's copy, which this node no longer has: it goes on at the
        leader from its next offset, with its filters and credit."""
        served = Served(r.consumer, r.spec)
        served.next_offset = r.offset
        served.delivery_count, served.link_credit, served.drain = r.delivery_count, r.credit, r.drain
        self._serve(served)

    def _serve(self, served: Served, resend_credit: bool = True) -> None:
        """Attaches it at the serving node. Its reader there counts deliveries from 0, so the
        link's delivery-count now is the base every count is shifted by."""
        served.base = served.delivery_count
        self.served[served.consumer] = served
        self.consumers[served.consumer] = self._service.attach(self, served, 0, served.filter_set())
        if resend_credit:
            super().credit(served.consumer, 0, served.link_credit, served.drain, True)

    def credit(self, consumer: Consumer, delivery_count: int, link_credit: int, drain: bool, echo: bool) -> None:
        served = self.served.get(consumer)
        if served is None:
            return
        served.delivery_count, served.link_credit, served.drain = delivery_count, link_credit, drain
        super().credit(consumer, serial.add(delivery_count, -served.base), link_credit, drain, echo)

    def detach_consumer(self, consumer: Consumer) -> None:
        self.served.pop(consumer, None)
        super().detach_consumer(consumer)

    def delete(self) -> int:
        """The stream was deleted: the readers waiting for a node are told so too."""
        waiting = [s.consumer for s in self.served.values() if s.consumer not in self.consumers]
        self.served.clear()
        super().delete()
        for consumer in waiting:
            consumer.queue_deleted()
        return 0

    # -- a serving node lost --------------------------------------------------------------

    def consumer_lost(self, consumer: Any, condition: str, description: str) -> None:
        """A reader waits for its stream to be served again (unless it is gone for good)."""
        if not isinstance(consumer, Served):
            super().consumer_lost(consumer, condition, description)
            return
        link_consumer = consumer.consumer
        self.consumers.pop(link_consumer, None)
        loop = self.node.loop
        if consumer.lost_at is None:
            consumer.lost_at = loop.time()
        if self.deleted or condition not in _WAITS or loop.time() - consumer.lost_at > WAIT_S:
            self.served.pop(link_consumer, None)
            end_consumer(consumer, condition, description)
            return
        loop.call_later(RETRY_S, self._retry, consumer)

    def _retry(self, served: Served) -> None:
        if self.served.get(served.consumer) is served and served.consumer not in self.consumers and not self.deleted:
            self._serve(served)

    def leader_moved(self, leader: str) -> None:
        """The metadata names a new leader: consumers waiting for one are attached there now."""
        self.leader = leader
        for served in list(self.served.values()):
            if served.lost_at is not None:
                cid = self.consumers.pop(served.consumer, None)
                if cid is not None:
                    self._service.detach(cid)  # an attach still waiting for the old leader
                self._serve(served)


class Served:
    """A consumer read through the proxy, as the serving node's reader sees it: deliveries
    and credit replies pass through here, shifted by `base`, noting where the link is."""

    __slots__ = ("consumer", "spec", "presettled", "base", "next_offset", "delivery_count",
                 "link_credit", "drain", "lost_at")  # fmt: skip

    def __init__(self, consumer: Any, spec: ReadSpec) -> None:
        self.consumer, self.spec, self.presettled = consumer, spec, consumer.presettled
        self.base = 0  # the link's delivery-count when the serving reader started
        self.next_offset: int | None = None  # after the last message passed on; None: none yet
        self.delivery_count, self.link_credit, self.drain = 0, 0, False  # the link's, as last known
        self.lost_at: float | None = None  # since when no node serves it (None: served)

    def filter_set(self) -> dict:
        """The filter set to attach with: as the client sent it, then from the next offset."""
        if self.next_offset is None:
            return self.spec.filters if isinstance(self.spec, ProxiedReadSpec) else {}
        return self.spec.filter_set_from(self.next_offset)

    def deliver(self, queue: Any, message: QueueMessage) -> None:
        self.lost_at = None
        self.next_offset = message.seq + 1  # a stream's delivery carries its offset as its seq
        self.delivery_count = serial.add(self.delivery_count, 1)
        self.link_credit = max(0, self.link_credit - 1)
        self.consumer.deliver(queue, message)

    def credit_reply(self, delivery_count: int, credit: int, available: int, drain: bool) -> None:
        self.lost_at = None
        self.delivery_count, self.link_credit = serial.add(delivery_count, self.base), credit
        self.consumer.credit_reply(self.delivery_count, credit, available, drain)

    def queue_deleted(self) -> None:
        self.consumer.queue_deleted()

    def queue_unavailable(self, description: str, condition: str = Condition.DETACH_FORCED) -> None:
        end_consumer(self.consumer, condition, description)
