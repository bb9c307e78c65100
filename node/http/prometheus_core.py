"""The families of RabbitMQ's core metrics collector that have a meaning in
Warren, by RabbitMQ's group name (the `family` of `/metrics/detailed`): each
group is a function of the node, the name prefix ("rabbitmq_" on `/metrics`,
"rabbitmq_detailed_" on `/metrics/detailed`) and the Scope of objects asked for.

Left out, for want of a meaning in Warren (docs/compatibility.md): Erlang's
process, scheduler and garbage-collector gauges, the persister's I/O
counters, the per-process reductions, the
per-channel and per-exchange families (Warren keeps no per-channel or
per-exchange counters), per-connection packet counts, and the per-queue
delivery counters.
"""

from __future__ import annotations

import resource
import shutil
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import psutil
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from node.client.auth_attempts import Counts
from node.http.prometheus_global import QUEUE_TYPES
from node.http.prometheus_raft import queue_role
from node.http.prometheus_scope import Scope
from raft.status import Role

if TYPE_CHECKING:
    from node.http.management_node import ScrapedNode
    from queues.base import Queue


Group = Callable[["ScrapedNode", str, Scope], Iterator[Metric]]

_process = psutil.Process()


def connection_churn(node: ScrapedNode, prefix: str, _scope: Scope) -> Iterator[Metric]:
    m = node.metrics
    # Every accepted connection, and every session begun, is either still open or closed.
    sessions = sum(len(c.engine.sessions) for c in node.connections)
    for name, doc, value in (
        ("connections_opened", "Total number of connections opened", m.connections_opened),
        ("connections_closed", "Total number of connections closed or terminated",
         m.connections_opened - len(node.connections)),
        ("channels_opened", "Total number of channels opened (AMQP 1.0 sessions)", m.sessions_opened),
        ("channels_closed", "Total number of channels closed (AMQP 1.0 sessions)", m.sessions_opened - sessions),
        ("queues_declared", "Total number of queues declared", m.queues_declared),
        ("queues_created", "Total number of queues created", m.queues_created),
        ("queues_deleted", "Total number of queues deleted", m.queues_deleted),
    ):  # fmt: skip
        yield CounterMetricFamily(prefix + name, doc, max(0, value))


def _summed(node: ScrapedNode, resource: str, own: Callable[[], float]) -> float:
    """The node's figure: this process's, or on a node of several workers every worker's summed
    (node/workers/scrape.py)."""
    total = getattr(node, "total", None)
    return total(resource) if total is not None else own()


def node_coarse(node: ScrapedNode, prefix: str, _scope: Scope) -> Iterator[Metric]:
    yield GaugeMetricFamily(prefix + "process_open_fds", "Open file descriptors",
                            _summed(node, "fds", _process.num_fds))  # fmt: skip
    yield GaugeMetricFamily(prefix + "process_resident_memory_bytes", "Memory used in bytes",
                            _summed(node, "rss", lambda: _process.memory_info().rss))  # fmt: skip
    yield GaugeMetricFamily(prefix + "disk_space_available_bytes", "Disk space available in bytes",
                            shutil.disk_usage(node.config.data_dir).free)  # fmt: skip


def node_limits(node: ScrapedNode, prefix: str, _scope: Scope) -> Iterator[Metric]:
    alarms = node.alarms
    yield GaugeMetricFamily(prefix + "process_max_fds", "Open file descriptors limit",
                            resource.getrlimit(resource.RLIMIT_NOFILE)[0])  # fmt: skip
    yield GaugeMetricFamily(prefix + "resident_memory_limit_bytes", "Memory high watermark in bytes",
                            _summed(node, "memory_limit", lambda: alarms.memory_limit))  # fmt: skip
    yield GaugeMetricFamily(prefix + "disk_space_available_limit_bytes", "Free disk space low watermark in bytes",
                            alarms.disk_free_limit)  # fmt: skip
    # RabbitMQ's name for the node's uptime (the runtime's, there: the node's, here)
    yield GaugeMetricFamily(prefix + "erlang_uptime_seconds", "Node uptime", time.monotonic() - node.started_at)


