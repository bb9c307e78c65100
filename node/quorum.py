"""This node's side of its quorum queues: one Raft group per queue it
replicates (queues/quorum_queue.py), on the cluster's transport and log.

The group of a queue is named "qq." + a digest of (vhost, name), so the name
fits any journal key and a queue declared again after a deletion gets a
fresh log only because the old one was dropped with it. The leader of a
group also watches the transport: when a peer's stream ends it asks the
machine to detach the consumers that lived on that node, so their
unsettled messages go back to the queue and are redelivered, marked so.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from queues.quorum_queue import COMPACTION_ENTRIES, QuorumQueue


def group_name(vhost: str, name: str) -> str:
    return "qq." + hashlib.sha256(f"{vhost}\x00{name}".encode()).hexdigest()[:24]


class QuorumQueues:
    def __init__(self, node: Any):
        self.node = node
        self.queues: dict[str, QuorumQueue] = {}  # group -> queue
        self.incarnation = ""
        self._watching = False

    @property
    def node_id(self) -> str:
        return self.node.node_id

    @property
    def _cluster(self) -> Any:
        return self.node.cluster

    def start(self, vhost: Any, record: Any, arguments: dict) -> QuorumQueue:
        cluster = self._cluster
        if not self.incarnation:
            self.incarnation = f"{cluster.node_id}#{time.time_ns()}"
        if not self._watching:
            cluster.transport.on_peer_down.append(self._peer_down)
            self._watching = True
        group = group_name(vhost.name, record.name)
        queue = QuorumQueue(vhost.name, record.name, arguments, tuple(record.replicas), host=vhost, quorum_host=self,
                            group=group)  # fmt: skip
        self.queues[group] = queue
        cluster.open_group(group, list(record.replicas), queue, appendEntriesUseBatch=False,
                           logCompactionMinEntries=COMPACTION_ENTRIES)  # fmt: skip
        return queue

    def stop(self, queue: QuorumQueue) -> None:
        """The queue was deleted: its group and everything it stored go."""
        if self.queues.get(queue.group) is queue:
            del self.queues[queue.group]
            self._cluster.close_group(queue.group, drop=True)

    def _peer_down(self, peer: str) -> None:
        for group, queue in self.queues.items():
            if self.is_leader(group):
                queue.consumers_down(peer)

    # -- QuorumHost ---------------------------------------------------------------------

    def submit(self, group: str, record: Any, callback: Any = None) -> bool:
        return self._cluster.submit(group, record, callback)

    def is_leader(self, group: str) -> bool:
        g = self._cluster.groups.get(group)
        return g is not None and g._isLeader()

    def leader_of(self, group: str) -> str | None:
        g = self._cluster.groups.get(group)
        leader = g._getLeader() if g is not None else None
        return None if leader is None else leader.id

    def put_blob(self, group: str, key: bytes, value: bytes) -> None:
        self._cluster.log.put_blob(group, key, value)

    def get_blob(self, group: str, key: bytes) -> bytes | None:
        return self._cluster.log.get_blob(group, key)

    def delete_blobs(self, group: str, below: bytes | None = None) -> None:
        self._cluster.log.delete_blobs(group, below)

    def sync(self) -> None:
        self._cluster.log.flush()

    def after_durable(self, fn: Any) -> None:
        self._cluster.log.after_durable(fn)

    def call_soon(self, fn: Any) -> None:
        self.node.loop.call_soon(fn)
