"""The node: listeners, vhosts, durable storage, alarms, and their lifecycle.

The Broker builds every component and wires each to the few things it uses
(its constructor's ports; docs/architecture.md, "The node's wiring"): the
Broker itself satisfies the Protocols they name. No other module names it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from typing import Any

from metadata import commands as mc
from metadata.machine import MetadataMachine
from metadata.projections import Projections
from node import __version__
from node.client.authentication import authentication
from node.client.connection import ConnectionHandler
from node.client.tls import TlsContexts
from node.cluster import enabled_flags
from node.cluster.alarm_gossip import AlarmGossip
from node.cluster.cluster import Cluster
from node.cluster.kv import KeyValueMachine
from node.cluster.machine import ClusterMachine, announce_member, local_flags
from node.cluster.maintenance import Maintenance
from node.cluster.node_names import NodeNames
from node.cluster.placement import Placement
from node.config import Config
from node.http import prometheus
from node.http.api import ManagementAPI, start_sites
from node.ops import raft_progress, snapshot_export, timeline_service
from node.ops.alarms import Alarms, any_store_full
from node.ops.logs import NodeLogs
from node.ops.memory import MemoryAccount
from node.ops.metrics import NodeMetrics
from node.ops.periodic import Periodic
from node.ops.state_snapshot import SnapshotWriter, collect
from node.shovel.manager import ShovelManager
from node.shovel.node_port import ShovelNodePort, start_shovels
from node.vhosts.classic_store import ClassicStore
from node.vhosts.definitions import DefinitionsFile
from node.vhosts.delayed_messages import DelayedMessages
from node.vhosts.local_queues import LocalQueues, Owners
from node.vhosts.metadata_ready import metadata_ready
from node.vhosts.metadata_store import MetadataStore, new_key
from node.vhosts.policies import PolicyApplier
from node.vhosts.queue_process import QueueProcess
from node.vhosts.quorum_groups import QuorumQueues
from node.vhosts.quorum_reconcile import QuorumReconciler
from node.vhosts.remote_queue import QueueService
from node.vhosts.streams import StreamQueues
from node.vhosts.vhost import VHost
from node.vhosts.volatile_queues import VolatileQueues
from node.workers.handover import Handover, serve_handovers
from node.workers.node_worker import NodeWorker
from node.workers.slots import store_path
from queues.quorum.queue import QuorumQueue
from storage.faults import DiskFaults
from storage.group_commit import GroupCommitter
from storage.message_store import MessageStore

log = logging.getLogger("warren.node")


class Broker(QueueProcess):
    def __init__(self, config: Config, logs: NodeLogs | None = None):
        self.config = config
        self.logs = logs  # its log outputs when node/main.py installed them (log_tail); None in a host process
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]
        self.connections: set[ConnectionHandler] = set()
        self.vhosts: dict[str, VHost] = {}
        self.metrics = NodeMetrics()
        # users and permissions come from the metadata (the projections keep this in step)
        self.auth, self.logins = authentication(config)
        self._server: asyncio.base_events.Server | None = None
        self._tls_server: asyncio.base_events.Server | None = None
        self.tls = TlsContexts.from_config(config)  # None without tls_cert; raises TlsError on bad files
        self.alarm_check: Periodic | None = None
        self.classic: ClassicStore | None = None  # the classic queues' message store, once started
        self.store: MessageStore | None = None
        self.committer: GroupCommitter | None = None
        self.amqp_port: int | None = config.amqp_port
        # The ports actually bound (config port 0 picks a free one); None
        # while not listening or when the config disables it (port < 0).
        self.amqps_port: int | None = None
        self.http_port: int | None = None
        self.https_port: int | None = None
        self.metrics_port: int | None = None
        self.metrics_tls_port: int | None = None
        self.started_at = time.monotonic()  # uptime: real seconds, whatever the wall clock does
        self.management = ManagementAPI(self)
        self._runners: list[Any] = []  # the HTTP sites' runners
        # The Raft side of the node (node/cluster/cluster.py) and the metadata it replicates.
        self.cluster: Cluster | None = None
        self.cluster_machine: ClusterMachine | None = None
        self.metadata_machine = MetadataMachine()
        # with several workers (node/workers/): this is worker 0, and its map of the classic queues'
        # workers follows the metadata before the queues start
        self.node_worker = (NodeWorker(config.data_dir, config.workers, self.metadata_machine, lambda: self.node_id)
                            if config.workers > 1 else None)  # fmt: skip
        self.handover: Handover | None = None  # with several workers, once the node is up
        self.local_queues = LocalQueues(self)
        if self.node_worker is not None:
            self.local_queues.elsewhere = self.node_worker.slots.elsewhere
        self.projections = Projections(authenticator=self.auth, is_local=self.local_queues.is_local)
        self.metadata_machine.subscribe(self.projections.on_applied, self.projections.on_restored)
        self.metadata_machine.subscribe(self.local_queues.on_applied, self.local_queues.on_restored)
        self.policies = PolicyApplier(self.metadata_machine, self.projections, self.vhosts)  # after local_queues
        self.metadata_machine.subscribe(self.policies.on_applied, self.policies.on_restored)
        self.metadata: MetadataStore | None = None
        self.owners = Owners()
        self.quorum = QuorumQueues(self, config.quorum_consumer_lag_max, config.quorum_snapshot_entries,
                                   config.quorum_consumer_lease, config.consumer_timeout)  # fmt: skip
        self.disk_faults = DiskFaults() if config.enable_test_faults else None  # tests' injected disk errors
        self.streams = StreamQueues(self, config.data_dir, self.disk_faults)
        self.maintenance = Maintenance(self, self.streams.handover.hand_over)  # warren ctl drain / revive
        self.placement = Placement(self, config.queue_leader_locator)  # quorum-queue leader locators, rebalance
        self.queue_service: QueueService | None = None
        self.volatile = VolatileQueues(self.metrics)  # Direct Reply-To's queues: in memory, never in the metadata
        self.delayed = DelayedMessages(self, config.delayed_message_memory_window)  # what x-delayed-message exchanges hold until due
        self.alarm_gossip: AlarmGossip | None = None
        self.node_names: NodeNames | None = None  # members' node names (the HTTP API shows them)
        self.reconciler: QuorumReconciler | None = None  # quorum queues grown to their target group size
        self._background: set[asyncio.Task] = set()
        self.snapshots: SnapshotWriter | None = None
        self.feature_flags = local_flags(config.enable_test_faults)  # what this node supports
        self._announcer: asyncio.Task | None = None
        self.shovels: ShovelManager | None = None  # dynamic shovels (node/shovel/), once the AMQP port listens

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        cfg = self.config
        os.makedirs(cfg.data_dir, exist_ok=True)
        enabled_flags.check_known(cfg.data_dir, self.feature_flags, __version__)  # before any file is opened
        enabled_flags.EnabledFlagsFile(cfg.data_dir, self.metadata_machine, __version__)
        self.classic = ClassicStore(cfg, store_path(cfg.data_dir, 0), self.loop, self.disk_faults)
        self.store, self.committer = self.classic.store, self.classic.committer
        if self.node_worker is not None:  # a queue without a place and without messages here may go anywhere
            self.node_worker.slots.stored_here = self.classic.holds
        self.memory = MemoryAccount(self)
        full = lambda: any_store_full(self.committer, self.cluster, self.streams.disk, self.alarms.disk_free)  # noqa: E731
        self.alarms = Alarms(cfg.data_dir, cfg.memory_high_watermark, cfg.disk_free_limit, self._alarm_changed,
                             memory_used=self.memory.held, store_full=full)
        self.definitions = DefinitionsFile(self)
        self.alarm_check = Periodic(self.loop, cfg.alarm_check_interval, self.alarms.check, "the resource alarm check")
        self.alarm_check.start()
        try:
            # the metadata machine, and with --enable-test-faults the cluster tests' key-value
            # probe beside it (node/cluster/machine.py)
            probe = KeyValueMachine() if cfg.enable_test_faults else None
            self.cluster_machine = ClusterMachine(metadata=self.metadata_machine, kv=probe)
            self.cluster = Cluster.from_config(cfg, self.cluster_machine, self.disk_faults)
            await self.cluster.start()
            self.owners.node_id = self.cluster.node_id
            self.metadata = MetadataStore(self.metadata_machine, self.cluster.propose)
            # the cluster as the queue proxy and Direct Reply-To reach it: with the other workers, if any
            peers = await self.node_worker.start(self.loop, self.cluster, self) if self.node_worker else self.cluster
            self.queue_service = QueueService(peers, self.loop, self.vhosts, self.projections,
                                              cfg.quorum_consumer_lease)  # fmt: skip
            if self.node_worker is not None:
                self.queue_service.relays = self.node_worker.relays
            self.volatile.attach_cluster(peers, self.loop)
            self.quorum.attach()
            self.streams.attach()
            self.maintenance.attach()
            self.placement.attach()
            self.reconciler = QuorumReconciler(
                loop=self.loop, interval=cfg.quorum_reconcile_interval, state=lambda: self.metadata.state,
                leads=self.quorum.is_leader, arguments_of=self._effective_arguments,
                reachable=self.cluster.is_reachable,
                add_member=lambda vhost, name, member: self.quorum.change_member(vhost, name, member, True))
            self.reconciler.start()
            snapshot_export.register(self.cluster, cfg.data_dir)
            timeline_service.register(self.cluster, cfg.data_dir, cfg.snapshot_interval)
            raft_progress.register(self.cluster, self.vhosts)
            self.alarm_gossip = AlarmGossip(self.cluster, self.loop, self.alarms, cfg.alarm_check_interval)
            self.node_names = NodeNames(self.cluster, self.loop, cfg.node_name, self.background)
            await metadata_ready(self.cluster, self.metadata, self.feature_flags, cfg)
            self.classic.drop_orphans()
            if self.node_worker is not None:
                await self.node_worker.serve_followers()
            self.delayed.start(self.loop)
            self._announcer = self.loop.create_task(
                announce_member(self.cluster, self.cluster_machine, self.feature_flags))
            if cfg.definitions_file:
                await self.definitions.load(cfg.definitions_file)
            if cfg.snapshot_interval > 0:
                workers = self.node_worker  # a node of several workers: the others' queues and clients too
                self.snapshots = SnapshotWriter(
                    cfg.data_dir, lambda: collect(self, workers=None if workers is None else workers.snapshot_parts),
                    prepare=None if workers is None else workers.refresh_snapshot_parts,
                    interval=cfg.snapshot_interval, max_bytes=cfg.snapshot_max_bytes, keep_files=cfg.snapshot_keep_files)  # fmt: skip
                await self.snapshots.start()
            # management first: once the AMQP port accepts, the whole node is up
            await self._start_http()
            if self.node_worker is not None:
                self.handover = serve_handovers(self, self.node_worker.slots)
            await self._start_amqp()
            self.shovels = start_shovels(ShovelNodePort(self.cluster, self.metadata, self.projections, self.vhosts,
                                                        lambda: self.amqp_port, cfg.node_name, cfg.listen_host, self),
                                         self.cluster, self.metadata_machine, self.loop)  # fmt: skip
        except BaseException:
            await self.stop()
            raise
        self.started_at = time.monotonic()
        self.memory.set_baseline()  # what the started node holds beyond what it accounts for
        log.info("node=%s listening amqp=%s:%s amqps=%s http=%s https=%s metrics=%s metrics_tls=%s cluster=%s "
                 "data_dir=%s", cfg.node_name, cfg.listen_host, self.amqp_port, self.amqps_port, self.http_port,
                 self.https_port, self.metrics_port, self.metrics_tls_port, self.cluster.node_id,
                 os.path.abspath(cfg.data_dir))  # fmt: skip

    def _effective_arguments(self, vhost: str, name: str) -> dict | None:
        """A queue's arguments with its policy's, as this node's copy of it acts on them."""
        queue = self.vhosts[vhost].queues.get(name) if vhost in self.vhosts else None
        return None if queue is None else queue.effective_arguments

    async def _start_amqp(self, ports: tuple[int, int] | None = None) -> None:
        """The plain AMQP listener and, with TLS configured, AMQPS (on `ports`, default the
        configured ones). The TLS handshake runs inside the loop's transport without blocking
        it, bounded by handshake_timeout; the AMQP handshake's own timer starts after it."""
        cfg = self.config
        amqp_port, amqps_port = ports or (cfg.amqp_port, cfg.amqps_port)
        self.amqp_port = None
        if amqp_port >= 0:
            self._server = await self.loop.create_server(lambda: ConnectionHandler(self), cfg.listen_host,
                                                         amqp_port, reuse_address=True, backlog=1024,
                                                         reuse_port=cfg.workers > 1)  # fmt: skip
            self.amqp_port = self._server.sockets[0].getsockname()[1]
        if self.tls is not None and amqps_port >= 0:
            self._tls_server = await self.loop.create_server(
                lambda: ConnectionHandler(self), cfg.listen_host, amqps_port, reuse_address=True, backlog=1024,
                reuse_port=cfg.workers > 1, ssl=self.tls.listening, ssl_handshake_timeout=cfg.handshake_timeout or None)  # fmt: skip
            self.amqps_port = self._tls_server.sockets[0].getsockname()[1]
        if self.amqp_port is None and self.amqps_port is None:
            raise ValueError("no AMQP listener: amqp_port < 0 and no AMQPS (tls_cert unset or amqps_port < 0)")

    async def _start_http(self) -> None:
        """The management API and the Prometheus endpoint, on this loop,
        each over plain HTTP and, with TLS configured, HTTPS."""
        cfg, tls = self.config, self.tls.listening if self.tls is not None else None
        https_port = cfg.https_port if tls is not None else -1  # the TLS sites only with tls_cert
        metrics_tls_port = cfg.metrics_tls_port if tls is not None else -1
        runner, (self.http_port, self.https_port) = await start_sites(
            self.management.application(), cfg.listen_host, [(cfg.http_port, None), (https_port, tls)])
        if runner is not None:
            self._runners.append(runner)
            self.management.start_sampling()
        runner, (self.metrics_port, self.metrics_tls_port) = await start_sites(
            prometheus.application(self), cfg.listen_host, [(cfg.metrics_port, None), (metrics_tls_port, tls)])
        if runner is not None:
            self._runners.append(runner)

    def suspend_listeners(self) -> None:
        """Maintenance mode (node/cluster/maintenance.py): refuse new AMQP connections; open ones stay."""
        super().suspend_listeners()
        if self.node_worker is not None:  # and the other workers', whose connections the drain closes too
            self.node_worker.listening(False)

    async def resume_listeners(self) -> None:
        """Listen again on the ports bound before suspend_listeners."""
        if self._server is None and self._tls_server is None:
            await self._start_amqp((-1 if self.amqp_port is None else self.amqp_port,
                                    -1 if self.amqps_port is None else self.amqps_port))  # fmt: skip
        if self.node_worker is not None:
            self.node_worker.listening(True)

    def reload_tls(self) -> bool:
        """SIGHUP and POST /api/tls/reload: the certificate, key and CA read
        again for new handshakes; open connections keep theirs. False when
        TLS is not configured; raises TlsError (the old files stay in force)
        when the new ones do not load."""
        if self.tls is None:
            return False
        self.tls.reload()
        return True

    async def stop(self) -> None:
        if self.shovels is not None:
            self.shovels.stop()
        if self.snapshots is not None:
            await self.snapshots.stop()
            self.snapshots = None
        if self.alarm_check is not None:
            self.alarm_check.stop()
        self.management.stop_sampling()
        runners, self._runners = self._runners, []
        for runner in runners:
            await runner.cleanup()
        self.http_port = self.metrics_port = self.https_port = self.metrics_tls_port = None
        await self.close_clients()
        for task in list(self._background):
            task.cancel()
        if self._announcer is not None:
            self._announcer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._announcer
            self._announcer = None
        if self.reconciler is not None:
            self.reconciler.stop()
        self.delayed.stop()  # its schedulers are consumers of quorum queues: gone before the queues close
        for part in (self.quorum, self.placement, self.streams, self.queue_service, self.alarm_gossip, self.node_names):
            if part is not None:  # the optional ones exist once start got that far
                part.close()
        if self.handover is not None:
            self.handover.close()
        if self.node_worker is not None:
            await self.node_worker.close()
        if self.cluster is not None:
            await self.cluster.stop()
        if self.classic is not None:
            await self.classic.close(self.vhosts)
        self.logins.close()
        log.info("node=%s stopped", self.config.node_name)

    # ------------------------------------------------------------ services for vhosts, queues and links

    @property
    def node_id(self) -> str:
        """This node's name in the cluster (and as a queue's leader)."""
        return self.cluster.node_id if self.cluster is not None else ""

    async def delete_vhost(self, name: str) -> bool:
        """Deletes a vhost with everything in it, cluster-wide; its clients are disconnected."""
        if name not in self.vhosts:
            return False
        await self.metadata.run(mc.DeleteVHost(new_key(), name))
        return True

    def queue_stopped(self, queue: Any) -> None:
        super().queue_stopped(queue)
        if isinstance(queue, QuorumQueue):
            self.quorum.stop(queue)

    def background(self, coro: Any, what: str) -> None:
        """Runs a metadata change nobody waits for; a failure is logged."""

        async def run() -> None:
            try:
                await coro
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("%s failed: %s", what, e)

        task = self.loop.create_task(run())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ------------------------------------------------------------ alarms

    def _alarm_changed(self, active: bool) -> None:
        if self.alarm_gossip is not None:
            self.alarm_gossip.local_changed()
        self.block_publishers(active)

