"""What applying a quorum-queue command asks of the host: effects, frozen data.

Effects are produced on every member; only the leader acts on the ones that
talk to clients (Confirm, Deliver, CreditReply) and runs dead-lettering. They
come out of `apply` in the order they must be acted on: StoreBodies (a new
Publish batch) before anything, confirms next, then
deliveries (one Deliver per consumer per command, messages in delivery order),
dead letters, and finally credit replies, so a receiver sees the transfers
before the FLOW that accounts for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from queues.base import Outcome

__all__ = [
    "REASON_DELIVERY_LIMIT",
    "REASON_EXPIRED",
    "REASON_MAXLEN",
    "REASON_REJECTED",
    "REASONS",
    "Confirm",
    "ConsumerTimedOut",
    "CreditReply",
    "DeadLetter",
    "Deliver",
    "DeliveredMessage",
    "Dropped",
    "Effect",
    "Outcome",
    "Purged",
    "StoreBodies",
]

REASON_REJECTED = "rejected"
REASON_EXPIRED = "expired"
REASON_MAXLEN = "maxlen"
REASON_DELIVERY_LIMIT = "delivery_limit"
REASONS = (REASON_REJECTED, REASON_EXPIRED, REASON_MAXLEN, REASON_DELIVERY_LIMIT)  # order is the snapshot code


@dataclass(frozen=True, slots=True)
class StoreBodies:
    """The Publish at raft `index` is a new batch: the host keeps the bodies of
    its `count` messages under msg_id(index, position), before it acts on the
    effects that follow (they may deliver them). A batch applied before gets
    no StoreBodies: its bodies are stored already."""

    index: int
    count: int


@dataclass(frozen=True, slots=True)
class Confirm:
    """Publish outcomes for the given correlations (in enqueue order)."""

    correlations: tuple[Any, ...]
    outcome: Outcome  # ACCEPTED or REJECTED (x-overflow reject-publish)


class DeliveredMessage(NamedTuple):
    """One message handed to a consumer."""

    msg_id: int
    delivery_count: int  # failed deliveries so far: the AMQP header delivery-count
    first_acquirer: bool  # never handed out before
    annotations: dict | None  # merged by Modify, None when there are none

    @property
    def redelivered(self) -> bool:
        return not self.first_acquirer


@dataclass(frozen=True, slots=True)
class Deliver:
    """Send these messages to the consumer; one credit was spent per message."""

    consumer_id: Any
    messages: tuple[DeliveredMessage, ...]

    @property
    def msg_ids(self) -> tuple[int, ...]:
        return tuple(d.msg_id for d in self.messages)


@dataclass(frozen=True, slots=True)
class CreditReply:
    """Send a FLOW carrying the link's state as the queue holds it (answers a
    Credit with echo or drain). `available`: ready messages."""

    consumer_id: Any
    delivery_count: int
    credit: int
    available: int
    drain: bool


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """Republish these messages to the dead-letter exchange with `reason`.

    at_least_once False: the messages already left the queue (at-most-once).
    at_least_once True: they wait in the queue's dead-letter holding area
    until a DeadLetterSettled command names them; a new leader finds the ones
    still waiting with `machine.dead_letter_pending(state)`.
    `annotations`: () when no message has any, else aligned with msg_ids
    (a dict or None each): what Modify merged into them."""

    msg_ids: tuple[int, ...]
    reason: str
    at_least_once: bool = False
    annotations: tuple[dict | None, ...] = ()


@dataclass(frozen=True, slots=True)
class Purged:
    """The answer to Purge: how many ready messages were dropped."""

    count: int


@dataclass(frozen=True, slots=True)
class Dropped:
    """`count` messages left for `reason` with no dead-letter exchange to go
    to (RabbitMQ counts them as dead-lettered with strategy "disabled")."""

    reason: str
    count: int


@dataclass(frozen=True, slots=True)
class ConsumerTimedOut:
    """The consumer held `count` messages past the consumer timeout of
    `timeout` ms: they are back in the queue, and the consumer gets nothing
    more. Its node ends the link (the link's Detach returns what it still holds)."""

    consumer_id: Any
    timeout: int
    count: int


Effect = StoreBodies | Confirm | Deliver | CreditReply | DeadLetter | Purged | Dropped | ConsumerTimedOut
