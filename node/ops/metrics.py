"""Node-wide counters, bumped on the message path (plain integer adds) and
read at scrape time by the Prometheus collector (node/http/prometheus.py) and the
management API's overview."""

from __future__ import annotations

import dataclasses
from bisect import bisect_left
from dataclasses import dataclass, field

DEAD_LETTER_REASONS = ("expired", "rejected", "maxlen", "delivery_limit")
# rabbitmq_message_size_bytes' bucket bounds (RabbitMQ's), bytes
MESSAGE_SIZE_BUCKETS = (100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 50_000_000, 100_000_000)


@dataclass
class NodeMetrics:
    connections_opened: int = 0
    sessions_opened: int = 0  # AMQP 1.0 sessions: RabbitMQ's channels
    queues_declared: int = 0  # declarations through this node, redeclarations included
    queues_created: int = 0
    queues_deleted: int = 0  # deleted through this node: by a client, or by auto-delete, exclusivity or expiry
    links: int = 0
    published: int = 0
    published_unsettled: int = 0  # sent unsettled: the publisher waits for a settlement (a confirm)
    # messages received, by size: one count per MESSAGE_SIZE_BUCKETS bound and one past the last
    message_sizes: list[int] = field(default_factory=lambda: [0] * (len(MESSAGE_SIZE_BUCKETS) + 1))
    message_bytes: int = 0
    confirmed: int = 0
    routed: int = 0
    unroutable: int = 0
    unroutable_returned: int = 0  # of `unroutable`, those sent unsettled and released back to their publisher
    delivered: int = 0
    acknowledged: int = 0
    redelivered: int = 0
    dead_lettered: int = 0
    # reason ("expired", "rejected", "maxlen", "delivery_limit") -> messages
    # republished to a dead-letter exchange
    dead_lettered_by_reason: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DEAD_LETTER_REASONS, 0))

    # by queue type ("classic", "quorum"), for the Prometheus families' queue_type label
    delivered_by_type: dict[str, int] = field(default_factory=dict)
    delivered_presettled_by_type: dict[str, int] = field(default_factory=dict)
    redelivered_by_type: dict[str, int] = field(default_factory=dict)
    acknowledged_by_type: dict[str, int] = field(default_factory=dict)
    # (queue type, strategy, reason) -> messages: strategy "at_most_once" or
    # "at_least_once" for the republished ones, "disabled" for those dropped
    # because their queue has no dead-letter exchange (RabbitMQ's labels)
    dead_lettered_by: dict[tuple[str, str, str], int] = field(default_factory=dict)

    def count_received(self, size: int, settled: bool) -> None:
        self.published += 1
        if not settled:
            self.published_unsettled += 1
        self.message_sizes[bisect_left(MESSAGE_SIZE_BUCKETS, size)] += 1
        self.message_bytes += size

    def count_delivered(self, queue_type: str, redelivered: bool, presettled: bool = False) -> None:
        self.delivered += 1
        if presettled:  # a consumer that settles nothing: RabbitMQ's auto_ack
            self.delivered_presettled_by_type[queue_type] = self.delivered_presettled_by_type.get(queue_type, 0) + 1
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

    # -- a node of several workers (node/workers/): each counts its own, the node shows the sum

    def to_json(self) -> dict:
        """The counters as JSON values (another worker's, sent to worker 0)."""
        out = dataclasses.asdict(self)
        out["dead_lettered_by"] = [[*key, n] for key, n in self.dead_lettered_by.items()]
        return out

    def plus(self, others: list[dict]) -> NodeMetrics:
        """These counters with those of `others` (`to_json()`'s) added."""
        total = dataclasses.replace(self)
        for f in dataclasses.fields(self):
            mine = getattr(self, f.name)
            if isinstance(mine, int):
                value = mine + sum(int(o.get(f.name, 0)) for o in others)
            elif isinstance(mine, list):
                value = [sum(column) for column in zip(mine, *(o[f.name] for o in others), strict=True)]
            else:
                value = dict(mine)
                for o in others:
                    pairs = ((tuple(e[:-1]), e[-1]) for e in o[f.name]) if f.name == "dead_lettered_by" else o[f.name].items()
                    for key, n in pairs:
                        value[key] = value.get(key, 0) + int(n)
            setattr(total, f.name, value)
        return total
