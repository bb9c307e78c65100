"""A replicated stream as other nodes than its leader use it.

StreamFollower, on a replica's node: publishes (and counts, purge, delete)
go to the leader as through any queue proxy, but consumers read this
node's own copy (queues/stream/replica.py), up to the committed end the
replica learned from the leader, so a consumer on a replica costs the
leader nothing.

A node without a copy uses node/vhosts/stream_proxy.py. A replica's copy
follows the policies' limits as the leader's does (StreamFollower.apply_policy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from queues.base import Consumer, Settlement
from queues.classic.config import ClassicQueueCounters
from queues.stream.config import StreamConfig
from queues.stream.readers import StreamReaders
from queues.stream.spec import ReadSpec

from .remote_queue import RemoteQueue

if TYPE_CHECKING:
    from node.vhosts.remote_queue import ProxyNode
    from queues.stream.replica import StreamReplica

__all__ = ["StreamFollower"]


class StreamFollower(RemoteQueue):
    def __init__(self, node: ProxyNode, vhost: str, record: Any, arguments: dict, replica: StreamReplica) -> None:
        super().__init__(node, vhost, record, arguments)
        self.replica = replica
        self.stats = ClassicQueueCounters()  # what the local readers delivered
        self.readers = StreamReaders(self, replica.log, node.loop.call_soon)
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
