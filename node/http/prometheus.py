"""Prometheus exposition on `config.metrics_port` (`/metrics`), with the
metric names and labels of RabbitMQ 4's rabbitmq_prometheus plugin, so its
dashboards and alerts work unchanged.

Nothing is recorded per message for this: a custom collector reads the
node's counters (node/ops/metrics.py), its connections and its queues when
Prometheus scrapes, on the node's event loop (aiohttp, like the management
API), so the reads never race the message path. `/metrics` carries the
per-queue series too (RabbitMQ keeps them for `/metrics/per-object`, which
is served as the same page).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import TYPE_CHECKING

import psutil
from aiohttp import web
from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder

from node import __version__
from node.http.formats import cluster_name
from node.http.prometheus_raft import raft_families
from node.ops.metrics import DEAD_LETTER_REASONS

if TYPE_CHECKING:
    from node.http.management_node import ScrapedNode

PROTOCOL = "amqp10"
# RabbitMQ's queue_type label: the module behind each queue type. Every type
# is reported, zero or not, so a dashboard's series exist from the start.
QUEUE_TYPES = {"classic": "rabbit_classic_queue", "quorum": "rabbit_quorum_queue",
               "volatile": "rabbit_volatile_queue"}  # fmt: skip
# Which dead-letter strategies each type has: "disabled" counts the messages
# dropped for want of a dead-letter exchange (a volatile queue's: the replies
# dropped for want of the requester's credit).
DEAD_LETTER_STRATEGIES = {"classic": ("disabled", "at_most_once"),
                          "quorum": ("disabled", "at_most_once", "at_least_once"),
                          "volatile": ("disabled",)}  # fmt: skip
_DEAD_LETTER_HELP = {
    "expired": "message TTL exceeded",
    "rejected": "basic.reject / basic.nack or the rejected / modified outcome",
    "maxlen": "queue length limit (x-max-length, x-max-length-bytes)",
    "delivery_limit": "delivery-limit exceeded",
}


class NodeCollector:
    """Reads the node's state at scrape time."""

    def __init__(self, node: ScrapedNode):
        self.node = node
        self._process = psutil.Process()

    def collect(self) -> Iterator[Metric]:
        yield from self._identity()
        yield from self._objects()
        yield from self._global_counters()
        yield from self._queues()
        yield from self._resources()
        yield from raft_families(self.node.cluster, self.node.vhosts)

    def _identity(self) -> Iterator[Metric]:
        cfg = self.node.config
        identity = GaugeMetricFamily("rabbitmq_identity_info", "RabbitMQ node & cluster identity info",
                                     labels=["rabbitmq_node", "rabbitmq_cluster"])  # fmt: skip
        identity.add_metric([cfg.node_name, cluster_name(self.node)], 1)
        yield identity
        build = GaugeMetricFamily("rabbitmq_build_info", "RabbitMQ & Erlang/OTP version info",
                                  labels=["rabbitmq_version", "product_name", "product_version"])  # fmt: skip
        build.add_metric([cfg.product_version, "Warren", __version__], 1)
        yield build

    def _objects(self) -> Iterator[Metric]:
        node = self.node
        connections = [c for c in node.connections if c.vhost is not None]
        queues = [q for v in node.vhosts.values() for q in v.queues.values()]
        yield GaugeMetricFamily("rabbitmq_connections", "Connections currently open", len(connections))
        yield GaugeMetricFamily("rabbitmq_channels", "Channels currently open (AMQP 1.0 sessions)",
                                sum(len(c.engine.sessions) for c in connections))  # fmt: skip
        yield GaugeMetricFamily("rabbitmq_consumers", "Consumers currently connected",
                                sum(q.consumer_count for q in queues))  # fmt: skip
        yield GaugeMetricFamily("rabbitmq_queues", "Queues available", len(queues))
        opened = node.metrics.connections_opened
        yield CounterMetricFamily("rabbitmq_connections_opened", "Total number of connections opened", opened)
        # Every accepted connection is either still in the set or closed.
        yield CounterMetricFamily("rabbitmq_connections_closed", "Total number of connections closed or terminated",
                                  opened - len(node.connections))  # fmt: skip

    def _global_counters(self) -> Iterator[Metric]:
        m = self.node.metrics
        for name, doc, value in (
            ("received", "Total number of messages received from publishers", m.published),
            ("routed", "Total number of messages routed to queues or streams", m.routed),
            ("unroutable_dropped", "Total number of messages published as non-mandatory into an exchange and "
             "dropped as unroutable", m.unroutable),
            ("confirmed", "Total number of messages confirmed to publishers", m.confirmed),
        ):  # fmt: skip
            family = CounterMetricFamily(f"rabbitmq_global_messages_{name}", doc, labels=["protocol"])
            family.add_metric([PROTOCOL], value)
            yield family
        for name, doc, by_type in (
            ("delivered", "Total number of messages delivered to consumers", m.delivered_by_type),
            ("redelivered", "Total number of messages redelivered to consumers", m.redelivered_by_type),
            ("acknowledged", "Total number of messages acknowledged by consumers", m.acknowledged_by_type),
        ):
            family = CounterMetricFamily(f"rabbitmq_global_messages_{name}", doc, labels=["protocol", "queue_type"])
            for kind, label in QUEUE_TYPES.items():
                family.add_metric([PROTOCOL, label], by_type.get(kind, 0))
            yield family
        for reason in DEAD_LETTER_REASONS:
            family = CounterMetricFamily(f"rabbitmq_global_messages_dead_lettered_{reason}",
                                         f"Total number of messages dead-lettered due to {_DEAD_LETTER_HELP[reason]}",
                                         labels=["queue_type", "dead_letter_strategy"])  # fmt: skip
            for kind, label in QUEUE_TYPES.items():
                for strategy in DEAD_LETTER_STRATEGIES[kind]:
                    family.add_metric([label, strategy], m.dead_lettered_by.get((kind, strategy, reason), 0))
            yield family

    def _queues(self) -> Iterator[Metric]:
        labels = ["vhost", "queue"]
        ready = GaugeMetricFamily("rabbitmq_queue_messages_ready", "Messages ready to be delivered to consumers",
                                  labels=labels)  # fmt: skip
        unacked = GaugeMetricFamily(
            "rabbitmq_queue_messages_unacked", "Messages delivered to consumers but not yet acknowledged", labels=labels
        )
        total = GaugeMetricFamily("rabbitmq_queue_messages", "Sum of ready and unacknowledged messages - total queue "
                                  "depth", labels=labels)  # fmt: skip
        ready_bytes = GaugeMetricFamily("rabbitmq_queue_messages_ready_bytes", "Size in bytes of ready messages",
                                        labels=labels)  # fmt: skip
        consumers = GaugeMetricFamily("rabbitmq_queue_consumers", "Consumers on a queue", labels=labels)
        for vhost in self.node.vhosts.values():
            for name, queue in vhost.queues.items():
                key = [vhost.name, name]
                n_ready, n_unacked = queue.message_count, queue.unacked_count
                ready.add_metric(key, n_ready)
                unacked.add_metric(key, n_unacked)
                total.add_metric(key, n_ready + n_unacked)
                ready_bytes.add_metric(key, queue.ready_bytes)
                consumers.add_metric(key, queue.consumer_count)
        yield from (ready, unacked, total, ready_bytes, consumers)

    def _resources(self) -> Iterator[Metric]:
        alarms = self.node.alarms
        yield GaugeMetricFamily("rabbitmq_alarms_memory_used_watermark",
                                "is set to 1 when the memory alarm is in effect",
                                int(alarms.memory or "memory" in alarms.forced))  # fmt: skip
        yield GaugeMetricFamily("rabbitmq_alarms_free_disk_space_watermark",
                                "is set to 1 when the free disk space alarm is in effect",
                                int(alarms.disk or "disk" in alarms.forced))  # fmt: skip
        yield GaugeMetricFamily("rabbitmq_alarms_file_descriptor_limit",
                                "is set to 1 when the file descriptor limit alarm is in effect", 0)  # fmt: skip
        yield GaugeMetricFamily("rabbitmq_process_resident_memory_bytes", "Memory used in bytes",
                                self._process.memory_info().rss)  # fmt: skip
        yield GaugeMetricFamily("warren_memory_used_bytes",
                                "Memory the node holds, as the memory alarm counts it against "
                                "rabbitmq_resident_memory_limit_bytes (mem_used in /api/nodes)",
                                alarms.memory_used)  # fmt: skip
        yield GaugeMetricFamily("rabbitmq_resident_memory_limit_bytes",
                                "Memory high watermark in bytes", alarms.memory_limit)  # fmt: skip
        yield GaugeMetricFamily("rabbitmq_disk_space_available_bytes", "Disk space available in bytes",
                                shutil.disk_usage(self.node.config.data_dir).free)  # fmt: skip
        yield GaugeMetricFamily("rabbitmq_disk_space_available_limit_bytes",
                                "Free disk space low watermark in bytes", alarms.disk_free_limit)  # fmt: skip


def application(node: ScrapedNode) -> web.Application:
    registry = CollectorRegistry()
    registry.register(NodeCollector(node))

    async def metrics(request: web.Request) -> web.Response:
        encode, content_type = choose_encoder(request.headers.get("Accept", ""))
        return web.Response(body=encode(registry), headers={"Content-Type": content_type})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/metrics/per-object", metrics)
    return app
