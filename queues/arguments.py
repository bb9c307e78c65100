"""The queue arguments RabbitMQ 4.2 knows, per queue type, and the rule it
applies to them when a queue is declared (rabbit_amqqueue's
check_declare_arguments over each type's `capabilities()`):

- an argument that another queue type knows and this one does not is refused,
  naming it ("invalid arg 'x-max-priority' for a queue of type quorum"): a
  client asking a quorum queue for priorities levels must not believe it has them;
- an argument no queue type knows is kept as given and has no effect, as in
  RabbitMQ (clients put their own x-keys there);
- the arguments RabbitMQ 4 keeps only so that old declarations still work
  (x-queue-mode, x-queue-version, x-max-in-memory-*) are checked as it checks
  them and have no effect, in Warren as in RabbitMQ 4.

Each queue type's config (queues/classic/config.py, queues/quorum/state.py,
queues/stream/config.py) checks the values of the arguments it acts on; this
module only decides which keys a type takes. It runs at declaration only: a
policy's keys for another type are skipped by that type, never refused.
docs/compatibility.toml lists every key with its status and tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from queues.base import QueueArgumentError

__all__ = ["NOT_YET", "PRIORITY", "QUEUE_ARGUMENTS", "check_declare", "consumer_priority"]

_COMMON = ("x-queue-type", "x-queue-leader-locator", "x-max-length-bytes")
QUEUE_ARGUMENTS: dict[str, frozenset[str]] = {
    "classic": frozenset((*_COMMON,
        "x-expires", "x-message-ttl", "x-dead-letter-exchange", "x-dead-letter-routing-key", "x-max-length",
        "x-max-priority", "x-overflow", "x-queue-mode", "x-queue-version", "x-single-active-consumer",
        "x-queue-master-locator",
    )),  # fmt: skip
    "quorum": frozenset((*_COMMON,
        "x-dead-letter-exchange", "x-dead-letter-routing-key", "x-dead-letter-strategy", "x-expires",
        "x-max-length", "x-max-in-memory-length", "x-max-in-memory-bytes", "x-overflow",
        "x-single-active-consumer", "x-quorum-initial-group-size", "x-delivery-limit", "x-message-ttl",
        # not in RabbitMQ's list, which accepts it on any type; only its quorum membership
        # reconciliation reads it, so another type refuses it here rather than ignore it
        "x-quorum-target-group-size",
    )),  # fmt: skip
    "stream": frozenset((*_COMMON,
        "x-max-age", "x-stream-max-segment-size-bytes", "x-stream-filter-size-bytes", "x-initial-cluster-size",
    )),  # fmt: skip
}
_KNOWN = frozenset().union(*QUEUE_ARGUMENTS.values())

# Arguments RabbitMQ 4.2 acts on outside the lists above, that Warren does not
# act on yet: refused until it does, rather than kept and ignored (none now).
NOT_YET: dict[str, str] = {}

# Where Warren places a classic queue: on the node that declares it.
_CLASSIC_LOCATORS = ("client-local",)
_QUEUE_MODES = ("default", "lazy")
_QUEUE_VERSIONS = (1, 2)


def check_declare(queue_type: str, arguments: Mapping[str, Any]) -> None:
    """Raises QueueArgumentError naming the first argument `queue_type` does not take."""
    known = QUEUE_ARGUMENTS[queue_type]
    for key in sorted(arguments):
        if key in NOT_YET:
            raise QueueArgumentError(f"{key} is not supported yet: Warren does not implement {NOT_YET[key]}")
        if key in _KNOWN and key not in known:
            raise QueueArgumentError(f"invalid arg '{key}' for a queue of type {queue_type}")
    routing_key = arguments.get("x-dead-letter-routing-key")
    if routing_key is not None:  # RabbitMQ's check_dlxrk_arg, for both types that take it
        if not isinstance(routing_key, str):
            raise QueueArgumentError(f"invalid arg 'x-dead-letter-routing-key': a string, got {routing_key!r}")
        if arguments.get("x-dead-letter-exchange") is None:
            raise QueueArgumentError("x-dead-letter-routing-key requires x-dead-letter-exchange")
    if queue_type == "classic":
        for key in ("x-queue-leader-locator", "x-queue-master-locator"):
            value = arguments.get(key)
            if value is not None and value not in _CLASSIC_LOCATORS:
                raise QueueArgumentError(f"{key} {value!r} is not supported on a classic queue: Warren keeps a "
                                         "classic queue on the node that declares it (client-local)")  # fmt: skip
        mode = arguments.get("x-queue-mode")
        if mode is not None and mode not in _QUEUE_MODES:
            raise QueueArgumentError(f"invalid arg 'x-queue-mode': unsupported queue mode {mode!r}")
        version = arguments.get("x-queue-version")
        if version is not None and (isinstance(version, bool) or version not in _QUEUE_VERSIONS):
            raise QueueArgumentError(f"invalid arg 'x-queue-version': unsupported queue version {version!r}")
    if queue_type == "quorum":
        target = arguments.get("x-quorum-target-group-size")  # node/vhosts/quorum_reconcile.py reads it
        if target is not None and (isinstance(target, bool) or not isinstance(target, int) or target < 1):
            raise QueueArgumentError(f"invalid arg 'x-quorum-target-group-size': a positive integer, got {target!r}")
        for key in ("x-max-in-memory-length", "x-max-in-memory-bytes"):
            value = arguments.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise QueueArgumentError(f"invalid arg '{key}': a non-negative integer, got {value!r}")


PRIORITY = "rabbitmq:priority"  # the ATTACH property RabbitMQ reads as the x-priority consumer argument


def consumer_priority(properties: Mapping[str, Any] | None, stream: bool) -> int:
    """A consumer's priority from its ATTACH properties (0 without one). A stream
    does not take it (RabbitMQ's stream consumer arguments do not include x-priority:
    every consumer of a stream reads it all), and it must be an integer."""
    value = (properties or {}).get(PRIORITY)
    if value is None:
        return 0
    if stream:
        raise QueueArgumentError(f"invalid arg '{PRIORITY}' (x-priority) for a queue of type stream")
    if isinstance(value, bool) or not isinstance(value, int):
        raise QueueArgumentError(f"invalid arg '{PRIORITY}' (x-priority): expected integer, got {value!r}")
    return value
