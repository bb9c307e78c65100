"""What every process that serves clients and runs queues gives the parts it
builds, the same way: node/broker.py (a node, or worker 0 of one) and
node/workers/worker_node.py (another worker) both take it. The Protocols it
satisfies are beside their users (LocalQueuesNode, ProxyNode, ClientNode)."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from amqp.errors import Condition
from node.client.connection import server_properties
from node.vhosts.remote_queue import RemoteQueue

if TYPE_CHECKING:
    from node.config import Config
    from node.vhosts.classic_store import ClassicStore
    from node.vhosts.remote_queue import QueueService
    from node.vhosts.vhost import VHost

__all__ = ["QueueProcess"]


class QueueProcess:
    config: Config
    connections: set[Any]  # node/client/connection.py's handlers
    classic: ClassicStore | None
    queue_service: QueueService | None
    _server: asyncio.base_events.Server | None  # the AMQP listener, and the AMQPS one
    _tls_server: asyncio.base_events.Server | None

    def suspend_listeners(self) -> None:
        """Refuse new AMQP connections (maintenance mode, shutdown); open ones stay."""
        for server in (self._server, self._tls_server):
            if server is not None:
                server.close()
        self._server = self._tls_server = None

    async def close_clients(self) -> None:
        """Stop listening, close every connection with connection-forced, let their CLOSE frames out."""
        self.suspend_listeners()
        for conn in list(self.connections):
            conn.force_close(Condition.CONNECTION_FORCED, "broker shutdown")
        await asyncio.sleep(0)

    def make_queue(self, vhost: VHost, name: str, durable: bool, exclusive_owner: Any, auto_delete: bool,
                   arguments: dict) -> Any:  # fmt: skip
        return self.classic.make_queue(vhost, name, durable, exclusive_owner, auto_delete, arguments)

    def recover_queue(self, queue: Any) -> None:
        self.classic.recover_queue(queue)

    def remote_queue(self, vhost: VHost, record: Any, arguments: dict) -> RemoteQueue:
        return RemoteQueue(self, vhost.name, record, arguments)  # type: ignore[arg-type]

    def queue_stopped(self, queue: Any) -> None:
        if self.queue_service is not None:
            self.queue_service.queue_stopped(queue)

    def vhost_deleted(self, vhost: VHost) -> None:
        for conn in list(self.connections):
            if conn.vhost is vhost:
                conn.force_close(Condition.CONNECTION_FORCED, f"vhost '{vhost.name}' is deleted")

    def block_publishers(self, active: bool) -> None:
        """A resource alarm began (True) or ended: every connection's publishers wait or go on."""
        for conn in list(self.connections):
            conn.block() if active else conn.unblock()

    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def server_properties(self) -> dict:
        return server_properties(self.config)
