"""The node's authentication attempts, as RabbitMQ's core metrics count them
(rabbit_core_metrics auth_attempt_*): total, succeeded and failed, by
protocol always, and by (remote address, claimed user name, protocol) when
`track_auth_attempt_source` is on. Off by default, as RabbitMQ's: one entry
per address and name ever tried grows without bound under a scan, and only
a reset (DELETE /api/auth/attempts/{node}) empties it.

Read by GET /api/auth/attempts/{node}[/source] (node/http/auth_attempt_routes.py)
and the Prometheus families rabbitmq_auth_attempts_* and
rabbitmq_auth_attempts_detailed_* (node/http/prometheus_core.py)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AuthAttempts", "Counts"]


@dataclass
class Counts:
    succeeded: int = 0
    failed: int = 0

    @property
    def total(self) -> int:
        return self.succeeded + self.failed


class AuthAttempts:
    def __init__(self, track_source: bool = False):
        self.track_source = track_source
        self.by_protocol: dict[str, Counts] = {}
        self.by_source: dict[tuple[str, str, str], Counts] = {}  # (remote address, user name, protocol) ->

    def record(self, protocol: str, succeeded: bool, remote_address: str = "", username: str = "") -> None:
        self._count(self.by_protocol, protocol, succeeded)
        # RabbitMQ keeps no source entry for an attempt that names neither
        if self.track_source and (remote_address or username):
            self._count(self.by_source, (remote_address, username, protocol), succeeded)

    @staticmethod
    def _count(table: dict, key: object, succeeded: bool) -> None:
        counts = table.get(key)
        if counts is None:
            counts = table[key] = Counts()
        if succeeded:
            counts.succeeded += 1
        else:
            counts.failed += 1

    def reset(self) -> None:
        """Forgets every count (RabbitMQ's reset_auth_attempt_metrics)."""
        self.by_protocol.clear()
        self.by_source.clear()
