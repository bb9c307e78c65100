"""What the broker answers about the source and target a client attaches
with, beyond the address itself.

- A source's filters are echoed in the reply ATTACH only when the broker
  applies them [3.5.3: "the receiving endpoint sets the filter to the
  filters actually in place"]. Warren applies none on classic and quorum
  queues, so the reply carries none and the client knows it gets every
  message.
- A coordinator target asks for transactions [4.2]; Warren, like RabbitMQ
  4, has none, and refuses the link with amqp:not-implemented instead of
  taking it for an anonymous relay.
"""

from __future__ import annotations

from typing import Any

from amqp import definitions as d
from amqp.errors import Condition
from routing.errors import RoutingError

__all__ = ["TransactionsNotSupported", "check_target", "reply_source"]


class TransactionsNotSupported(RoutingError):
    condition_code = Condition.NOT_IMPLEMENTED


def check_target(target: Any) -> None:
    """Raises TransactionsNotSupported for a transaction coordinator."""
    if isinstance(target, d.Coordinator):
        raise TransactionsNotSupported("Transactions not supported")


def reply_source(source: Any) -> Any:
    """The source for the reply ATTACH: the client's, without the filters
    Warren does not apply (all of them, for now)."""
    if not isinstance(source, d.Source) or not source.filter:
        return source
    fields = {f.name: getattr(source, f.name) for f in d.Source.FIELDS}
    fields["filter"] = None
    return d.Source(**fields)
