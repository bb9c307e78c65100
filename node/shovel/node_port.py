"""The node as the shovels see it (node/shovel/manager.py's ShovelNode),
made from the components node/broker.py hands over."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from node.client.direct import DirectPublisher, DirectRefused, open_direct
from node.client.login import LoginsBusy
from node.shovel.amqp_client import ClientError
from node.shovel.manager import ShovelManager
from node.vhosts.remote_queue import refresh_counts

if TYPE_CHECKING:
    from node.client.connection import ClientNode

__all__ = ["ShovelNodePort", "start_shovels"]


def start_shovels(port: ShovelNodePort, cluster: Any, machine: Any, loop: Any) -> ShovelManager:
    """The node's shovel manager, serving its node calls, following the metadata, started."""
    manager = ShovelManager(port, loop)
    cluster.calls.update(manager.calls())
    machine.subscribe(manager.on_applied, manager.on_restored)
    manager.start()
    return manager


class ShovelNodePort:
    def __init__(self, cluster: Any, metadata: Any, projections: Any, vhosts: dict[str, Any],
                 amqp_port: Callable[[], int | None], node_name: str, listen_host: str, client_node: ClientNode) -> None:  # fmt: skip
        self._cluster, self._metadata, self._projections, self._vhosts = cluster, metadata, projections, vhosts
        self._client_node = client_node  # what node/client/direct.py publishes through
        self._amqp_port, self._node_name = amqp_port, node_name
        # where a local shovel dials this node: the listening address, loopback when it listens on all
        self.local_host = "127.0.0.1" if listen_host in ("", "0.0.0.0", "::") else listen_host

    @property
    def node_id(self) -> str:
        return self._cluster.node_id

    @property
    def amqp_port(self) -> int | None:
        return self._amqp_port()

    def cluster_name(self) -> str:
        return self._projections.global_parameters.get("cluster_name", self._node_name)

    def shovel_parameters(self) -> dict[tuple[str, str], str]:
        return {(vhost, name): value for (vhost, component, name), value in self._projections.parameters.items()
                if component == "shovel"}  # fmt: skip

    def members(self) -> list[str]:
        return self._cluster.members()

    def is_reachable(self, member: str) -> bool:
        return self._cluster.is_reachable(member)

    async def propose(self, command: Any) -> Any:
        return await self._metadata.run(command)

    async def call(self, peer: str, method: str, args: dict, timeout: float) -> dict:
        return await self._cluster.call(peer, method, args, timeout)

    async def direct_publisher(self, user: str | None, password: str, vhost: str, queue: str,
                               on_credit: Callable[[], None], on_end: Callable[[str], None]) -> DirectPublisher:  # fmt: skip
        try:
            return await open_direct(self._client_node, user, password, vhost, queue, on_credit, on_end)
        except (DirectRefused, LoginsBusy) as e:
            raise ClientError(str(e) or type(e).__name__) from None

    async def queue_length(self, vhost: str, queue: str) -> int:
        """The ready messages of a queue of this cluster (src-delete-after queue-length)."""
        found = self._vhosts[vhost].queues.get(queue) if vhost in self._vhosts else None
        if found is None:
            raise LookupError(f"no queue '{queue}' in vhost '{vhost}'")
        await refresh_counts([found])
        return found.message_count
