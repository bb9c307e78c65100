"""A stream's arguments (x-...), checked once at declare and read again when
a policy changes them.

Retention removes whole segments, oldest first: by total size
(x-max-length-bytes) and by age (x-max-age, the newest message of a segment
older than the limit). Both limits are off by default, as in RabbitMQ.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from queues.base import QueueArgumentError

__all__ = ["DEFAULT_SEGMENT_BYTES", "StreamConfig", "parse_max_age"]

DEFAULT_SEGMENT_BYTES = 500_000_000  # RabbitMQ's default x-stream-max-segment-size-bytes
MAX_SEGMENT_BYTES = 3_000_000_000  # RabbitMQ's ceiling: offsets in a segment stay 32-bit friendly
DEFAULT_FILTER_BYTES = 16
_AGE = re.compile(r"([0-9]{1,9})([YMDhms])")  # anchored by fullmatch: no backtracking to speak of
_AGE_UNIT_S = {"Y": 365 * 86400, "M": 30 * 86400, "D": 86400, "h": 3600, "m": 60, "s": 1}


def parse_max_age(value: Any) -> int:
    """`7D`, `1h`, `30m`, ... in seconds; raises QueueArgumentError."""
    match = _AGE.fullmatch(value) if isinstance(value, str) else None
    if match is None or int(match.group(1)) == 0:
        raise QueueArgumentError(f"invalid x-max-age {value!r}: a positive number and a unit, one of Y M D h m s")
    return int(match.group(1)) * _AGE_UNIT_S[match.group(2)]


def _positive(arguments: dict, key: str, default: int | None, ceiling: int | None = None) -> int | None:
    value = arguments.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or (ceiling and value > ceiling):
        bound = f" up to {ceiling}" if ceiling else ""
        raise QueueArgumentError(f"invalid {key} {value!r}: a positive integer{bound}")
    return value


@dataclass(frozen=True, slots=True)
class StreamConfig:
    max_bytes: int | None = None  # total bytes kept, None: no limit
    max_age_s: int | None = None
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    initial_cluster_size: int | None = None  # replication is not built yet: read and checked only
    filter_bytes: int = DEFAULT_FILTER_BYTES  # the Bloom filter of each chunk

    @classmethod
    def from_arguments(cls, arguments: dict) -> StreamConfig:
        if arguments.get("x-single-active-consumer") not in (None, False):
            # RabbitMQ serves a stream's single active consumer only over its stream protocol, which
            # Warren does not speak: over AMQP 1.0 every consumer would get every message.
            raise QueueArgumentError("x-single-active-consumer is not supported on a stream: RabbitMQ offers it only "
                                     "over its stream protocol, and every AMQP 1.0 consumer of a stream reads it all")
        age = arguments.get("x-max-age")
        filter_bytes = _positive(arguments, "x-stream-filter-size-bytes", DEFAULT_FILTER_BYTES, 255)
        if filter_bytes < 16:
            raise QueueArgumentError(f"invalid x-stream-filter-size-bytes {filter_bytes}: 16 to 255")
        return cls(
            max_bytes=_positive(arguments, "x-max-length-bytes", None),
            max_age_s=None if age is None else parse_max_age(age),
            segment_bytes=_positive(arguments, "x-stream-max-segment-size-bytes", DEFAULT_SEGMENT_BYTES,
                                    MAX_SEGMENT_BYTES),  # fmt: skip
            initial_cluster_size=_positive(arguments, "x-initial-cluster-size", None),
            filter_bytes=filter_bytes,
        )


def check_stream_declaration(durable: bool, exclusive_owner: Any, auto_delete: bool, arguments: dict) -> StreamConfig:
    """A stream is durable, shared and kept (as in RabbitMQ); raises QueueArgumentError."""
    if not durable or exclusive_owner is not None or auto_delete:
        raise QueueArgumentError("a stream is durable, not exclusive and not auto-delete")
    if "x-consumer-timeout" in arguments:  # as RabbitMQ: a stream consumer settles nothing to time out
        raise QueueArgumentError("x-consumer-timeout is not supported on a stream: its consumers settle nothing")
    return StreamConfig.from_arguments(arguments)
