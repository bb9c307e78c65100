"""The Raft families of the Prometheus endpoint (node/http/prometheus.py):
one series per Raft group this node is a member of, the metadata group and
each quorum queue's, read from the group's typed status (raft/status.py) at
scrape time, on the node's loop that ticks the groups.

RabbitMQ's names (its `ra_metrics` group): rabbitmq_raft_term_total,
rabbitmq_raft_log_commit_index, rabbitmq_raft_log_last_applied_index,
rabbitmq_raft_log_last_written_index, rabbitmq_raft_log_snapshot_index,
labelled by `vhost` and `queue` for a quorum queue. Ours besides, for what
Ra reports elsewhere: rabbitmq_raft_log_entries (the log's length since its
last compaction), rabbitmq_raft_leader (1 where this node leads the group)
and rabbitmq_raft_members. Every series also names its group in
`raft_cluster` ("metadata", or the queue's "qq.<digest>"), the metadata
group having empty `vhost` and `queue`. Not exposed:
rabbitmq_raft_entry_commit_latency_seconds, which pysyncobj does not measure.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from node.vhosts.quorum_groups import group_name
from raft.status import GroupStatus, Role

if TYPE_CHECKING:
    from node.cluster.cluster import Cluster
    from node.vhosts.vhost import VHost

LABELS = ["vhost", "queue", "raft_cluster"]
METADATA_GROUP = "metadata"  # node/cluster/hosting.py's METADATA


def raft_families(cluster: Cluster | None, vhosts: dict[str, VHost]) -> Iterator[Metric]:
    """The metadata group's and each quorum queue's Raft state; none with clustering off."""
    term = CounterMetricFamily("rabbitmq_raft_term", "Current Raft term number", labels=LABELS)
    gauges = [
        (GaugeMetricFamily("rabbitmq_raft_log_commit_index", "Raft log commit index", labels=LABELS),
         lambda st: st.commit_index),
        (GaugeMetricFamily("rabbitmq_raft_log_last_applied_index", "Raft log last applied index", labels=LABELS),
         lambda st: st.last_applied),
        (GaugeMetricFamily("rabbitmq_raft_log_last_written_index", "Raft log last written index", labels=LABELS),
         lambda st: st.last_index),
        (GaugeMetricFamily("rabbitmq_raft_log_snapshot_index", "Raft log snapshot index", labels=LABELS),
         lambda st: st.snapshot_index),
        (GaugeMetricFamily("rabbitmq_raft_log_entries", "Raft log entries held since the last snapshot",
                           labels=LABELS), lambda st: st.log_entries),
        (GaugeMetricFamily("rabbitmq_raft_leader", "1 if this node leads the Raft group, else 0", labels=LABELS),
         lambda st: 1 if st.role is Role.LEADER else 0),
        (GaugeMetricFamily("rabbitmq_raft_members", "Members of the Raft group as this node knows them",
                           labels=LABELS), lambda st: len(st.peers) + 1),
    ]  # fmt: skip
    for labels, st in _groups(cluster, vhosts):
        term.add_metric(labels, st.term)
        for family, value in gauges:
            family.add_metric(labels, value(st))
    yield term
    for family, _ in gauges:
        yield family


def _groups(cluster: Cluster | None, vhosts: dict[str, VHost]) -> Iterator[tuple[list[str], GroupStatus]]:
    if cluster is None:
        return
    groups = cluster.groups
    metadata = groups.get(METADATA_GROUP)
    if metadata is not None:
        yield ["", "", METADATA_GROUP], metadata.status()
    for vhost in vhosts.values():
        for queue in vhost.queues.values():
            if queue.type_name != "quorum":
                continue
            name = getattr(queue, "group", None) or group_name(vhost.name, queue.name)
            group = groups.get(name)
            if group is not None:  # a member here
                yield [vhost.name, queue.name, name], group.status()
