"""Node-wide counters, bumped on the message path (plain integer adds) and
read at scrape time by the Prometheus collector (node/http/prometheus.py) and the
management API's overview."""

from dataclasses import dataclass, field

DEAD_LETTER_REASONS = ("expired", "rejected", "maxlen", "delivery_limit")


@dataclass
class NodeMetrics:
    connections_opened: int = 0
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

    def count_dead_letter(self, reason: str) -> None:
        self.dead_lettered += 1
        self.dead_lettered_by_reason[reason] = self.dead_lettered_by_reason.get(reason, 0) + 1
