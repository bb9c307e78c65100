"""What the broker answers about the source and target a client attaches
with, beyond the address itself.

- A source's filters are echoed in the reply ATTACH only when the broker
  applies them [3.5.3: "the receiving endpoint sets the filter to the
  filters actually in place"]. Warren applies none on classic and quorum
  queues, so the reply carries none and the client knows it gets every
  message; a stream applies its offset spec and filter values.
- A coordinator target asks for transactions [4.2]; Warren, like RabbitMQ
  4, has none, and refuses the link with amqp:not-implemented instead of
  taking it for an anonymous relay.
- A dynamic source [3.5.3] asks the broker to make a node and name it in
  the reply ATTACH: a volatile queue (Direct Reply-To) when the source
  lists the capability `rabbitmq:volatile-queue`, else an exclusive
  auto-delete classic queue, as RabbitMQ 4.2. A dynamic target is refused
  with amqp:not-implemented, RabbitMQ's answer.
"""

from __future__ import annotations

from typing import Any

from amqp import definitions as d
from amqp.errors import Condition
from routing.errors import RoutingError

__all__ = ["DynamicTargetNotSupported", "TransactionsNotSupported", "check_target", "dynamic_source", "is_dynamic",
           "reply_source", "wants_volatile_queue"]

VOLATILE_QUEUE = "rabbitmq:volatile-queue"


class TransactionsNotSupported(RoutingError):
    condition_code = Condition.NOT_IMPLEMENTED


class DynamicTargetNotSupported(RoutingError):
    condition_code = Condition.NOT_IMPLEMENTED


def check_target(target: Any) -> None:
    """Raises TransactionsNotSupported for a transaction coordinator."""
    if isinstance(target, d.Coordinator):
        raise TransactionsNotSupported("Transactions not supported")
    if isinstance(target, d.Target) and target.dynamic:
        raise DynamicTargetNotSupported("Dynamic targets not supported")


def is_dynamic(source: Any) -> bool:
    return isinstance(source, d.Source) and bool(source.dynamic)


def wants_volatile_queue(source: Any) -> bool:
    """The source lists `rabbitmq:volatile-queue` among its capabilities
    (a single symbol or an array of them [1.3])."""
    capabilities = source.capabilities
    if capabilities is None:
        return False
    if isinstance(capabilities, str):
        capabilities = [capabilities]
    return any(str(c) == VOLATILE_QUEUE for c in capabilities)


def dynamic_source(source: Any, address: str) -> Any:
    """The reply ATTACH's source for a dynamic one: the client's, naming the
    node the broker made, without filters (none applies)."""
    fields = {f.name: getattr(source, f.name) for f in d.Source.FIELDS}
    fields["address"] = address
    fields["filter"] = None
    return d.Source(**fields)


def reply_source(source: Any, applied: tuple = ()) -> Any:
    """The source for the reply ATTACH: the client's, with only the filters
    Warren applies (`applied`: their keys; a stream's, node/client/stream_source.py)."""
    if not isinstance(source, d.Source) or not source.filter:
        return source
    fields = {f.name: getattr(source, f.name) for f in d.Source.FIELDS}
    kept = {k: v for k, v in source.filter.items() if k in applied}
    fields["filter"] = kept or None
    return d.Source(**fields)
