"""Worker K >= 1 of a node with several workers (issue 36, docs/architecture.md
"Workers"): it serves AMQP connections on the node's ports (SO_REUSEPORT) and
runs the classic queues placed on it, in its own message store
(`data_dir/workers/K/messages`). It has no Raft member, no HTTP listener and
no cluster transport of its own:

- the metadata is worker 0's, followed (metadata_follow.py): routing,
  users and permissions are local reads, declarations commit through worker 0;
- every queue it does not run (quorum queues and streams, which run on worker 0,
  and the classic queues of other workers) is a `RemoteQueue` whose peer is
  the worker running it, over the worker links (transport.py, peers.py);
- its resource alarms: its memory against its share of the node's watermark
  (main.py divides it) and the data directory's disk, which worker 0 hears,
  and every other alarm in effect, which worker 0 tells it (alarms.py).

It provides what the components it builds use of their node (the Protocols
beside them), as node/broker.py does for worker 0."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from typing import Any

from amqp.errors import Condition
from metadata.machine import MetadataMachine
from metadata.projections import Projections
from node.client.authentication import authentication
from node.client.connection import ConnectionHandler
from node.client.tls import TlsContexts
from node.cluster.maintenance import CLOSE_REASON as DRAIN_REASON
from node.config import Config
from node.ops.alarms import Alarms
from node.ops.memory import MemoryAccount
from node.ops.metrics import NodeMetrics
from node.ops.periodic import Periodic
from node.tasks import BackgroundTasks
from node.vhosts.classic_store import ClassicStore
from node.vhosts.delayed_messages import DelayedMessages
from node.vhosts.local_queues import LocalQueues, Owners
from node.vhosts.metadata_store import MetadataStore
from node.vhosts.policies import PolicyApplier
from node.vhosts.queue_process import QueueProcess
from node.vhosts.remote_queue import QueueService, RemoteQueue
from node.vhosts.stream_proxy import StreamProxy
from node.vhosts.vhost import VHost
from node.vhosts.volatile_queues import VolatileQueues

from .alarms import apply_picture, follow_alarms
from .control import address
from .handover import Handover, serve_handovers
from .lost_workers import moved
from .metadata_follow import MetadataFollower
from .peers import WorkerPeers
from .questions import answer
from .slots import Slots, store_path, worker_peer
from .stand_ins import NoQuorumReplicas, StreamsOnNodeWorker, WorkerPlacement
from .transport import WorkerTransport

__all__ = ["WorkerNode", "serve_worker"]

log = logging.getLogger("warren.workers")


class WorkerNode(QueueProcess):
    def __init__(self, config: Config, index: int) -> None:
        self.config = config
        self.index = index
        self.node_id = ""  # the node's, from worker 0's first snapshot
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]
        self.connections: set[ConnectionHandler] = set()
        self.vhosts: dict[str, VHost] = {}
        self.metrics = NodeMetrics()
        self.auth, self.logins = authentication(config)
        self.tls = TlsContexts.from_config(config)
        self.metadata_machine = MetadataMachine()
        self.slots = Slots(config.workers, index, lambda: self.node_id)
        self.metadata_machine.subscribe(self.slots.on_applied, self.slots.on_restored)
        self.local_queues = LocalQueues(self)
        self.local_queues.elsewhere = self.slots.elsewhere
        self.projections = Projections(authenticator=self.auth, is_local=self.local_queues.is_local)
        self.metadata_machine.subscribe(self.projections.on_applied, self.projections.on_restored)
        self.metadata_machine.subscribe(self.local_queues.on_applied, self.local_queues.on_restored)
        self.policies = PolicyApplier(self.metadata_machine, self.projections, self.vhosts)
        self.metadata_machine.subscribe(self.policies.on_applied, self.policies.on_restored)
        self.metadata: MetadataStore = None  # type: ignore[assignment]
        self.owners = Owners()
        self.quorum = NoQuorumReplicas()
        self.streams = StreamsOnNodeWorker(self)
        self.placement = WorkerPlacement(self)
        self.volatile = VolatileQueues(self.metrics)
        self.delayed = DelayedMessages(self, config.delayed_message_memory_window)  # its schedulers run on worker 0
        self.node_names = None
        self.queue_service: QueueService | None = None
        self.handover: Handover | None = None
        self.cluster = None  # no Raft here (the memory account asks)
        self.classic: ClassicStore | None = None
        self.store: Any = None
        self.transport: WorkerTransport | None = None
        self._follower: MetadataFollower | None = None
        self._server: asyncio.base_events.Server | None = None
        self._tls_server: asyncio.base_events.Server | None = None
        self._alarm_check: Periodic | None = None
        self._tasks: BackgroundTasks = None  # type: ignore[assignment]
        self.started_at = time.monotonic()

    async def start(self) -> None:
        self.loop = loop = asyncio.get_running_loop()
        self._tasks = BackgroundTasks(loop, log)
        cfg = self.config
        messages = store_path(cfg.data_dir, self.index)  # where take_over.py moves queues from and to
        os.makedirs(os.path.dirname(messages), exist_ok=True)
        self.classic = ClassicStore(cfg, messages, loop)
        self.store = self.classic.store
        self.memory = MemoryAccount(self)
        self.alarms = Alarms(cfg.data_dir, cfg.memory_high_watermark, cfg.disk_free_limit, self._alarm_changed,
                             memory_used=self.memory.held, store_full=lambda: self.classic.committer.out_of_space)  # fmt: skip
        self._alarm_check = Periodic(loop, cfg.alarm_check_interval, self.alarms.check, "the resource alarm check")
        self._alarm_check.start()
        self._follower = MetadataFollower(loop, self.metadata_machine, address(cfg.data_dir, "control"),
                                          on_extra=self._node_said, on_notice=self._notice,
                                          on_ask=lambda question: answer(self, question))  # fmt: skip
        follow_alarms(self.alarms, self.index, self._follower.tell)
        await self._follower.start()
        self.metadata = MetadataStore(self.metadata_machine, self._follower.propose)
        channels: dict = {}
        me = worker_peer(self.node_id, self.index)
        self.transport = WorkerTransport(loop, me, address(cfg.data_dir, f"worker-{self.index}"), self._dial_to)
        self.transport.on_node_message = lambda peer, channel, payload: channels[channel](peer, payload)
        await self.transport.start()
        for lower in range(self.index):  # a link to each worker below, kept up (they answer on it too)
            self.transport.add_peer(worker_peer(self.node_id, lower))
        peers = WorkerPeers(self.node_id, self.index, cfg.workers, self.transport, channels,
                            members=lambda: self.metadata_machine.state.members)  # fmt: skip
        self.queue_service = QueueService(peers, loop, self.vhosts, self.projections, cfg.quorum_consumer_lease)
        self.volatile.attach_cluster(peers, loop)
        self.classic.drop_orphans()
        self.handover = serve_handovers(self, self.slots)
        await self._listen()
        self.memory.set_baseline()
        log.info("worker %d of node %s listening amqp=%s:%s", self.index, self.node_id, cfg.listen_host, cfg.amqp_port)

    def _node_said(self, extra: dict) -> None:
        """Worker 0's snapshot: the node's id (once) and its map of the classic queues' workers."""
        if not self.node_id:
            self.node_id = extra["node_id"]
            self.owners.node_id = worker_peer(self.node_id, self.index)  # exclusive queues' owner ids
        self.slots.restore(extra["places"])
        apply_picture(self.alarms, extra.get("alarms", []), worker_peer(self.node_id, self.index))

    def _notice(self, item: list) -> None:
        if item[0] == "placed":
            self.slots.placed(item[1], item[2], item[3])
        elif item[0] == "moved":
            moved(self, self.slots, item[1], item[2], item[3])
        elif item[0] == "alarms":
            apply_picture(self.alarms, item[1], worker_peer(self.node_id, self.index))
        elif item[0] == "listening" and item[1]:
            if self._server is None and self._tls_server is None:
                self.background(self._listen(), "listening again after maintenance")
        elif item[0] == "listening":  # the node drains for maintenance
            self.suspend_listeners()
            for conn in list(self.connections):
                conn.force_close(Condition.CONNECTION_FORCED, DRAIN_REASON)

    def _dial_to(self, peer: str) -> str | None:
        """Each pair of workers has one link, dialled by the higher-numbered worker."""
        index = 0 if peer == self.node_id else int(peer.rpartition("/w")[2])
        return address(self.config.data_dir, f"worker-{index}") if index < self.index else None

    async def _listen(self) -> None:
        cfg = self.config
        if cfg.amqp_port >= 0:
            self._server = await self.loop.create_server(lambda: ConnectionHandler(self), cfg.listen_host,
                                                         cfg.amqp_port, reuse_address=True, reuse_port=True,
                                                         backlog=1024)  # fmt: skip
        if self.tls is not None and cfg.amqps_port >= 0:
            self._tls_server = await self.loop.create_server(
                lambda: ConnectionHandler(self), cfg.listen_host, cfg.amqps_port, reuse_address=True,
                reuse_port=True, backlog=1024, ssl=self.tls.listening,
                ssl_handshake_timeout=cfg.handshake_timeout or None)  # fmt: skip

    async def stop(self) -> None:
        await self.close_clients()
        if self._tasks is not None:
            self._tasks.cancel()
        if self._alarm_check is not None:
            self._alarm_check.stop()
        if self.queue_service is not None:
            self.queue_service.close()
        if self.handover is not None:
            self.handover.close()
        if self.transport is not None:
            await self.transport.close()
        if self._follower is not None:
            self._follower.close()
        if self.classic is not None:
            await self.classic.close(self.vhosts)
        self.logins.close()
        log.info("worker %d stopped", self.index)

    # -- what the vhosts, queues, links and connections use of their node -----------------

    def remote_queue(self, vhost: VHost, record: Any, arguments: dict) -> RemoteQueue:
        if record.type == "stream":  # a reader's offset and filters travel with its attach
            return StreamProxy(self, vhost.name, record, arguments)
        return super().remote_queue(vhost, record, arguments)

    def background(self, coro: Any, what: str) -> None:
        """Runs a metadata change nobody waits for; a failure is logged."""
        self._tasks.spawn(coro, what)

    def _alarm_changed(self, active: bool) -> None:
        self.block_publishers(active)


async def serve_worker(cfg: Config, index: int) -> None:
    """Worker `index` >= 1 until SIGTERM or SIGINT; SIGHUP reloads its TLS certificate."""
    worker = WorkerNode(cfg, index)
    try:
        await worker.start()
    except BaseException:
        await worker.stop()
        raise
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if worker.tls is not None:
        loop.add_signal_handler(signal.SIGHUP, worker.tls.reload)
    await stop.wait()
    await worker.stop()
