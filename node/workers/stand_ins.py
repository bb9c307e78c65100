"""What worker K >= 1 has in place of the node's quorum replicas, streams and
leader placement (worker_node.py): those run on worker 0, the node worker,
and here only what a declaration on this worker asks of them is answered,
exactly as worker 0 would answer it.

A worker never starts a quorum replica or a stream: its LocalQueues proxies
every such queue to worker 0 before asking these (slots.py `elsewhere`), so
the hooks for a replica's life here are no-ops by design, not by omission."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from metadata.projections import Projections
from node.cluster.placement import choose_leader, locator_of, policy_definition
from node.vhosts.metadata_store import MetadataStore
from node.vhosts.streams import place_stream
from queues.stream.config import StreamConfig

__all__ = ["NoQuorumReplicas", "StreamsOnNodeWorker", "WorkerPlacement"]


class _Node(Protocol):
    node_id: str
    config: Any
    metadata: MetadataStore
    projections: Projections


class WorkerPlacement:
    """Where a quorum queue or stream declared on this worker is led: its locator's choice
    among the members, without the members' queue counts (worker 0's to know): a balanced
    locator here sees every member alike."""

    def __init__(self, node: _Node) -> None:
        self.node = node

    def policy_definition(self, vhost: str, name: str, queue_type: str) -> Mapping[str, Any]:
        return policy_definition(self.node.projections, vhost, name, queue_type)

    def leader_for(self, vhost: str, name: str, arguments: Mapping[str, Any], queue_type: str = "quorum") -> str:
        node = self.node
        locator = locator_of(arguments, self.policy_definition(vhost, name, queue_type),
                             node.config.queue_leader_locator)  # fmt: skip
        return choose_leader(locator, node.node_id, node.metadata.state.members, {}, set())


class StreamsOnNodeWorker:
    """Streams as a worker sees them: declared here, run on worker 0."""

    def __init__(self, node: Any) -> None:
        self.node = node

    def place(self, vhost: str, name: str, arguments: dict[str, Any], config: StreamConfig) -> tuple[str, ...]:
        return place_stream(self.node.metadata.state, self.node.placement, vhost, name, arguments, config)

    def replicated(self, vhost: str, name: str) -> bool:
        return False  # a replica runs on worker 0 only

    def changed(self, vhost: Any, name: str) -> None:
        pass  # a replica's role: worker 0's

    def dropped(self, vhost: str, name: str) -> None:
        pass  # no copy here


class NoQuorumReplicas:
    """The quorum replicas a worker runs: none (the memory account asks)."""

    queues: dict[str, Any] = {}
