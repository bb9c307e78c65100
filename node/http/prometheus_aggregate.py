"""RabbitMQ's aggregated `/metrics` (prometheus.return_per_object_metrics off,
its default): every family without the labels that name one object, the
values of the series that differed only by those labels summed, so a node
with many queues exports the same few series as a node with one.

RabbitMQ sums its per-queue tables into one series per family (its
collector's aggregated get_data); the families whose labels name no object
(by protocol, queue type, le...) pass unchanged. Warren does the same for
every family it has, the Raft ones included, so a dashboard pointed at the
aggregated endpoint still finds each metric it queries.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import Metric
from prometheus_client.samples import Sample

# Labels that name one object: a queue (and its Raft group), a vhost, an
# exchange, a connection or a channel. (queue_type is no object: the global
# families count by it, in RabbitMQ's aggregated output too.)
PER_OBJECT_LABELS = frozenset({"vhost", "queue", "raft_cluster", "exchange", "connection", "channel"})
# Families RabbitMQ leaves out of its aggregated page: one constant series
# per object (with its queue_type and membership), whose sum says nothing a
# total does not (rabbitmq_queues).
# The attempts by source are the attempts by protocol, split (RabbitMQ's
# mutually_exclusive_mf leaves them out of its aggregated page likewise).
PER_OBJECT_ONLY = frozenset({"queue_info", "exchange_name", "auth_attempts_detailed", "auth_attempts_detailed_succeeded",
                             "auth_attempts_detailed_failed"})  # fmt: skip


def aggregated(families: Iterable[Metric], prefix: str = "rabbitmq_") -> Iterator[Metric]:
    """Each family of `families` summed over its per-object labels."""
    for family in families:
        name = family.name.removeprefix(prefix)
        if name in PER_OBJECT_ONLY:
            continue
        if not any(PER_OBJECT_LABELS & s.labels.keys() for s in family.samples):
            yield family
            continue
        yield _summed(family)


def _summed(family: Metric) -> Metric:
    out = Metric(family.name, family.documentation, family.type, family.unit)
    sums: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}  # insertion order: the first series' order
    for s in family.samples:
        labels = tuple((k, v) for k, v in s.labels.items() if k not in PER_OBJECT_LABELS)
        key = (s.name, labels)
        sums[key] = sums.get(key, 0.0) + s.value
    out.samples = [Sample(sample_name, dict(labels), value) for (sample_name, labels), value in sums.items()]
    return out
