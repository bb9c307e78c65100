"""The node: listeners, vhosts, durable storage, alarms, and their lifecycle."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from typing import Any

from node import prometheus
from node.alarms import Alarms
from node.amqp.errors import Condition
from node.auth import Authenticator
from node.cluster import Cluster
from node.cluster_machine import ClusterMachine, announce_member, local_flags
from node.config import Config
from node.connection_handler import ConnectionHandler, server_properties
from node.definitions import DefinitionsFile
from node.http_api import ManagementAPI, start_site
from node.http_format import DEFAULT_VHOST_DESCRIPTION
from node.metrics import NodeMetrics
from node.vhost import VHost
from queues.classic import MemoryPersistence, StorePersistence
from queues.group_commit import GroupCommitter
from queues.store import MessageStore

log = logging.getLogger("warren.node")


class Broker:
    def __init__(self, config: Config):
        self.config = config
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]
        self.connections: set[ConnectionHandler] = set()
        self.vhosts: dict[str, VHost] = {}
        self.metrics = NodeMetrics()
        self.auth = Authenticator(config.anonymous_user, config.loopback_users)
        self.auth.add_user(config.default_user, config.default_password, ["administrator"])
        self.auth.set_permissions(config.default_user, "/", ".*", ".*", ".*")
        self._server: asyncio.base_events.Server | None = None
        self._alarm_timer: asyncio.TimerHandle | None = None
        self.store: MessageStore | None = None
        self.committer: GroupCommitter | None = None
        self.amqp_port = config.amqp_port
        # The ports actually bound (config port 0 picks a free one); None
        # while not listening or when the config disables it (port < 0).
        self.http_port: int | None = None
        self.metrics_port: int | None = None
        self.started_at = time.time()
        self.management = ManagementAPI(self)
        self._http_runner: Any = None
        self._metrics_runner: Any = None
        # The Raft side of the node (node/cluster.py); None when grpc_port < 0.
        self.cluster: Cluster | None = None
        self.cluster_machine: ClusterMachine | None = None
        self.feature_flags = local_flags(config.enable_test_faults)  # what this node supports
        self._announcer: asyncio.Task | None = None

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        cfg = self.config
        os.makedirs(cfg.data_dir, exist_ok=True)
        self.store = MessageStore(os.path.join(cfg.data_dir, "messages"))
        self.committer = GroupCommitter(self.store, self.loop)
        self.persistence = StorePersistence(self.store, self.committer)
        self.transient_persistence = MemoryPersistence()
        self.alarms = Alarms(cfg.data_dir, cfg.memory_high_watermark, cfg.disk_free_limit, self._alarm_changed)
        self.ensure_vhost("/").description = DEFAULT_VHOST_DESCRIPTION
        self.definitions = DefinitionsFile(os.path.join(cfg.data_dir, "definitions.json"), self)
        self.definitions.load()
        if cfg.definitions_file:
            self.definitions.load(cfg.definitions_file)
        self._recover_messages()
        self._check_alarms()
        try:
            if cfg.grpc_port >= 0:
                # the metadata machine and the key-value probe, side by side (node/cluster_machine.py)
                self.cluster_machine = ClusterMachine()
                self.cluster = Cluster.from_config(cfg, self.cluster_machine)
                await self.cluster.start()
                self._announcer = self.loop.create_task(
                    announce_member(self.cluster, self.cluster_machine, self.feature_flags))
            # management first: once the AMQP port accepts, the whole node is up
            await self._start_http()
            self._server = await self.loop.create_server(
                lambda: ConnectionHandler(self), cfg.listen_host, cfg.amqp_port, reuse_address=True, backlog=1024
            )
        except BaseException:
            await self.stop()
            raise
        self.amqp_port = self._server.sockets[0].getsockname()[1]
        self.started_at = time.time()
        log.info("node=%s listening amqp=%s:%d http=%s metrics=%s cluster=%s data_dir=%s", cfg.node_name,
                 cfg.listen_host, self.amqp_port, self.http_port, self.metrics_port,
                 self.cluster.node_id if self.cluster else "off", os.path.abspath(cfg.data_dir))  # fmt: skip

    async def _start_http(self) -> None:
        """The management API and the Prometheus endpoint, on this loop."""
        cfg = self.config
        if cfg.http_port >= 0:
            self._http_runner, self.http_port = await start_site(self.management.application(), cfg.listen_host,
                                                                 cfg.http_port)  # fmt: skip
            self.management.start_sampling()
        if cfg.metrics_port >= 0:
            self._metrics_runner, self.metrics_port = await start_site(prometheus.application(self),
                                                                       cfg.listen_host, cfg.metrics_port)  # fmt: skip

    async def stop(self) -> None:
        if self._alarm_timer is not None:
            self._alarm_timer.cancel()
        self.management.stop_sampling()
        for runner in (self._http_runner, self._metrics_runner):
            if runner is not None:
                await runner.cleanup()
        self._http_runner = self._metrics_runner = None
        self.http_port = self.metrics_port = None
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.force_close(Condition.CONNECTION_FORCED, "broker shutdown")
        await asyncio.sleep(0)  # let the transports write their CLOSE frames
        if self._announcer is not None:
            self._announcer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._announcer
            self._announcer = None
        if self.cluster is not None:
            await self.cluster.stop()
        if self.committer is not None:
            await self.committer.close()
        if self.store is not None:
            self.store.close()
        log.info("node=%s stopped", self.config.node_name)

    def _recover_messages(self) -> None:
        recovered = self.store.recover()
        for vhost in self.vhosts.values():
            for queue in vhost.queues.values():
                records = recovered.pop(queue.store_key, None)
                if records:
                    queue.recover(records)
        for orphan in recovered:  # messages of queues that no longer exist
            self.store.delete_queue(orphan)

    # ------------------------------------------------------------ services for vhosts and links

    def ensure_vhost(self, name: str) -> VHost:
        vhost = self.vhosts.get(name)
        if vhost is None:
            vhost = self.vhosts[name] = VHost(name, self)
        return vhost

    def delete_vhost(self, name: str) -> bool:
        """Deletes a vhost with everything in it; its clients are disconnected."""
        vhost = self.vhosts.pop(name, None)
        if vhost is None:
            return False
        for conn in list(self.connections):
            if conn.vhost is vhost:
                conn.force_close(Condition.CONNECTION_FORCED, f"vhost '{name}' is deleted")
        for queue_name in list(vhost.queues):
            vhost.delete_queue(queue_name)
        self.auth.vhost_deleted(name)
        self.definitions.save()
        return True

    def make_queue(self, cls: type, vhost: VHost, name: str, durable: bool, exclusive_owner: Any,
                   auto_delete: bool, arguments: dict) -> Any:  # fmt: skip
        persistence = self.persistence if durable else self.transient_persistence
        return cls(vhost.name, name, durable, exclusive_owner, auto_delete, arguments, host=vhost,
                   persistence=persistence)  # fmt: skip

    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def server_properties(self) -> dict:
        return server_properties(self.config)

    # ------------------------------------------------------------ alarms

    def _check_alarms(self) -> None:
        self.alarms.check()
        self._alarm_timer = self.loop.call_later(self.config.alarm_check_interval, self._check_alarms)

    def _alarm_changed(self, active: bool) -> None:
        for conn in list(self.connections):
            conn.block() if active else conn.unblock()
