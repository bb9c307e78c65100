"""What the management API, its routes (node/http/*_routes.py) and the
Prometheus endpoint use of their node: the port node/broker.py provides.

A handler reaches it as `api_of(request).node`. The members are read at each
request: `cluster`, `metadata` and the bound ports exist once the node has
started (`cluster` stays None with clustering off)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import asyncio

    from metadata.projections import Projections
    from node.client.login import LoginService
    from node.client.tls import TlsContexts
    from node.cluster.cluster import Cluster
    from node.cluster.maintenance import Maintenance
    from node.cluster.node_names import NodeNames
    from node.cluster.placement import Placement
    from node.config import Config
    from node.ops.alarms import Alarms
    from node.ops.logs import NodeLogs
    from node.ops.memory import MemoryAccount
    from node.ops.metrics import NodeMetrics
    from node.ops.periodic import Periodic
    from node.shovel.manager import ShovelManager
    from node.vhosts.definitions import DefinitionsFile
    from node.vhosts.delayed_messages import DelayedMessages
    from node.vhosts.metadata_store import MetadataStore
    from node.vhosts.quorum_groups import QuorumQueues
    from node.vhosts.vhost import VHost
    from node.workers.node_worker import NodeWorker
    from routing.users import Authenticator

__all__ = ["ManagementNode", "ScrapedNode"]


class ScrapedNode(Protocol):
    """What a Prometheus scrape reads (node/http/prometheus.py, prometheus_raft.py)."""

    config: Config
    cluster: Cluster | None
    connections: set[Any]  # node/client/connection.py's handlers
    vhosts: dict[str, VHost]
    metrics: NodeMetrics
    alarms: Alarms
    memory: MemoryAccount  # what the node holds, by part (/metrics/memory-breakdown)
    logins: LoginService  # its verdicts by protocol (rabbitmq_auth_attempts_*)
    projections: Projections  # the metadata as read (rabbitmq_identity_info's cluster name and id)
    started_at: float  # time.monotonic() when the node started (uptime, rabbitmq_erlang_uptime_seconds)
    shovels: ShovelManager | None  # dynamic shovels' status (shovel_routes.py, rabbitmq_shovel_*); None until started


class ManagementNode(ScrapedNode, Protocol):
    """What the management API reads and changes, and the overview and node pages
    (node/http/formats.py) show."""

    node_id: str
    loop: asyncio.AbstractEventLoop
    # the bound ports (GET /api/overview's listeners); None: not listening
    amqp_port: int | None
    amqps_port: int | None
    http_port: int | None
    https_port: int | None
    metrics_port: int | None
    metrics_tls_port: int | None
    # users, logins and permissions (api.py, node_routes.py, topic_permission_routes.py)
    auth: Authenticator
    # the metadata: read in the projections (ScrapedNode), changed through the store
    metadata: MetadataStore
    definitions: DefinitionsFile
    alarm_check: Periodic | None  # GET /api/health/checks/alarms (health_routes.py)
    quorum: QuorumQueues  # quorum queue members (cluster_routes.py)
    maintenance: Maintenance  # drain and revive (maintenance_routes.py)
    placement: Placement  # rebalance
    node_names: NodeNames | None  # members' node names; None until the cluster runs
    memory: MemoryAccount  # GET /api/nodes/{node}/memory (node_detail_routes.py)
    tls: TlsContexts | None  # None without tls_cert (tls_routes.py)
    logs: NodeLogs | None  # GET /api/nodes/{node}/log-tail; None: a node whose host process owns logging
    node_worker: NodeWorker | None  # a node with several workers: the others' connections (node_routes.py)
    delayed: DelayedMessages  # what x-delayed-message exchanges hold (topology_routes.py)

    def now_ms(self) -> int: ...

    async def delete_vhost(self, name: str) -> bool: ...

    def reload_tls(self) -> bool: ...
