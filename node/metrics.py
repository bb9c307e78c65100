"""Node-wide counters; Prometheus exposition comes with [3/7]."""

from dataclasses import dataclass


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
