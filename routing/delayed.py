"""The x-delayed-message exchange (RabbitMQ's delayed message exchange plugin):
what routing needs to know of it. The exchange routes as its `x-delayed-type`
(direct, fanout, topic or headers) would; a message with a positive delay is
held first and routed, as that type routes it then, once the delay is over
(node/vhosts/delayed_messages.py holds it; routing/delay_index.py orders it).

The delay, in milliseconds: RabbitMQ 4 reads `x-delay` as an x-header, which for
an AMQP 1.0 message is the message annotation `x-delay`; Warren reads that, then
the application property `x-delay` (where an AMQP 0.9.1 header or an HTTP API
publish's `headers` put it). None, zero or a negative delay routes at once, as
in the plugin; a value that is not an integer routes at once too (the plugin
ignores it as well), but a string of digits counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from routing.errors import NotAllowed, PreconditionFailed
from routing.message_facts import MessageFacts, application_properties
from routing.model import ExchangeType

__all__ = [
    "BACKING_PREFIX",
    "INTERNAL_PREFIXES",
    "LATER_PREFIX",
    "DELAY",
    "DELAYED_TYPE",
    "UNDERLYING",
    "backing_name",
    "check_internal",
    "is_internal",
    "later_name",
    "queue_names",
    "check_arguments",
    "delay_of",
    "underlying_type",
]

DELAYED_TYPE = "x-delayed-type"
DELAY = "x-delay"
UNDERLYING = (ExchangeType.DIRECT, ExchangeType.FANOUT, ExchangeType.TOPIC, ExchangeType.HEADERS)
# a delayed exchange's messages wait in a quorum queue of its own (node/vhosts/delayed_messages.py)
BACKING_PREFIX = "amq.delayed."
# ... and, past the node's window of held ones, in a second one, read in laps (delayed_messages.py)
LATER_PREFIX = "amq.delayed-later."
INTERNAL_PREFIXES = (BACKING_PREFIX, LATER_PREFIX)
MAX_DELAY = 2**32 - 1  # ms (about 49.7 days): a longer delay is held this long, as the plugin's timer caps it


def backing_name(exchange: str) -> str:
    """The queue that holds a delayed exchange's delayed messages; routing hands it the
    messages that reach the exchange with a delay (routing/table.py's walk, node/vhosts/vhost.py)."""
    return BACKING_PREFIX + exchange


def later_name(exchange: str) -> str:
    """The queue where a delayed exchange's messages due after its schedulers' horizon wait."""
    return LATER_PREFIX + exchange


def is_internal(queue: str) -> bool:
    """One of the delayed exchanges' own queues: no user deletes, purges or reads it."""
    return queue.startswith(INTERNAL_PREFIXES)


def queue_names(exchange: str) -> tuple[str, str]:
    """A delayed exchange's own queues: its inbox and its later queue."""
    return backing_name(exchange), later_name(exchange)


def check_internal(queue: str, action: str, allowed: bool = False) -> None:
    """A user may not delete, purge or consume from a delayed exchange's queue: its
    messages are the exchange's, and go with it (NotAllowed: a 400 naming why, or the
    AMQP error not-allowed)."""
    if not allowed and is_internal(queue):
        raise NotAllowed(f"cannot {action} queue '{queue}': it holds the delayed messages of an "
                         f"x-delayed-message exchange (deleting the exchange deletes it)")  # fmt: skip


def check_arguments(arguments: Mapping[str, Any]) -> None:
    """Refuses a missing or unknown x-delayed-type, naming it."""
    underlying_type(arguments)


def underlying_type(arguments: Mapping[str, Any]) -> ExchangeType:
    value = arguments.get(DELAYED_TYPE)
    if value is None:
        raise PreconditionFailed(f"Invalid argument, '{DELAYED_TYPE}' is required: the exchange type "
                                 f"the delayed exchange routes as ({', '.join(UNDERLYING)})")  # fmt: skip
    if not isinstance(value, str) or value not in UNDERLYING:
        raise PreconditionFailed(f"Invalid argument, '{DELAYED_TYPE}' must be one of "
                                 f"{', '.join(UNDERLYING)}, got {value!r:.100}")  # fmt: skip
    return ExchangeType(value)


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value == value:  # not NaN
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def delay_of(message: MessageFacts) -> int:
    """The message's delay in ms, 0 for none (route at once)."""
    annotations = getattr(message, "message_annotations", None)
    value = None
    if annotations:
        value = annotations.get(DELAY)
    if value is None:
        props = application_properties(message)
        if props:
            value = props.get(DELAY)
    delay = _as_int(value)
    if delay is None or delay <= 0:
        return 0
    return min(delay, MAX_DELAY)