def auth_attempts(node: ScrapedNode, prefix: str, _scope: Scope) -> Iterator[Metric]:
    """Logins over AMQP ("amqp10") and the management API ("http": every request
    authenticates, as RabbitMQ's counts them), by verdict."""
    by_protocol = node.logins.attempts.by_protocol
    protocols = sorted(set(by_protocol) | {"amqp10", "http"})
    for family in _attempt_families(prefix + "auth_attempts", ["protocol"]):
        for protocol in protocols:
            family.add_metric([protocol], family.count(by_protocol.get(protocol, Counts())))
        yield family


def auth_attempts_detailed(node: ScrapedNode, prefix: str, _scope: Scope) -> Iterator[Metric]:
    """By remote address, user name and protocol: only with
    track_auth_attempt_source, per object only (node/client/auth_attempts.py)."""
    by_source = node.logins.attempts.by_source
    for family in _attempt_families(prefix + "auth_attempts_detailed", ["remote_address", "username", "protocol"]):
        for key, counts in by_source.items():
            family.add_metric(list(key), family.count(counts))
        yield family


class _AttemptFamily(CounterMetricFamily):
    def __init__(self, name: str, doc: str, labels: list[str], count: Callable[[Counts], int]):
        super().__init__(name, doc, labels=labels)
        self.count = count


def _attempt_families(name: str, labels: list[str]) -> list[_AttemptFamily]:
    return [
        _AttemptFamily(name, "Total number of authentication attempts", labels, lambda c: c.total),
        _AttemptFamily(name + "_succeeded", "Total number of successful authentication attempts", labels,
                       lambda c: c.succeeded),
        _AttemptFamily(name + "_failed", "Total number of failed authentication attempts", labels, lambda c: c.failed),
    ]  # fmt: skip


def _queues(node: ScrapedNode, scope: Scope) -> Iterator[tuple[list[str], Queue]]:
    for vhost in node.vhosts.values():
        for name, queue in vhost.queues.items():
            if scope.has_queue(vhost.name, name):
                yield [vhost.name, name], queue


def queue_coarse(node: ScrapedNode, prefix: str, scope: Scope) -> Iterator[Metric]:
    labels = ["vhost", "queue"]
    ready = GaugeMetricFamily(prefix + "queue_messages_ready", "Messages ready to be delivered to consumers",
                              labels=labels)  # fmt: skip
    unacked = GaugeMetricFamily(prefix + "queue_messages_unacked",
                                "Messages delivered to consumers but not yet acknowledged", labels=labels)  # fmt: skip
    total = GaugeMetricFamily(prefix + "queue_messages", "Sum of ready and unacknowledged messages - total queue "
                              "depth", labels=labels)  # fmt: skip
    for key, queue in _queues(node, scope):
        n_ready, n_unacked = queue.message_count, queue.unacked_count
        ready.add_metric(key, n_ready)
        unacked.add_metric(key, n_unacked)
        total.add_metric(key, n_ready + n_unacked)
    yield from (ready, unacked, total)


def queue_consumer_count(node: ScrapedNode, prefix: str, scope: Scope) -> Iterator[Metric]:
    consumers = GaugeMetricFamily(prefix + "queue_consumers", "Consumers on a queue", labels=["vhost", "queue"])
    for key, queue in _queues(node, scope):
        consumers.add_metric(key, queue.consumer_count)
    yield consumers


def queue_metrics(node: ScrapedNode, prefix: str, scope: Scope) -> Iterator[Metric]:
    yield from queue_consumer_count(node, prefix, scope)
    ready_bytes = GaugeMetricFamily(prefix + "queue_messages_ready_bytes", "Size in bytes of ready messages",
                                    labels=["vhost", "queue"])  # fmt: skip
    for key, queue in _queues(node, scope):
        ready_bytes.add_metric(key, queue.ready_bytes)
    yield ready_bytes


