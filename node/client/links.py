"""The two kinds of link a client attaches to the broker.

`Publisher`: the client sends, we receive. Each message is routed, handed to
its queues, and settled with the outcome once every queue has confirmed.
Credit is topped up only while the link has few unconfirmed messages, so a
link to a slow queue slows down alone (REFERENCE.md, flow control).

`QueueConsumer`: we send from one queue. The queue owns the flow state
(credit API v2); this object only turns queue callbacks into transfers and
flows, and client settlements into queue settlements.
"""

from __future__ import annotations

import logging
import struct
from typing import TYPE_CHECKING, Any

from amqp import definitions as d
from amqp.errors import AMQPError, Condition
from amqp.events import Delivery
from amqp.message import MESSAGE_ANNOTATIONS, Message
from amqp.types import Symbol
from node.client import topic_access
from node.client.delivery_bytes import delivery_payload
from queues.base import ACCEPT, REJECT, RELEASE, Outcome, Queue, QueueMessage, Settlement
from queues.volatile import is_volatile
from routing import address
from routing.errors import AddressError, InvalidArgument, RoutingError

if TYPE_CHECKING:
    from amqp.link import Link
    from node.client.connection import ConnectionHandler

log = logging.getLogger("warren.links")
_seq_tag = struct.Struct(">Q")
ACCEPTED = d.Accepted()
RELEASED = d.Released()


def rejected(condition: str, description: str) -> Any:
    return d.Rejected(error=d.Error(condition=condition, description=description))


