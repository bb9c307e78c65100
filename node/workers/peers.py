"""The cluster as the queue proxy and Direct Reply-To see it from a worker of a
node with several workers (issue 36): the other workers are peers too.

`QueueService` (node/vhosts/remote_queue.py) and `VolatileQueues`
(node/vhosts/volatile_queues.py) use a few things of the `Cluster`: its
transport's node messages, its RPC channels, its liveness and its members.
`WorkerPeers` gives them those with this node's workers added, so both run
unchanged: on worker 0 the peers `node_id/wK` go over the worker links
(transport.py) and every other peer over the cluster transport as before; on
worker K everything goes over the worker links, worker 0 being the peer
`node_id`."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from .slots import node_of_peer, worker_peer
from .transport import WorkerTransport

__all__ = ["RoutedTransport", "WorkerPeers"]


class RoutedTransport:
    """Worker 0's transport for the queue proxy: `is_worker(peer)` picks the worker links, else the cluster's."""

    def __init__(self, cluster_transport: Any, workers: WorkerTransport, is_worker: Callable[[str], bool]) -> None:
        self._cluster = cluster_transport
        self._workers = workers
        self._is_worker = is_worker
        self.on_peer_down: list[Callable[[str], None]] = []
        self.inbound = self
        cluster_transport.on_peer_down.append(self._down)
        workers.on_peer_down.append(self._down)

    def _pick(self, peer: str) -> Any:
        return self._workers if self._is_worker(peer) else self._cluster

    @property
    def options(self) -> Any:
        return self._cluster.options

    @property
    def failed(self) -> BaseException | None:
        return self._cluster.failed

    def add_peer(self, peer: str) -> None:
        self._pick(peer).add_peer(peer)

    def is_connected(self, peer: str) -> bool:
        return self._pick(peer).is_connected(peer)

    def epoch_to(self, peer: str) -> int | None:
        return self._pick(peer).epoch_to(peer)

    def epoch_from(self, peer: str) -> int | None:
        return self._pick(peer).epoch_from(peer)

    def is_partitioned(self, peer: str) -> bool:
        return self._pick(peer).is_partitioned(peer)

    def send_node_message(self, peer: str, channel: str, payload: bytes, gated: bool = True) -> bool:
        return self._pick(peer).send_node_message(peer, channel, payload, gated)

    def cut(self, peer: str, reason: str) -> None:
        self._pick(peer).inbound.cut(peer, reason)

    def _down(self, peer: str) -> None:
        for callback in list(self.on_peer_down):
            callback(peer)


class WorkerPeers:
    """The part of the cluster the queue proxy and Direct Reply-To use, this node's workers included.

    `node_id` is this worker's own peer name (Direct Reply-To names its queues after it)."""

    def __init__(self, node_id: str, me: int, workers: int, transport: Any, channels: dict,
                 cluster: Any = None, members: Callable[[], Any] | None = None) -> None:  # fmt: skip
        """`cluster`: worker 0's; `members()`: the cluster's member ids, as worker K knows them."""
        self.node_id = worker_peer(node_id, me)
        self.transport = transport
        self.rpc = SimpleNamespace(channels=channels)
        self._cluster = cluster
        self._members = members
        self._workers = [worker_peer(node_id, k) for k in range(workers)]
        self._node = node_id
        self._me = me

    @property
    def liveness(self) -> Any:
        return self._cluster.liveness if self._cluster is not None else None

    def members(self) -> list[str]:
        if self._cluster is not None:
            nodes = self._cluster.members()
        else:
            nodes = sorted(self._members()) if self._members is not None else [self._node]
        return [*nodes, *(w for w in self._workers if w not in nodes)]

    def next_hop(self, peer: str) -> str:
        """Where a node message for `peer` goes from this worker: straight to a worker of this
        node, and from worker 0 to another node's worker 0 (which passes it on to its worker
        K); every other worker reaches other nodes through its worker 0."""
        node = node_of_peer(peer)
        if node == self._node:
            return peer
        return node if self._me == 0 else self._node
