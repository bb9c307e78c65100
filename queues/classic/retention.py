"""How messages leave a classic queue other than by acceptance, and how the
queue leaves when unused: dead-lettering or dropping (`discard`), the
x-max-length(-bytes) limits with x-overflow, message TTL at the head, and
x-expires.

`Retention` works on its queue's state (its ReadyMessages, counters and
persistence) and is called by the queue's dispatch; the timers it arms come
from the queue's host.
"""

from __future__ import annotations

from typing import Any

from queues.base import QueueMessage

__all__ = ["Retention"]


class Retention:
    def __init__(self, queue: Any) -> None:
        self.queue = queue  # the ClassicQueue
        self._host = queue._host
        self._messages = queue._messages
        self._ttl_timer: Any = None
        self._ttl_timer_at = 0
        self._expiry_timer: Any = None
        self._last_used = 0
        expires = queue.config.expires
        if expires is not None:
            self._last_used = self._host.monotonic_ms()
            self.arm_expiry(expires)

    def discard(self, msg: QueueMessage, reason: str) -> None:
        """A message leaves the queue other than by acceptance: dead-letter
        it (reason "rejected", "expired" or "maxlen") or drop it."""
        queue = self.queue
        stats = queue.stats
        if reason == "expired":
            stats.expired += 1
        if queue.durable and msg.durable:
            queue._persistence.remove(queue.store_key, msg.seq)
        if queue.config.dead_letter:
            stats.dead_lettered += 1
            self._host.dead_letter(queue, msg, reason)
        else:
            stats.dropped += 1
            self._host.count_dropped(queue, reason, 1)

    # -- limits -------------------------------------------------------------------

    def would_overflow(self, size: int) -> bool:
        """A new message of `size` bytes would take the queue past a limit."""
        return self.queue.config.over_limit(len(self._messages) + 1, self._messages.bytes + size)

    def drop_over_limit(self) -> None:
        # x-overflow drop-head: the oldest ready messages make room.
        messages, queue, over = self._messages, self.queue, self.queue.config.over_limit
        while messages and not queue.deleted and over(len(messages), messages.bytes):
            self.discard(messages.pop_head(), "maxlen")

    # -- TTL ----------------------------------------------------------------------

    def expire_head(self) -> None:
        """Expired messages leave when they reach the head (RabbitMQ: per-message
        TTL is checked only there); a timer watches the head's expiry."""
        now = self._host.now_ms()
        messages, queue = self._messages, self.queue
        while messages and not queue.deleted:
            msg = messages.head()
            expires_at = msg.expires_at
            if expires_at is None:
                return
            if expires_at > now:
                self._arm_ttl(expires_at, now)
                return
            messages.pop_head()
            self.discard(msg, "expired")

    def _arm_ttl(self, expires_at: int, now: int) -> None:
        if self._ttl_timer is not None:
            if self._ttl_timer_at <= expires_at:
                return  # fires first; it re-arms for the head then
            self._ttl_timer.cancel()
        self._ttl_timer_at = expires_at
        self._ttl_timer = self._host.call_later((expires_at - now) / 1000, self._on_ttl_timer)

    def cancel_ttl_timer(self) -> None:
        if self._ttl_timer is not None:
            self._ttl_timer.cancel()
            self._ttl_timer = None

    def _on_ttl_timer(self) -> None:
        self._ttl_timer = None
        if not self.queue.deleted:
            self.queue._dispatch()

    # -- x-expires ----------------------------------------------------------------

    # idle time is a duration: the monotonic clock, which a stepped wall clock does not move
    # (RabbitMQ's x-expires is a timer)

    def touch(self) -> None:
        self._last_used = self._host.monotonic_ms()

    def idle_since_now(self) -> None:
        """The last consumer left: the x-expires countdown starts."""
        expires = self.queue.config.expires
        if expires is not None:
            self._last_used = self._host.monotonic_ms()
            self.arm_expiry(expires)

    def expiry_changed(self) -> None:
        """x-expires changed (a policy): count the idle time against the new value."""
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None
        expires = self.queue.config.expires
        if expires is None or self.queue.consumer_count:
            return
        if not self._last_used:
            self._last_used = self._host.monotonic_ms()
        self.arm_expiry(max(0, self._last_used + expires - self._host.monotonic_ms()))

    def arm_expiry(self, delay_ms: int) -> None:
        if self._expiry_timer is None:
            self._expiry_timer = self._host.call_later(delay_ms / 1000, self._on_expiry_timer)

    def cancel(self) -> None:
        """The queue is deleted: no timer fires any more."""
        self.cancel_ttl_timer()
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None

    def _on_expiry_timer(self) -> None:
        self._expiry_timer = None
        queue = self.queue
        expires = queue.config.expires
        if queue.deleted or queue.consumer_count or expires is None:
            return  # a consumer's detach re-arms it
        left = self._last_used + expires - self._host.monotonic_ms()
        if left > 0:
            self.arm_expiry(left)
        else:
            queue._delete_self()
