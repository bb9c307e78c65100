"""A replicated stream as other nodes than its leader use it.

StreamFollower, on a replica's node: publishes (and counts, purge, delete)
go to the leader as through any queue proxy, but consumers read this
node's own copy (queues/stream/replica.py), up to the committed end the
replica learned from the leader, so a consumer on a replica costs the
leader nothing.

StreamProxy, on a node without a copy: everything goes to the leader, and
a consumer's filter set (offset spec, filters) travels with its attach, so
the leader's reader starts and filters as a local one would. A reader of a
copy this node no longer has goes on through it from its next offset
(`adopt`, node/vhosts/stream_moves.py). A replica's copy follows the
policies' limits as the leader's does (StreamFollower.apply_policy).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from amqp import serial
from amqp.errors import Condition
from queues.base import Consumer, Settlement
from queues.classic.config import ClassicQueueCounters
from queues.stream.config import StreamConfig
from queues.stream.readers import Reader, StreamReaders
from queues.stream.spec import ReadSpec

from .remote_queue import RemoteQueue

if TYPE_CHECKING:
    from node.broker import Broker
    from queues.stream.replica import StreamReplica

__all__ = ["ProxiedReadSpec", "StreamFollower", "StreamProxy"]


@dataclass(frozen=True, slots=True)
class ProxiedReadSpec(ReadSpec):
    filters: dict = field(default_factory=dict)  # the source's filter set, for the leader


class StreamProxy(RemoteQueue):
    def __init__(self, broker: Broker, vhost: str, record: Any, arguments: dict) -> None:
        super().__init__(broker, vhost, record, arguments)
        self.bases: dict[Any, int] = {}  # a reader moved here mid-stream -> its link's delivery-count then

    def read_spec(self, filters: Any, sql_max_length: int) -> ProxiedReadSpec:
        """Checks the filter set here (raises QueueArgumentError) and keeps it to send."""
        spec = ReadSpec.from_filter_set(filters, sql_max_length)
        described = {str(k): v for k, v in (filters or {}).items()}  # descriptors kept: they name the filters
        return ProxiedReadSpec(*(getattr(spec, f.name) for f in fields(ReadSpec)), filters=described)

    def attach_reader(self, consumer: Consumer, spec: ReadSpec) -> None:
        filters = spec.filters if isinstance(spec, ProxiedReadSpec) else {}
        self.consumers[consumer] = self._service.attach(self, consumer, 0, filters)

    def adopt(self, r: Reader) -> None:
        """A reader of this node's copy, which this node no longer has: it goes on at the
        leader from its next offset, with its filters and credit. The leader's reader counts
        deliveries from 0; the link goes on from its own delivery-count."""
        base = r.delivery_count
        self.bases[r.consumer] = base
        self.consumers[r.consumer] = self._service.attach(self, _Rebased(r.consumer, base), 0,
                                                          r.spec.filter_set_from(r.offset))  # fmt: skip
        self.credit(r.consumer, r.delivery_count, r.credit, r.drain, True)

    def credit(self, consumer: Consumer, delivery_count: int, link_credit: int, drain: bool, echo: bool) -> None:
        super().credit(consumer, serial.add(delivery_count, -self.bases.get(consumer, 0)), link_credit, drain, echo)

    def detach_consumer(self, consumer: Consumer) -> None:
        self.bases.pop(consumer, None)
        super().detach_consumer(consumer)


class _Rebased:
    """A moved reader's consumer as the leader serves it: its delivery-counts shifted by the
    link's count when it moved (StreamProxy.adopt)."""

    __slots__ = ("consumer", "base", "presettled")

    def __init__(self, consumer: Any, base: int) -> None:
        self.consumer, self.base, self.presettled = consumer, base, consumer.presettled

    def deliver(self, queue: Any, message: Any) -> None:
        self.consumer.deliver(queue, message)

    def credit_reply(self, delivery_count: int, credit: int, available: int, drain: bool) -> None:
        self.consumer.credit_reply(serial.add(delivery_count, self.base), credit, available, drain)

    def queue_deleted(self) -> None:
        self.consumer.queue_deleted()

    def queue_unavailable(self, description: str, condition: str = Condition.DETACH_FORCED) -> None:
        unavailable = getattr(self.consumer, "queue_unavailable", None)
        if unavailable is not None:
            unavailable(description, condition)
        else:
            self.consumer.queue_deleted()


class StreamFollower(RemoteQueue):
    def __init__(self, broker: Broker, vhost: str, record: Any, arguments: dict, replica: StreamReplica) -> None:
        super().__init__(broker, vhost, record, arguments)
        self.replica = replica
        self.stats = ClassicQueueCounters()  # what the local readers delivered
        self.readers = StreamReaders(self, replica.log, broker.loop.call_soon)
        replica.on_commit = self.readers.wake

    @property
    def committed_end(self) -> int:
        return self.replica.committed_end

    def attach_reader(self, consumer: Consumer, spec: ReadSpec) -> None:
        self.readers.attach(consumer, spec)

    def attach_consumer(self, consumer: Consumer, priority: int = 0) -> None:
        self.readers.attach(consumer, ReadSpec())

    def detach_consumer(self, consumer: Consumer) -> None:
        self.readers.detach(consumer)

    def credit(self, consumer: Consumer, delivery_count: int, link_credit: int, drain: bool, echo: bool) -> None:
        self.readers.credit(consumer, delivery_count, link_credit, drain, echo)

    def settle(self, consumer: Consumer, seqs: list[int], settlement: Settlement) -> None:
        """Nothing to do: a stream keeps its messages whatever a consumer says."""

    def apply_policy(self, arguments: dict) -> None:
        """The policy's limits (x-max-length-bytes, x-max-age, x-stream-max-segment-size-bytes)
        apply to this node's copy as to the leader's; raises QueueArgumentError."""
        config = StreamConfig.from_arguments(arguments)
        super().apply_policy(arguments)
        self.replica.apply_config(config)

    def delete(self) -> int:
        self.readers.queue_deleted()
        return super().delete()

    @property
    def consumer_count(self) -> int:
        return len(self.readers) if self.reported is None else self.reported[2]
