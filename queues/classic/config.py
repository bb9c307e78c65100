"""A classic queue's arguments (validated, immutable) and its counters."""

from __future__ import annotations

from dataclasses import dataclass

from queues.base import QueueArgumentError

__all__ = [
    "DROP_HEAD",
    "REJECT_PUBLISH",
    "REJECT_PUBLISH_DLX",
    "ClassicQueueConfig",
    "ClassicQueueCounters",
    "QueueArgumentError",
]

DROP_HEAD = "drop-head"
REJECT_PUBLISH = "reject-publish"
REJECT_PUBLISH_DLX = "reject-publish-dlx"
_OVERFLOWS = (DROP_HEAD, REJECT_PUBLISH, REJECT_PUBLISH_DLX)


def _non_negative(arguments: dict, name: str, positive: bool = False) -> int | None:
    value = arguments.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < (1 if positive else 0):
        kind = "a positive" if positive else "a non-negative"
        raise QueueArgumentError(f"{name} must be {kind} integer, got {value!r}")
    return int(value)


@dataclass(frozen=True, slots=True)
class ClassicQueueConfig:
    """The queue arguments a classic queue acts on, validated; immutable."""

    message_ttl: int | None = None  # x-message-ttl, ms
    expires: int | None = None  # x-expires, ms unused before the queue deletes itself
    max_length: int | None = None  # x-max-length, ready messages
    max_length_bytes: int | None = None  # x-max-length-bytes, ready payload bytes
    overflow: str = DROP_HEAD  # x-overflow
    dead_letter: bool = False  # x-dead-letter-exchange is set ("" is the default exchange)
    max_priority: int = 0  # x-max-priority: 1..255 makes a priority queue (0: one level, as without)
    single_active_consumer: bool = False  # x-single-active-consumer

    @property
    def limited(self) -> bool:
        return self.max_length is not None or self.max_length_bytes is not None

    def over_limit(self, count: int, size: int) -> bool:
        """`count` ready messages of `size` payload bytes in all exceed x-max-length(-bytes)."""
        return (self.max_length is not None and count > self.max_length) or (
            self.max_length_bytes is not None and size > self.max_length_bytes
        )

    @classmethod
    def from_arguments(cls, arguments: dict) -> ClassicQueueConfig:
        overflow = arguments.get("x-overflow", DROP_HEAD)
        if overflow not in _OVERFLOWS:
            raise QueueArgumentError(f"x-overflow must be one of {', '.join(_OVERFLOWS)}, got {overflow!r}")
        dlx = arguments.get("x-dead-letter-exchange")
        if dlx is not None and not isinstance(dlx, str):
            raise QueueArgumentError(f"x-dead-letter-exchange must be a string, got {dlx!r}")
        if arguments.get("x-dead-letter-routing-key") is not None and dlx is None:
            raise QueueArgumentError("x-dead-letter-routing-key requires x-dead-letter-exchange")
        max_priority = _non_negative(arguments, "x-max-priority") or 0
        if max_priority > 255:
            raise QueueArgumentError(f"x-max-priority must be at most 255, got {max_priority}")
        sac = arguments.get("x-single-active-consumer", False)
        if not isinstance(sac, bool):
            raise QueueArgumentError(f"x-single-active-consumer must be a boolean, got {sac!r}")
        return cls(
            message_ttl=_non_negative(arguments, "x-message-ttl"),
            expires=_non_negative(arguments, "x-expires", positive=True),
            max_length=_non_negative(arguments, "x-max-length"),
            max_length_bytes=_non_negative(arguments, "x-max-length-bytes"),
            overflow=str(overflow),
            dead_letter=dlx is not None,
            max_priority=max_priority,
            single_active_consumer=sac,
        )


@dataclass(slots=True)
class ClassicQueueCounters:
    """Monotonic counters for metrics."""

    published: int = 0  # publish() calls on a live queue, refused ones included
    confirmed: int = 0  # ACCEPTED confirms sent
    rejected: int = 0  # publishes refused by x-overflow reject-publish(-dlx)
    delivered: int = 0  # transfers handed to consumers
    redelivered: int = 0  # ... of messages that had been acquired before
    acknowledged: int = 0  # accepted settlements
    dead_lettered: int = 0  # handed to QueueHost.dead_letter (any reason)
    dropped: int = 0  # discarded without a dead-letter exchange (any reason)
    expired: int = 0  # TTL expiries (also counted as dead_lettered or dropped)
