"""The Raft families of the Prometheus endpoint (node/http/prometheus.py):
one series per Raft group this node is a member of, the metadata group and
each quorum queue's, read from the group's typed status (raft/status.py) at
scrape time, on the node's loop that ticks the groups.

RabbitMQ 4's names (Ra's counters, per object): rabbitmq_raft_term,
rabbitmq_raft_commit_index, rabbitmq_raft_last_applied,
rabbitmq_raft_last_written_index, rabbitmq_raft_snapshot_index and
rabbitmq_raft_commit_latency_seconds, labelled by `vhost` and `queue` for a
quorum queue. RabbitMQ 3's names are kept beside them, for the dashboards
and alerts written for them (the published Quorum-Queues-Raft dashboard
still queries rabbitmq_raft_log_commit_index and
rabbitmq_raft_log_last_written_index): rabbitmq_raft_term_total (a gauge
here, so that its family does not clash with rabbitmq_raft_term's),
rabbitmq_raft_log_commit_index, rabbitmq_raft_log_last_applied_index,
rabbitmq_raft_log_last_written_index and rabbitmq_raft_log_snapshot_index.
Ours besides, for what Ra reports elsewhere: rabbitmq_raft_log_entries (the
log's length since its last compaction), rabbitmq_raft_leader (1 where this
node leads the group) and rabbitmq_raft_members. Every series also names its
group in `raft_cluster` ("metadata", or the queue's "qq.<digest>"), the
metadata group having empty `vhost` and `queue`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import GaugeMetricFamily, Metric

from node.http.prometheus_scope import EVERYTHING, Scope
from node.vhosts.quorum_groups import group_name
from raft.status import GroupStatus, Role

if TYPE_CHECKING:
    from node.cluster.cluster import Cluster
    from node.vhosts.vhost import VHost

LABELS = ["vhost", "queue", "raft_cluster"]
METADATA_GROUP = "metadata"  # node/cluster/hosting.py's METADATA


# RabbitMQ 4's (Ra's) families: (name after the prefix, help, value)
RA_FAMILIES = [
    ("raft_term", "The current term", lambda st: st.term),
    ("raft_commit_index", "The current commit index", lambda st: st.commit_index),
    ("raft_last_applied", "The last applied index", lambda st: st.last_applied),
    ("raft_last_written_index", "The last fully written and fsynced index of the log", lambda st: st.last_index),
    ("raft_snapshot_index", "The current snapshot index", lambda st: st.snapshot_index),
    ("raft_commit_latency_seconds", "Approximate time taken from an entry being written to the log until it is "
     "committed", lambda st: st.commit_latency),
]  # fmt: skip
# RabbitMQ 3's names, and ours
OLDER_FAMILIES = [
    ("raft_term_total", "Current Raft term number (RabbitMQ 3's name)", lambda st: st.term),
    ("raft_log_commit_index", "Raft log commit index", lambda st: st.commit_index),
    ("raft_log_last_applied_index", "Raft log last applied index", lambda st: st.last_applied),
    ("raft_log_last_written_index", "Raft log last written index", lambda st: st.last_index),
    ("raft_log_snapshot_index", "Raft log snapshot index", lambda st: st.snapshot_index),
    ("raft_log_entries", "Raft log entries held since the last snapshot", lambda st: st.log_entries),
    ("raft_leader", "1 if this node leads the Raft group, else 0", lambda st: 1 if st.role is Role.LEADER else 0),
    ("raft_members", "Members of the Raft group as this node knows them", lambda st: len(st.peers) + 1),
]


def raft_families(cluster: Cluster | None, vhosts: dict[str, VHost], prefix: str = "rabbitmq_",
                  scope: Scope | None = None) -> Iterator[Metric]:  # fmt: skip
    """The metadata group's and each quorum queue's Raft state; none with clustering off.
    `/metrics/detailed` (a `scope`, `prefix` "rabbitmq_detailed_") has RabbitMQ 4's names
    only, for the queues in scope, and the metadata group only when it asks for every object."""
    table = RA_FAMILIES if scope is not None else RA_FAMILIES + OLDER_FAMILIES
    gauges = [(GaugeMetricFamily(prefix + name, doc, labels=LABELS), value) for name, doc, value in table]
    for labels, st in _groups(cluster, vhosts):
        vhost, queue, group = labels
        if scope is None or (scope.has_queue(vhost, queue) if group != METADATA_GROUP else scope == EVERYTHING):
            for family, value in gauges:
                family.add_metric(labels, value(st))
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
            name = _group_of(vhost.name, queue)
            group = groups.get(name)
            if group is not None:  # a member here
                yield [vhost.name, queue.name, name], group.status()


def _group_of(vhost: str, queue: Any) -> str:
    return getattr(queue, "group", None) or group_name(vhost, queue.name)


def queue_role(cluster: Cluster | None, vhost: str, queue: Any) -> Role | None:
    """This node's part in hosting `queue`: LEADER for a queue it hosts alone or
    leads, FOLLOWER for a quorum replica it does not lead, None for a queue
    another node hosts (RabbitMQ's queue_info `membership`)."""
    if queue.type_name == "quorum":
        group = None if cluster is None else cluster.groups.get(_group_of(vhost, queue))
        if group is None:
            return None
        return Role.LEADER if group.is_leader else Role.FOLLOWER
    return None if queue.remote else Role.LEADER
