"""Node-wide counters, bumped on the message path (plain integer adds) and
read at scrape time by the Prometheus collector (node/http/prometheus.py) and the
management API's overview."""

from dataclasses import dataclass, field

DEAD_LETTER_REASONS = ("expired", "rejected", "maxlen", "delivery_limit")


@dataclass
class NodeMetrics:
    connections_opened: int = 0
    sessions_opened: int = 0  # AMQP 1.0 sessions (RabbitMQ's churn_rates count them as channels)
    queues_declared: int = 0  # every declaration through this node, redeclarations included
    queues_created: int = 0
    queues_deleted: int = 0  # deleted through this node (HTTP API, /management, AMQP 1.0 address v1)
    links: int = 0
    published: int = 0
    confirmed: int = 0
    routed: int = 0
    unroutable: int = 0
    delivered: int = 0
    acknowledged: int = 0
    redelivered: int = 0
    dead_lettered: int = 0
    # reason ("expired", "rejected", "maxlen", "delivery_limit") -> messages
    # republished to a dead-letter exchange
    dead_lettered_by_reason: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DEAD_LETTER_REASONS, 0))

    # by queue type ("classic", "quorum"), for the Prometheus families' queue_type label
    delivered_by_type: dict[str, int] = field(default_factory=dict)
    redelivered_by_type: dict[str, int] = field(default_factory=dict)
    acknowledged_by_type: dict[str, int] = field(default_factory=dict)
    # (queue type, strategy, reason) -> messages: strategy "at_most_once" or
    # "at_least_once" for the republished ones, "disabled" for those dropped
    # because their queue has no dead-letter exchange (RabbitMQ's labels)
    dead_lettered_by: dict[tuple[str, str, str], int] = field(default_factory=dict)

    def count_delivered(self, queue_type: str, redelivered: bool) -> None:
        self.delivered += 1
        self.delivered_by_type[queue_type] = self.delivered_by_type.get(queue_type, 0) + 1
        if redelivered:
            self.redelivered += 1
            self.redelivered_by_type[queue_type] = self.redelivered_by_type.get(queue_type, 0) + 1

    def count_acknowledged(self, queue_type: str, n: int) -> None:
        self.acknowledged += n
        self.acknowledged_by_type[queue_type] = self.acknowledged_by_type.get(queue_type, 0) + n

    def count_dead_letter(self, reason: str, queue_type: str = "classic", strategy: str = "at_most_once",
                          n: int = 1) -> None:  # fmt: skip
        if strategy != "disabled":  # the management overview counts the republished ones
            self.dead_lettered += n
            self.dead_lettered_by_reason[reason] = self.dead_lettered_by_reason.get(reason, 0) + n
        key = (queue_type, strategy, reason)
        self.dead_lettered_by[key] = self.dead_lettered_by.get(key, 0) + n