class Publisher:
    def __init__(self, handler: ConnectionHandler, link: Link, target: Any):
        self.handler = handler
        self.link = link
        self.target = target  # ExchangeTarget, QueueTarget, or None for the anonymous relay
        self.unconfirmed = 0
        cfg = handler.node.config
        self.grant = cfg.publisher_credit
        self.refill_at = self.grant // 2
        self.max_unconfirmed = cfg.max_unconfirmed
        self.routed_to: list[Queue] = []  # the queues of the last message routed: may hold the credit
        # a fixed /queues/NAME target (not a reply address): every message goes to that queue by name
        self.queue_name = target.queue if isinstance(target, address.QueueTarget) and \
            not is_volatile(target.queue) else None  # fmt: skip
        self.fed = False  # took messages in the input being dispatched: top_up once it is all dispatched

    def top_up(self) -> None:
        """Grants credit again once half is used, unless confirms lag or a
        resource alarm holds publishers.

        Not while the connection's input is being dispatched (see `_fed`): the
        engine has already counted every transfer of that input against the
        credit, and `unconfirmed` would not count those not dispatched yet, so a
        grant then could let the client exceed `max_unconfirmed` plus one grant."""
        link = self.link
        # the credit test first: it fails for all but one call in `refill_at`, and runs per message
        if link.link_credit > self.refill_at or self.unconfirmed >= self.max_unconfirmed or self.fed:
            return
        if link.detach_sent or link.detach_received or self.handler.node.alarms.active:
            return
        if self.routed_to and self._held_by_a_queue():
            return
        link.flow(link_credit=self.grant)
        self.handler.schedule_flush()

    def _held_by_a_queue(self) -> bool:
        """A quorum queue holds its publishers while a replica with consumers
        lags (queues/quorum/publish_hold.py): no new credit until it lets go,
        when it calls top_up again."""
        for q in self.routed_to:
            hold = getattr(q, "publish_hold", None)
            if hold is not None and hold.held:
                hold.wait(self.top_up)
                return True
        return False

    def hold(self) -> None:
        """Takes the credit back (a resource alarm): the client stops at once,
        with its link attached and nothing of unknown outcome. What it sent
        under the old credit before this FLOW reached it is still taken
        [2.6.7]; anything past that ends the link (amqp/link.py)."""
        link = self.link
        if link.detach_sent or link.detach_received or not link.attach_sent:
            return
        if link.link_credit > 0:
            link.flow(link_credit=0)

    def _fed(self) -> None:
        """A message of this link was dispatched: its top_up comes after the rest of the input's."""
        if not self.fed:
            self.fed = True
            self.handler.fed_publishers.append(self)

    def on_message(self, delivery: Delivery) -> None:
        node = self.handler.node
        node.metrics.count_received(len(delivery.payload), delivery.settled)
        try:
            msg = Message.from_bytes(delivery.payload)
            if self.queue_name is not None:  # what _route answers for it, without walking the target
                key = self.queue_name
                queues, exchange = [self.handler.vhost.queue(key)], ""
            else:
                queues, exchange, key = self._route(msg)
            queues = self._carbon_copies(msg, queues, exchange, key)
        except RoutingError as e:
            # [per-message `to`] a bad or missing destination rejects the message, the link lives on
            self._settle(delivery, rejected(e.condition, e.description or ""))
            return
        except Exception as e:  # a malformed message: reject it, keep the link
            if not isinstance(e, AMQPError):
                log.exception("publish on %s failed", self.handler.name)
            condition = getattr(e, "condition", Condition.INTERNAL_ERROR)
            self._settle(delivery, rejected(condition, str(e)))
            return
        if not queues:
            node.metrics.unroutable += 1
            if not delivery.settled:
                node.metrics.unroutable_returned += 1
            self._settle(delivery, RELEASED)
            return
        self.routed_to = queues
        if delivery.settled:
            enqueue(node, delivery.payload, msg, queues, exchange, key, None)
        else:
            self.unconfirmed += 1
            enqueue(node, delivery.payload, msg, queues, exchange, key, Confirm(self, delivery, len(queues)).confirm)
        self._fed()

    def _route(self, msg: Message) -> tuple[list[Queue], str, str]:
        vhost = self.handler.vhost
        target = self.target
        if target is None:
            to = msg.to
            if to is None:
                raise AddressError("message has no 'to' address on an anonymous link")
            target = address.parse_target(to)
            # write on the exchange ("" = the default one, for /queues/:queue),
            # as at attach for a fixed target; refused: a rejected outcome
            self.handler.check_access("write", getattr(target, "exchange", ""), "exchange")
        if isinstance(target, address.QueueTarget):
            if is_volatile(target.queue):
                return self._reply_to(target.queue), "", target.queue
            return [vhost.queue(target.queue)], "", target.queue
        key = target.routing_key if target.routing_key is not None else (msg.subject or "")
        if target.exchange == address.DEFAULT_EXCHANGE and is_volatile(key):
            return self._reply_to(key), "", key  # v1's /queue with the reply address as subject
        # a refusal rejects the message with unauthorized-access
        topic_access.check(self.handler, target.exchange, key, "write")
        # sections are decoded only if a headers or consistent hash exchange asks (routing/message_facts.py)
        return vhost.route(target.exchange, key, msg), target.exchange, key

    def _carbon_copies(self, msg: Message, queues: list[Queue], exchange: str, key: str) -> list[Queue]:
        """Sender-selected distribution (RabbitMQ 4.1+): the x-cc annotation's strings are more
        routing keys on the same exchange; a queue any key reaches gets the message once."""
        cc = carbon_copy_keys(msg)
        if cc is None or (exchange == address.DEFAULT_EXCHANGE and is_volatile(key)):
            return queues
        for extra in cc:  # each key is checked as the address's own is
            topic_access.check(self.handler, exchange, extra, "write")
        return self.handler.vhost.route_keys(exchange, [key, *cc], msg)

    def _reply_to(self, name: str) -> list:
        """A Direct Reply-To address (node/vhosts/volatile_queues.py): none at
        all is unroutable (released)."""
        target = self.handler.node.volatile.target(self.handler.vhost.name, name)
        return [] if target is None else [target]

    def _settle(self, delivery: Delivery, state: Any) -> None:
        if not delivery.settled:
            self.link.session.settle(delivery, state)
            self.handler.schedule_flush()
        self._fed()

    def confirmed(self, delivery: Delivery, state: Any) -> None:
        self.unconfirmed -= 1
        self.handler.node.metrics.confirmed += 1
        if self.link.detach_sent or self.handler.engine.closed:
            return
        self.link.session.settle(delivery, state)
        self.handler.schedule_flush()
        self.top_up()

    def outcome_unknown(self, delivery: Delivery, description: str) -> None:
        """No settlement tells "maybe stored": end the link with its deliveries unsettled,
        which the client must treat as unknown outcomes."""
        self.unconfirmed -= 1
        link = self.link
        if link.detach_sent or link.detach_received or self.handler.engine.closed:
            return
        link.detach(closed=True, condition=Condition.DETACH_FORCED, description=description)
        self.handler._link_gone(link)
        self.handler.schedule_flush()


_RANK = {Outcome.ACCEPTED: 0, Outcome.RELEASED: 1, Outcome.REJECTED: 2, Outcome.NO_SPACE: 2, Outcome.UNKNOWN: 3}
_ACCEPTED_OUTCOME = Outcome.ACCEPTED  # a module global: an Enum member read off its class costs ~60 ns, per message


