"""What a Prometheus page covers (node/http/prometheus.py): every object, or
what `/metrics/detailed` asks for."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Scope:
    """The objects a page covers: `/metrics/detailed?vhost=...&queue=...` names
    vhosts (None: every one) and a regular expression a queue's name matches
    (anywhere in it, as RabbitMQ's; None: every queue)."""

    vhosts: frozenset[str] | None = None
    queue: re.Pattern[str] | None = None

    def has_vhost(self, name: str) -> bool:
        return self.vhosts is None or name in self.vhosts

    def has_queue(self, vhost: str, name: str) -> bool:
        return self.has_vhost(vhost) and (self.queue is None or self.queue.search(name) is not None)


EVERYTHING = Scope()
