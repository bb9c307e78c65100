"""What an address of format v1 creates before its link can attach, as
RabbitMQ 4 does while its deprecated feature `amqp_address_v1` is permitted
(routing/address.py parses the addresses; docs "AMQP 1.0", "Address v1"):

- `/queue/:queue` (target or source) declares the queue if it is missing:
  a classic queue, durable only when the terminus asks for it (`durable`
  other than none), never auto-deleted, no arguments. A queue that exists
  is used as it is, whatever its type and properties.
- A source `/exchange/:exchange/:key` or `/topic/:key` declares a queue
  named `amq.gen-...` the same way, binds it to the exchange with the key,
  and the link consumes from it. RabbitMQ never deletes that queue either.

Permissions are those RabbitMQ checks, in its order: configure on a queue
it declares; for a binding, write on the queue and read on the exchange
(an absent exchange is not-found before any of that), then, on a topic
exchange, topic read on the binding key (node/client/topic_access.py). The link itself then
needs what a v2 link needs (write on the exchange, read on the queue).
Declarations go through the metadata store, so these are coroutines: the
connection answers the ATTACH once they are done.
"""

from __future__ import annotations

import base64
import os
from typing import TYPE_CHECKING, Any

from node.client import topic_access
from routing.address import ExchangeSource, QueueSource, QueueTarget, Source, Target
from routing.errors import NotFound, PreconditionFailed

if TYPE_CHECKING:
    from node.client.connection import ConnectionHandler

_DURABILITY_NONE = 0  # terminus-durability [3.5.5], the default


def creates_something(address: Target | Source) -> bool:
    """Whether attaching to this address declares a queue first."""
    return isinstance(address, ExchangeSource) or (isinstance(address, (QueueTarget, QueueSource)) and address.declare)


async def prepare(handler: ConnectionHandler, address: Target | Source, terminus: Any) -> str | None:
    """Declares (and binds) what the address needs; returns the queue a
    source consumes from (None for a target). RoutingError on refusal."""
    durable = (getattr(terminus, "durable", None) or _DURABILITY_NONE) != _DURABILITY_NONE
    if isinstance(address, ExchangeSource):
        return await _bound_queue(handler, address, durable)
    if isinstance(address, (QueueTarget, QueueSource)) and address.declare:
        await _declare(handler, address.queue, durable)
    return address.queue if isinstance(address, QueueSource) else None


async def _bound_queue(handler: ConnectionHandler, source: ExchangeSource, durable: bool) -> str:
    vhost = handler.vhost
    if vhost.routing.exchange(source.exchange) is None:
        raise NotFound(f"no exchange '{source.exchange}' in vhost '{vhost.name}'")
    queue = "amq.gen-" + base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
    await _declare(handler, queue, durable)
    handler.check_access("write", queue, "queue")
    handler.check_access("read", source.exchange, "exchange")
    topic_access.check(handler, source.exchange, source.binding_key, "read")  # a topic exchange: the binding key
    await vhost.bind(source.exchange, "queue", queue, source.binding_key)
    return queue


async def _declare(handler: ConnectionHandler, queue: str, durable: bool) -> None:
    handler.check_access("configure", queue, "queue")
    vhost = handler.vhost
    if queue in vhost.queues:
        return
    try:
        await vhost.declare_queue(queue, durable, None, False, {}, handler.user or "")
    except PreconditionFailed:
        pass  # declared meanwhile by someone else, otherwise: it is used as it is