def carbon_copy_keys(msg: Message) -> list[str] | None:
    """The routing keys of a message's x-cc annotation (None: it has none); InvalidArgument
    unless they are strings."""
    if not msg.has(MESSAGE_ANNOTATIONS) or b"x-cc" not in bytes(msg.section_bytes(MESSAGE_ANNOTATIONS)):
        return None
    cc = (msg.message_annotations or {}).get("x-cc")
    if cc is not None and (not isinstance(cc, list) or not all(isinstance(k, str) for k in cc)):
        raise InvalidArgument(f"message annotation x-cc must be a list of strings, got {cc!r:.100}")
    return cc


def enqueue(node: Any, payload: bytes, msg: Message, queues: list[Queue], exchange: str, key: str,
            confirm: Any) -> None:  # fmt: skip
    """Hands a routed message to its queues (`confirm`: a Confirm's, or None when the
    publisher settled it already), with its durability and TTL from its header."""
    node.metrics.routed += 1
    header = msg.header  # durable and ttl read from one look-up of the decoded header
    durable, ttl = (header.durable, header.ttl) if header is not None else (False, None)
    expires_at = node.now_ms() + ttl if ttl is not None else None
    for q in queues:
        q.publish(QueueMessage(0, payload, durable, expires_at, 0, False, exchange, [key]), confirm)


class Confirm:
    """Waits for every queue a message went to; rejected by any means rejected. Its
    publisher (a `Publisher`, or node/client/direct.py's) is told the outcome with
    `confirmed(delivery, state)`, or `outcome_unknown(delivery, why)`."""

    __slots__ = ("publisher", "delivery", "left", "worst")

    def __init__(self, publisher: Publisher, delivery: Delivery, queues: int):
        self.publisher = publisher
        self.delivery = delivery
        self.left = queues
        self.worst = Outcome.ACCEPTED  # unknown by any queue beats rejected beats released beats accepted

    def confirm(self, outcome: Outcome) -> None:
        # identity first: hashing an Enum member runs Python code, and nearly every outcome is accepted
        if outcome is not _ACCEPTED_OUTCOME and _RANK[outcome] > _RANK[self.worst]:
            self.worst = outcome
        self.left -= 1
        if self.left:
            return
        worst = self.worst
        if worst is _ACCEPTED_OUTCOME:
            self.publisher.confirmed(self.delivery, ACCEPTED)
        elif worst is Outcome.UNKNOWN:
            self.publisher.outcome_unknown(self.delivery, "a queue's node was lost with this message in flight:"
                                           " it may or may not have been stored")  # fmt: skip
        else:
            self.publisher.confirmed(self.delivery, refusal(worst))


def refusal(worst: Outcome) -> Any:
    """The delivery state for a message a queue did not take."""
    if worst is Outcome.REJECTED:
        return rejected(Condition.PRECONDITION_FAILED, "queue full (x-overflow reject-publish)")
    if worst is Outcome.NO_SPACE:
        return rejected(Condition.RESOURCE_LIMIT_EXCEEDED,
                         "disk full: the message store could not write (no space left on device)")  # fmt: skip
    return RELEASED  # a queue was deleted under the message


