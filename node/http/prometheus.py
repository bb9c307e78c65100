"""Prometheus exposition on `config.metrics_port`, with the endpoints, metric
names, types and labels of RabbitMQ 4's rabbitmq_prometheus plugin, so its
dashboards and alerts work unchanged:

- `/metrics`: every family aggregated, without per-object labels
  (node/http/prometheus_aggregate.py), as RabbitMQ's default; per object
  with `config.prometheus_return_per_object_metrics` (RabbitMQ's
  prometheus.return_per_object_metrics).
- `/metrics/per-object`: every family, per object. rabbitmq_identity_info
  says which endpoint served a page in `rabbitmq_endpoint` ("aggregated",
  "per-object", "detailed", "memory-breakdown"), as the dashboards'
  endpoint variable reads it.
- `/metrics/detailed?family=...&vhost=...&queue=...`: the families of the
  groups asked for (node/http/prometheus_core.py), named rabbitmq_detailed_*
  (those of the cluster-wide groups rabbitmq_cluster_*), for the vhosts and
  the queues (a regular expression their names match) asked for.
- `/metrics/memory-breakdown`: node/http/prometheus_memory.py.

Nothing is recorded per message for this: the pages read the node's
counters (node/ops/metrics.py), its connections and its queues when
Prometheus scrapes, on the node's event loop (aiohttp, like the management
API), so the reads never race the message path.
"""

from __future__ import annotations

import platform
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric, UnknownMetricFamily
from prometheus_client.exposition import choose_encoder

from node import __version__
from node.http.formats import cluster_name
from node.http.prometheus_aggregate import aggregated
from node.http.prometheus_core import CLUSTER_GROUPS, QUEUE_GROUPS, RAW_GROUPS, queue_info, raw_groups
from node.http.prometheus_global import global_families
from node.http.prometheus_memory import memory_families
from node.http.prometheus_raft import raft_families
from node.http.prometheus_scope import EVERYTHING, Scope
from node.workers.scrape import scraped

if TYPE_CHECKING:
    from multidict import MultiMapping

    from node.http.management_node import ScrapedNode

PREFIX, DETAILED_PREFIX, CLUSTER_PREFIX = "rabbitmq_", "rabbitmq_detailed_", "rabbitmq_cluster_"
PER_OBJECT = "per-object"  # the rabbitmq_endpoint of /metrics/per-object (and /metrics, per object)
AGGREGATED = "aggregated"  # that of /metrics, aggregated
MAX_QUEUE_PATTERN = 2000  # characters of `/metrics/detailed?queue=`, as RabbitMQ's limit


def identity(node: ScrapedNode, endpoint: str) -> Iterator[Metric]:
    """rabbitmq_build_info and rabbitmq_identity_info, untyped as RabbitMQ's.
    `rabbitmq_cluster_permanent_id`: the global parameter internal_cluster_id,
    set once when the cluster is set up (node/vhosts/metadata_ready.py) and
    carried by a definitions import, as RabbitMQ's."""
    cfg = node.config
    build = UnknownMetricFamily(
        "rabbitmq_build_info",
        "RabbitMQ & Erlang/OTP version info",
        labels=["rabbitmq_version", "erlang_version", "product_name", "product_version"],
    )
    # the runtime's version: Python's, where RabbitMQ's is Erlang/OTP's
    build.add_metric([cfg.product_version, platform.python_version(), "Warren", __version__], 1)
    yield build
    identity = UnknownMetricFamily("rabbitmq_identity_info", "RabbitMQ node & cluster identity info",
                                   labels=["rabbitmq_node", "rabbitmq_cluster", "rabbitmq_cluster_permanent_id",
                                           "rabbitmq_endpoint"])  # fmt: skip
    permanent_id = node.projections.global_parameters.get("internal_cluster_id", "")
    identity.add_metric([cfg.node_name, cluster_name(node), permanent_id, endpoint], 1)
    yield identity


def per_object(node: ScrapedNode) -> Iterator[Metric]:
    yield from identity(node, PER_OBJECT)
    yield from _families(node)


def metrics(node: ScrapedNode) -> Iterator[Metric]:
    """`/metrics`: per object, or aggregated (RabbitMQ's default)."""
    if node.config.prometheus_return_per_object_metrics:
        yield from per_object(node)
    else:
        yield from identity(node, AGGREGATED)
        yield from aggregated(_families(node), PREFIX)


def _families(node: ScrapedNode) -> Iterator[Metric]:
    yield from _totals(node)
    for group in raw_groups(list(RAW_GROUPS)):
        yield from group(node, PREFIX, EVERYTHING)
    yield from queue_info(node, PREFIX, EVERYTHING)
    yield from global_families(node)
    yield from _alarms(node)
    yield from _shovels(node)
    yield from raft_families(node.cluster, node.vhosts)


def detailed(node: ScrapedNode, families: list[str], scope: Scope) -> Iterator[Metric]:
    yield from identity(node, "detailed")
    for group in raw_groups(families):
        yield from group(node, DETAILED_PREFIX, scope)
    for name, group in CLUSTER_GROUPS.items():
        if name in families:
            yield from group(node, CLUSTER_PREFIX, scope)
    if any(name in families for name in QUEUE_GROUPS):
        yield from queue_info(node, DETAILED_PREFIX, scope)
    if "ra_metrics" in families:
        yield from raft_families(node.cluster, node.vhosts, DETAILED_PREFIX, scope)


