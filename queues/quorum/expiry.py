"""x-expires on a quorum queue: the queue deletes itself once it has had no consumer
for that many milliseconds (the `expires` policy key too), as RabbitMQ's do.

The leader decides and asks its node to delete the queue through the metadata, like a
user's delete. The idle time is kept on every replica, from the applied consumer
count (what the log says, the same everywhere) and the local monotonic clock (a duration:
a wall clock stepped by NTP or an operator must not stretch or cut it), and a replica that
was not the leader when its timer fired, or had a consumer linked whose attach the log
had not applied yet (a new group elects its leader first), starts counting again: a
leader change can only make a queue live longer, never expire early. Publishing does not count as use
(as in RabbitMQ); attaching, holding or detaching a consumer does. The machine and
its snapshots are unchanged, so mixed-version replicas agree on every command.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["IdleExpiry"]


class IdleExpiry:
    def __init__(self, host: Any, may_decide: Callable[[], bool], expire: Callable[[], None]):
        self._host = host  # monotonic_ms and call_later (the vhost)
        # the leader, with no consumer of its own whose attach the log has not applied yet
        self._may_decide = may_decide
        self._expire = expire
        self.expires: int | None = None
        self._idle_since = host.monotonic_ms()
        self._had_consumers = False
        self._timer: Any = None

    def configure(self, expires: int | None) -> None:
        """The queue's x-expires (or policy) is now `expires`: count the idle time so far against it."""
        self.expires = expires
        self._rearm()

    def applied(self, consumers: int) -> None:
        """A command was applied; the queue has `consumers`. The last one's leaving starts the count."""
        if consumers or self._had_consumers:
            self._idle_since = self._host.monotonic_ms()
            self._had_consumers = consumers > 0

    def stop(self) -> None:
        self.expires = None
        self._rearm()

    def _rearm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.expires is not None:
            left = self._idle_since + self.expires - self._host.monotonic_ms()
            self._timer = self._host.call_later(max(0, left) / 1000, self._fire)

    def _fire(self) -> None:
        self._timer = None
        if self.expires is None:
            return
        now = self._host.monotonic_ms()
        if self._had_consumers or not self._may_decide():
            self._idle_since = now  # in use, or not ours to decide: a whole period from now
        elif now - self._idle_since >= self.expires:
            self.expires = None
            self._expire()
            return
        self._rearm()