class QueueConsumer:
    """Implements queues.base.Consumer for one sending link."""

    # one per consumer link, 100,000 of them with idle Direct Reply-To requesters
    __slots__ = ("handler", "link", "queue", "presettled", "paused", "_echo_owed")

    def __init__(self, handler: ConnectionHandler, link: Link, queue: Queue):
        self.handler = handler
        self.link = link
        self.queue = queue
        self.presettled = link.snd_settle_mode == d.SND_SETTLED
        # While the connection's writes are paused the queue holds this link
        # at zero credit; the link's own state (engine) keeps what the client
        # granted, handed back to the queue on resume.
        self.paused = handler.writing_paused
        self._echo_owed = False

    def deliver(self, queue: Queue, message: QueueMessage) -> None:
        """Send it, even when the link has no credit left: a replicated queue
        decides a delivery under the credit it knows, and a FLOW that lowered
        the credit may have reached the link first. The queue counted the
        delivery; holding it back here would leave the queue's delivery-count
        ahead of the link's for good, one credit short at every later FLOW."""
        link = self.link
        if link.detach_sent or link.detach_received:
            return  # the detach returns it to the queue
        payload = delivery_payload(message)
        limit = link.remote_max_message_size
        if limit and len(payload) > limit:
            # [2.7.3] "Any attempt to deliver a message larger than this results
            # in a message-size-exceeded link-error": RabbitMQ applies it to the
            # messages it sends too. The detach requeues the message (unless
            # the consumer is pre-settled: at most once).
            link.detach(closed=True, condition=Condition.MESSAGE_SIZE_EXCEEDED,
                        description=f"message size ({len(payload)} bytes) > maximum message size ({limit} bytes)")  # fmt: skip
            self.handler._link_gone(link)
            self.handler.schedule_flush()
            return
        link.send(_seq_tag.pack(message.seq), payload, settled=self.presettled, beyond_credit=True)
        self.handler.node.metrics.count_delivered(self.queue.type_name, bool(message.acquired), self.presettled)
        self.handler.schedule_flush()
        self.handler.delivered(len(payload))

    def credit_reply(self, delivery_count: int, credit: int, available: int, drain: bool) -> None:
        link = self.link
        if link.detach_sent or link.detach_received:
            return
        link.delivery_count = delivery_count
        link.link_credit = credit
        link.available = available
        link.flow(drain=drain)
        self.handler.schedule_flush()

    def on_flow(self, drain: bool, echo: bool) -> None:
        if self.paused:  # the link keeps the new state; the queue gets it on resume
            self._echo_owed = self._echo_owed or echo
            return
        link = self.link
        self.queue.credit(self, link.delivery_count, link.link_credit, drain, echo)

    def pause(self) -> None:
        """The client does not read: the queue stops feeding this link (no
        FLOW goes to the client; its credit stands)."""
        if self.paused:
            return
        self.paused = True
        link = self.link
        if not (link.detach_sent or link.detach_received):
            self.queue.credit(self, link.delivery_count, 0, False, False)

    def resume(self) -> None:
        if not self.paused:
            return
        self.paused = False
        link = self.link
        if not (link.detach_sent or link.detach_received):
            echo, self._echo_owed = self._echo_owed, False
            self.queue.credit(self, link.delivery_count, link.link_credit, link.drain, echo)

    def on_settled(self, deliveries: list[Delivery]) -> None:
        """Client settlements, already in delivery-id order; consecutive ones
        with the same outcome go to the queue as one call."""
        batch: list[int] = []
        current: Settlement | None = None
        for delivery in deliveries:
            settlement = settlement_of(delivery.state, delivery.remote_settled)
            if settlement is None:
                continue
            if settlement != current and batch:
                self.queue.settle(self, batch, current)
                batch = []
            current = settlement
            batch.append(_seq_tag.unpack(delivery.tag)[0])
        if batch:
            self.queue.settle(self, batch, current)
        self.handler.node.metrics.count_acknowledged(self.queue.type_name, len(deliveries))

    def detached(self) -> None:
        self.queue.detach_consumer(self)

    def queue_deleted(self) -> None:
        """As RabbitMQ: the consumer's link is detached with resource-deleted."""
        self.queue_unavailable(f"queue '{self.queue.name}' in vhost '{self.queue.vhost}' was deleted",
                               Condition.RESOURCE_DELETED)  # fmt: skip

    def timed_out(self, description: str) -> None:
        """Held a message past the consumer timeout (the queue took it back): the link is
        detached with resource-limit-exceeded, which a client can act on (re-attach and
        settle sooner); RabbitMQ 4.3 lists AMQP 1.0's action as planned (docs/architecture.md)."""
        self.queue_unavailable(description, Condition.RESOURCE_LIMIT_EXCEEDED)

    def queue_unavailable(self, description: str, condition: str = Condition.DETACH_FORCED) -> None:
        """The queue cannot serve this link any more (its node is unreachable): detach it."""
        link = self.link
        if not (link.detach_sent or link.detach_received):
            link.detach(closed=True, condition=condition, description=description)
            self.handler._link_gone(link)
            self.handler.schedule_flush()


def settlement_of(state: Any, settled: bool) -> Settlement | None:
    kind = type(state)
    if kind is d.Accepted:
        return ACCEPT
    if kind is d.Rejected:
        return REJECT
    if kind is d.Released:
        return RELEASE
    if kind is d.Modified:
        annotations = state.message_annotations
        return Settlement(
            "modified",
            bool(state.delivery_failed),
            bool(state.undeliverable_here),
            {Symbol(k) if type(k) is str else k: v for k, v in annotations.items()} if annotations else None,
        )
    if settled:
        return ACCEPT  # settled with no outcome: the receiver is done with it
    return None