def detailed_scope(node: ScrapedNode, query: MultiMapping[str]) -> Scope:
    """The vhosts (those that exist) and the queue name pattern a query names, as
    RabbitMQ reads them; ValueError for a pattern it would refuse."""
    vhosts = query.getall("vhost", [])
    patterns = [p for p in query.getall("queue", []) if p]
    if len(patterns) > 1:
        raise ValueError("Only one 'queue' query parameter is allowed")
    pattern = None
    if patterns:
        if len(patterns[0]) > MAX_QUEUE_PATTERN:
            raise ValueError("'queue' regex too long")
        try:
            pattern = re.compile(patterns[0])
        except re.error as e:
            raise ValueError(f"Invalid 'queue' regex at position {e.pos}: {e.msg}") from None
    return Scope(frozenset(v for v in vhosts if v in node.vhosts) if vhosts else None, pattern)


def memory_breakdown(node: ScrapedNode) -> Iterator[Metric]:
    yield from identity(node, "memory-breakdown")
    yield from memory_families(node)


def _totals(node: ScrapedNode) -> Iterator[Metric]:
    connections = [c for c in node.connections if c.vhost is not None]
    queues = [q for v in node.vhosts.values() for q in v.queues.values()]
    yield GaugeMetricFamily("rabbitmq_connections", "Connections currently open", len(connections))
    yield GaugeMetricFamily("rabbitmq_channels", "Channels currently open (AMQP 1.0 sessions)",
                            sum(len(c.engine.sessions) for c in connections))  # fmt: skip
    yield GaugeMetricFamily("rabbitmq_consumers", "Consumers currently connected",
                            sum(q.consumer_count for q in queues))  # fmt: skip
    yield GaugeMetricFamily("rabbitmq_queues", "Queues available", len(queues))
    per_worker = getattr(node, "worker_connections", None)  # a node of several workers (node/workers/scrape.py)
    if per_worker is not None:
        family = GaugeMetricFamily("warren_worker_connections", "Connections open on each worker process of the "
                                   "node (`warren server --workers`)", labels=["worker"])  # fmt: skip
        for worker, count in sorted(per_worker.items()):
            family.add_metric([str(worker)], count)
        yield family
        memory = GaugeMetricFamily("warren_worker_resident_memory_bytes", "Resident memory of each worker process "
                                   "of the node", labels=["worker"])  # fmt: skip
        cpu = CounterMetricFamily("warren_worker_cpu_seconds", "CPU time (user and system) of each worker process "
                                  "of the node", labels=["worker"])  # fmt: skip
        for worker, used in sorted(node.worker_resources.items()):
            memory.add_metric([str(worker)], used["rss"])
            cpu.add_metric([str(worker)], used["cpu"])
        yield memory
        yield cpu
        yield GaugeMetricFamily("warren_workers_lost", "Worker processes that kept exiting and stay down until the "
                                "node restarts, their queues moved to the others", node.workers_lost)  # fmt: skip


def _alarms(node: ScrapedNode) -> Iterator[Metric]:
    alarms = node.alarms
    yield GaugeMetricFamily("rabbitmq_alarms_memory_used_watermark",
                            "is set to 1 when the memory alarm is in effect",
                            int(alarms.raised("memory")))  # fmt: skip
    yield GaugeMetricFamily("rabbitmq_alarms_free_disk_space_watermark",
                            "is set to 1 when the free disk space alarm is in effect",
                            int(alarms.raised("disk")))  # fmt: skip
    yield GaugeMetricFamily("rabbitmq_alarms_file_descriptor_limit",
                            "is set to 1 when the file descriptor limit alarm is in effect", 0)  # fmt: skip
    yield GaugeMetricFamily("warren_memory_used_bytes",
                            "Memory the node holds, as the memory alarm counts it against "
                            "rabbitmq_resident_memory_limit_bytes (mem_used in /api/nodes)",
                            alarms.memory_used)  # fmt: skip


def _shovels(node: ScrapedNode) -> Iterator[Metric]:
    """RabbitMQ's rabbitmq_shovel_dynamic: the dynamic shovels this node runs, by state."""
    family = GaugeMetricFamily("rabbitmq_shovel_dynamic", "Number of dynamic shovels", labels=["status"])
    rows = node.shovels.local_status() if node.shovels is not None else []
    for state in ("running", "starting", "terminated"):
        family.add_metric([state], sum(1 for r in rows if r["state"] == state))
    yield family


class _Page:
    """What the encoder reads: the families of one request."""

    def __init__(self, families: Callable[[], Iterator[Metric]]):
        self.collect = families


def application(node: ScrapedNode) -> web.Application:
    def respond(request: web.Request, families: Callable[[], Iterator[Metric]]) -> web.Response:
        encode, content_type = choose_encoder(request.headers.get("Accept", ""))
        return web.Response(body=encode(_Page(families)), headers={"Content-Type": content_type})

    async def metrics_page(request: web.Request) -> web.Response:
        view = await scraped(node)
        return respond(request, lambda: metrics(view))

    async def per_object_page(request: web.Request) -> web.Response:
        view = await scraped(node)
        return respond(request, lambda: per_object(view))

    async def detailed_page(request: web.Request) -> web.Response:
        try:
            scope = detailed_scope(node, request.query)
        except ValueError as e:
            return web.Response(status=400, text=str(e))
        families = request.query.getall("family", [])
        view = await scraped(node)
        return respond(request, lambda: detailed(view, families, scope))

    async def memory(request: web.Request) -> web.Response:
        return respond(request, lambda: memory_breakdown(node))

    app = web.Application()
    app.router.add_get("/metrics", metrics_page)
    app.router.add_get("/metrics/per-object", per_object_page)
    app.router.add_get("/metrics/detailed", detailed_page)
    app.router.add_get("/metrics/memory-breakdown", memory)
    return app
