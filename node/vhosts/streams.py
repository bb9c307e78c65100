"""Starts and stops this node's streams (queues/stream/): where their files
live, where a new one is placed, and closing them when the node stops.

With feature flag stream_replication a stream has a leader and replicas
(node/vhosts/stream_replication.py, node/vhosts/stream_failover.py);
without it a stream lives on the node that declared it, as before.
"""

from __future__ import annotations

import hashlib
import os
import random
import weakref
from typing import TYPE_CHECKING, Any, Protocol

from metadata import commands as mc
from metadata.feature_flags import STREAM_REPLICATION
from node.cluster.cluster import MembershipError
from node.vhosts.metadata_store import new_key
from node.vhosts.stream_failover import FailoverNode, StreamFailover
from node.vhosts.stream_handover import HandOverNode, StreamHandOver
from node.vhosts.stream_replication import RolesNode, StreamRoles
from queues.stream.config import StreamConfig
from queues.stream.disk import StreamDisk
from queues.stream.queue import StreamQueue
from storage.faults import DiskFaults

if TYPE_CHECKING:
    from metadata.state import QueueRecord
    from node.vhosts.metadata_store import MetadataStore
    from node.vhosts.vhost import VHost

__all__ = ["StreamQueues", "place_stream"]

DEFAULT_CLUSTER_SIZE = 3  # x-initial-cluster-size, capped by the cluster size


def cluster_size(config: StreamConfig, policy_definition: Any) -> int:
    """Replicas of a new stream: the policy's initial-cluster-size wins over the argument, as in
    RabbitMQ (policy_precedence); the cluster's size caps it where members are chosen."""
    return policy_definition.get("initial-cluster-size") or config.initial_cluster_size or DEFAULT_CLUSTER_SIZE


class LeaderLocating(Protocol):
    """node/cluster/placement.py: where a new stream's leader goes, and which nodes are drained."""

    def leader_for(self, vhost: str, name: str, arguments: Any, queue_type: str = ...) -> str: ...

    def policy_definition(self, vhost: str, name: str, queue_type: str) -> Any: ...

    def nodes_in_maintenance(self) -> set[str]: ...


class StreamsNode(RolesNode, FailoverNode, HandOverNode, Protocol):
    """What the streams use of their node, and what their roles, failover and hand-over use.
    Read at each use: `metadata` and `loop` exist once the node has started."""

    metadata: MetadataStore
    placement: LeaderLocating


def place_stream(state: Any, placement: Any, vhost: str, name: str, arguments: dict[str, Any],
                 config: StreamConfig) -> tuple[str, ...]:  # fmt: skip
    """A new stream's leader (its locator's choice, node/cluster/placement.py) and as many other
    members as x-initial-cluster-size; () while streams are not replicated (the declaring node keeps it)."""
    if not state.flag_enabled(STREAM_REPLICATION):
        return ()
    size = cluster_size(config, placement.policy_definition(vhost, name, "stream"))
    leader = placement.leader_for(vhost, name, arguments, "stream")
    others = sorted(m for m in state.members if m != leader)
    random.shuffle(others)
    return (leader, *others[: size - 1])


class StreamQueues:
    def __init__(self, node: StreamsNode, data_dir: str, disk_faults: DiskFaults | None = None) -> None:
        self.node = node
        self._data_dir = data_dir
        self._open: weakref.WeakSet[StreamQueue] = weakref.WeakSet()
        self.disk = StreamDisk(disk_faults)  # streams waiting for space (the disk alarm), test faults
        self.roles = StreamRoles(node, self.directory, self.disk)
        self.failover = StreamFailover(node, self.roles)
        self.handover = StreamHandOver(node, self.roles)  # maintenance mode's drain

    def attach(self) -> None:
        self.roles.attach()

    def directory(self, vhost: str, name: str) -> str:
        """One directory per stream, named by a digest: any vhost or queue name is a valid file name then."""
        digest = hashlib.sha256(f"{vhost}\0{name}".encode()).hexdigest()[:32]
        return os.path.join(self._data_dir, "streams", digest)

    def place(self, vhost: str, name: str, arguments: dict[str, Any], config: StreamConfig) -> tuple[str, ...]:
        return place_stream(self.node.metadata.state, self.node.placement, vhost, name, arguments, config)

    def start(self, vhost: VHost, name: str, arguments: dict[str, Any]) -> StreamQueue:
        """A stream of one node (no stream_replication when it was declared)."""
        queue = StreamQueue(vhost.name, name, arguments, self.directory(vhost.name, name), vhost, self.node.loop,
                            self.disk)  # fmt: skip
        self._open.add(queue)
        return queue

    def replicated(self, vhost: str, name: str) -> bool:
        return self.roles.record(vhost, name) is not None

    def start_replicated(self, vhost: VHost, q: QueueRecord, arguments: dict[str, Any]) -> Any:
        self.failover.start()
        queue = self.roles.start(vhost, q, arguments)
        if isinstance(queue, StreamQueue):
            self._open.add(queue)
        return queue

    def changed(self, vhost: VHost, name: str) -> None:
        self.roles.changed(vhost, name)
        queue = vhost.queues.get(name)
        if isinstance(queue, StreamQueue):
            self._open.add(queue)

    async def change_member(self, vhost: str, name: str, member: str, add: bool) -> list[str]:
        """Adds `member` as a replica of a replicated stream (it copies the log
        from the leader), or removes its replica; returns the replicas. A new
        epoch in the metadata, so the change is fenced like a failover."""
        state = self.node.metadata.state
        record = state.stream(vhost, name)
        if record is None:
            raise MembershipError(f"stream '{name}' in vhost '{vhost}' is not replicated", 400)
        if add and member not in state.members:
            raise MembershipError(f"{member} is not a cluster member", 400)
        if (member in record.replicas) == add:
            return list(record.replicas)  # done already
        if not add and member == record.leader:
            raise MembershipError(f"{member} leads stream '{name}': remove it once another replica leads", 409)
        replicas = (*record.replicas, member) if add else tuple(r for r in record.replicas if r != member)
        await self.node.metadata.run(mc.StreamElect(new_key(), vhost, name, record.epoch, record.leader, replicas))
        return list(replicas)

    def dropped(self, vhost: str, name: str) -> None:
        self.roles.dropped(vhost, name)

    def close(self) -> None:
        self.failover.stop()
        self.roles.close()
        for queue in list(self._open):
            queue.close()
        self._open = weakref.WeakSet()