def queue_info(node: ScrapedNode, prefix: str, scope: Scope) -> Iterator[Metric]:
    """One series per queue this node hosts, as leader or replica (RabbitMQ's
    `membership`); a queue another node hosts alone is not this node's."""
    info = GaugeMetricFamily(prefix + "queue_info",
                             "A metric with a constant '1' value and labels that provide some queue details",
                             labels=["vhost", "queue", "queue_type", "membership"])  # fmt: skip
    for key, queue in _queues(node, scope):
        role = queue_role(node.cluster, key[0], queue)
        if role is not None:
            membership = "leader" if role is Role.LEADER else "follower"
            info.add_metric([*key, QUEUE_TYPES.get(queue.type_name, queue.type_name), membership], 1)
    yield info


def vhost_status(node: ScrapedNode, prefix: str, scope: Scope) -> Iterator[Metric]:
    status = GaugeMetricFamily(prefix + "vhost_status", "Whether a given vhost is running", labels=["vhost"])
    for name in node.vhosts:
        if scope.has_vhost(name):
            status.add_metric([name], 1)
    yield status


def exchange_bindings(node: ScrapedNode, prefix: str, scope: Scope) -> Iterator[Metric]:
    labels = ["vhost", "exchange", "type"]
    bindings = GaugeMetricFamily(
        prefix + "exchange_bindings", "Number of bindings for an exchange. This value is cluster-wide.", labels=labels
    )
    for vhost, exchange, kind, count in _exchanges(node, scope):
        bindings.add_metric([vhost, exchange, kind], count)
    yield bindings


def exchange_names(node: ScrapedNode, prefix: str, scope: Scope) -> Iterator[Metric]:
    names = GaugeMetricFamily(prefix + "exchange_name", "Enumerates exchanges without any additional info. This "
                              "value is cluster-wide.", labels=["vhost", "exchange", "type"])  # fmt: skip
    for vhost, exchange, kind, _ in _exchanges(node, scope):
        names.add_metric([vhost, exchange, kind], 1)
    yield names


def _exchanges(node: ScrapedNode, scope: Scope) -> Iterator[tuple[str, str, str, int]]:
    for vhost in node.vhosts.values():
        if not scope.has_vhost(vhost.name):
            continue
        table = vhost.routing
        for exchange in table.exchanges():
            yield vhost.name, exchange.name, exchange.type.value, len(table.list_bindings(source=exchange.name))


# RabbitMQ's METRICS_RAW groups Warren has, in its order
RAW_GROUPS: dict[str, Group] = {
    "connection_churn_metrics": connection_churn,
    "node_coarse_metrics": node_coarse,
    "node_metrics": node_limits,
    "auth_attempt_metrics": auth_attempts,
    "auth_attempt_detailed_metrics": auth_attempts_detailed,
    "queue_coarse_metrics": queue_coarse,
    "queue_consumer_count": queue_consumer_count,
    "queue_metrics": queue_metrics,
}
# those only `/metrics/detailed` has, with the prefix "rabbitmq_cluster_"
CLUSTER_GROUPS: dict[str, Group] = {
    "vhost_status": vhost_status,
    "exchange_bindings": exchange_bindings,
    "exchange_names": exchange_names,
}
QUEUE_GROUPS = ("queue_coarse_metrics", "queue_consumer_count", "queue_metrics")  # with queue_info


def raw_groups(names: list[str]) -> Iterator[Group]:
    """The groups named, in RabbitMQ's order; queue_consumer_count only without
    queue_metrics, which holds it."""
    for name, group in RAW_GROUPS.items():
        if name in names and not (name == "queue_consumer_count" and "queue_metrics" in names):
            yield group
