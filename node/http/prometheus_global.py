"""RabbitMQ's global counters (`rabbitmq_global_*`, labelled by `protocol`,
some by `queue_type` too) and its message size histogram, on `/metrics` and
`/metrics/per-object`: read from the node's counters (node/ops/metrics.py)
and, for the publisher and consumer gauges, from its links.

AMQP 1.0 has no basic.get: the `get` families are reported, zero, as
RabbitMQ reports them for its AMQP 1.0 clients. A consumer that settles
nothing (snd-settle-mode settled) is RabbitMQ's auto-ack consumer."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from node.ops.metrics import DEAD_LETTER_REASONS, MESSAGE_SIZE_BUCKETS

if TYPE_CHECKING:
    from node.http.management_node import ScrapedNode
    from node.ops.metrics import NodeMetrics

PROTOCOL = "amqp10"
# RabbitMQ's queue_type label: the module behind each queue type. Every type
# is reported, zero or not, so a dashboard's series exist from the start.
QUEUE_TYPES = {"classic": "rabbit_classic_queue", "quorum": "rabbit_quorum_queue",
               "stream": "rabbit_stream_queue", "volatile": "rabbit_volatile_queue"}  # fmt: skip
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


def global_families(node: ScrapedNode) -> Iterator[Metric]:
    m = node.metrics
    yield from _links(node)
    for name, doc, value in (
        ("received", "Total number of messages received from publishers", m.published),
        ("received_confirm", "Total number of messages received from publishers expecting confirmations",
         m.published_unsettled),
        ("routed", "Total number of messages routed to queues or streams", m.routed),
        ("unroutable_dropped", "Total number of messages published as non-mandatory into an exchange and "
         "dropped as unroutable", m.unroutable - m.unroutable_returned),
        ("unroutable_returned", "Total number of messages published as mandatory into an exchange and "
         "returned to the publisher as unroutable", m.unroutable_returned),
        ("confirmed", "Total number of messages confirmed to publishers", m.confirmed),
    ):  # fmt: skip
        family = CounterMetricFamily(f"rabbitmq_global_messages_{name}", doc, labels=["protocol"])
        family.add_metric([PROTOCOL], value)
        yield family
    yield from _by_queue_type(m)
    yield from _dead_lettered(m)
    yield _message_sizes(m)


def _links(node: ScrapedNode) -> Iterator[Metric]:
    publishers = consumers = 0
    for conn in node.connections:
        p, c = conn.link_counts()
        publishers += p
        consumers += c
    for name, doc, value in (("publishers", "Current number of publishers", publishers),
                             ("consumers", "Current number of consumers", consumers)):  # fmt: skip
        family = GaugeMetricFamily(f"rabbitmq_global_{name}", doc, labels=["protocol"])
        family.add_metric([PROTOCOL], value)
        yield family


def _by_queue_type(m: NodeMetrics) -> Iterator[Metric]:
    def manual(kind: str) -> int:
        return m.delivered_by_type.get(kind, 0) - m.delivered_presettled_by_type.get(kind, 0)

    zero = {}
    for name, doc, value in (
        ("delivered", "Total number of messages delivered to consumers", m.delivered_by_type.get),
        ("delivered_consume_manual_ack", "Total number of messages delivered to consumers using "
         "basic.consume with manual acknowledgment", manual),
        ("delivered_consume_auto_ack", "Total number of messages delivered to consumers using "
         "basic.consume with automatic acknowledgment", m.delivered_presettled_by_type.get),
        ("delivered_get_manual_ack", "Total number of messages delivered to consumers using basic.get with "
         "manual acknowledgment", zero.get),
        ("delivered_get_auto_ack", "Total number of messages delivered to consumers using basic.get with "
         "automatic acknowledgment", zero.get),
        ("get_empty", "Total number of times basic.get operations fetched no message", zero.get),
        ("redelivered", "Total number of messages redelivered to consumers", m.redelivered_by_type.get),
        ("acknowledged", "Total number of messages acknowledged by consumers", m.acknowledged_by_type.get),
    ):  # fmt: skip
        family = CounterMetricFamily(f"rabbitmq_global_messages_{name}", doc, labels=["protocol", "queue_type"])
        for kind, label in QUEUE_TYPES.items():
            family.add_metric([PROTOCOL, label], value(kind) or 0)
        yield family


def _dead_lettered(m: NodeMetrics) -> Iterator[Metric]:
    for reason in DEAD_LETTER_REASONS:
        family = CounterMetricFamily(f"rabbitmq_global_messages_dead_lettered_{reason}",
                                     f"Total number of messages dead-lettered due to {_DEAD_LETTER_HELP[reason]}",
                                     labels=["queue_type", "dead_letter_strategy"])  # fmt: skip
        for kind, strategies in DEAD_LETTER_STRATEGIES.items():
            for strategy in strategies:
                family.add_metric([QUEUE_TYPES[kind], strategy], m.dead_lettered_by.get((kind, strategy, reason), 0))
        yield family
    # RabbitMQ's at-least-once counter: those its target queues confirmed (Warren counts an
    # at-least-once dead letter by reason only then too)
    confirmed = CounterMetricFamily("rabbitmq_global_messages_dead_lettered_confirmed",
                                    "Total number of messages dead-lettered and confirmed by target queues",
                                    labels=["queue_type", "dead_letter_strategy"])  # fmt: skip
    confirmed.add_metric(
        [QUEUE_TYPES["quorum"], "at_least_once"],
        sum(m.dead_lettered_by.get(("quorum", "at_least_once", r), 0) for r in DEAD_LETTER_REASONS),
    )
    yield confirmed


def _message_sizes(m: NodeMetrics) -> Metric:
    histogram = HistogramMetricFamily("rabbitmq_message_size_bytes", "Size of messages received from publishers",
                                      labels=["protocol"])  # fmt: skip
    buckets, total = [], 0
    for bound, count in zip((*MESSAGE_SIZE_BUCKETS, float("inf")), m.message_sizes, strict=True):
        total += count
        buckets.append((floatToGoString(bound), total))  # le="1e+06", as the dashboards query it
    histogram.add_metric([PROTOCOL], buckets, m.message_bytes)
    return histogram
