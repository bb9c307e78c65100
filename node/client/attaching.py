"""Links a client attaches: publishers to an exchange or queue address,
consumers from a queue, each checked against the user's permissions; v1
addresses whose queue must be declared first answer once it exists, and so
do dynamic sources that get a classic queue; a dynamic source asking for a
volatile queue (Direct Reply-To) is answered at once (node/client/termini.py)."""

from __future__ import annotations

import base64
import logging
import os
from typing import TYPE_CHECKING, Any

from amqp import definitions as d
from amqp.errors import Condition
from node.client import termini, v1_termini
from node.client.links import Publisher, QueueConsumer
from node.client.management import node_link
from node.client.stream_source import stream_read_spec
from node.vhosts.vhost import ResourceLocked
from queues.arguments import consumer_priority
from queues.base import QueueArgumentError
from queues.volatile import is_volatile
from routing import address
from routing.delayed import check_internal
from routing.errors import InvalidArgument, NotFound, RoutingError

if TYPE_CHECKING:
    pass

log = logging.getLogger("warren.connection")
CLOSE_GRACE_S = 2.0  # how long a forced close waits for the client's CLOSE


class LinkAttaching:
    """The ATTACH half of `ConnectionHandler` (node/client/connection.py)."""

    def _on_attach(self, link: Any, attach: Any) -> None:
        try:
            if attach.rcv_settle_mode == d.RCV_SECOND and attach.snd_settle_mode != d.SND_SETTLED:
                # RabbitMQ 4 refuses the link: it settles first, always (mode second
                # is accepted only where the sender settles everything itself)
                link.refuse(Condition.NOT_IMPLEMENTED, "rcv-settle-mode second not supported")
                return
            if node_link.is_management(link, attach):
                node_link.attach(self, link, attach)
            elif link.is_sender:
                self._attach_consumer(link, attach)
            else:
                self._attach_publisher(link, attach)
        except RoutingError as e:
            link.refuse(e.condition, e.description)

    def _attach_publisher(self, link: Any, attach: Any) -> None:
        termini.check_target(attach.target)
        target_addr = getattr(attach.target, "address", None)
        target = None
        if target_addr is not None:
            target = address.parse_link_target(target_addr, self.node.config.permit_amqp_address_v1)
            if v1_termini.creates_something(target):
                self._attach_when_prepared(link, attach.target, lambda: v1_termini.prepare(self, target, attach.target),
                                           lambda _: self._attach_publisher_to(link, attach, target))  # fmt: skip
                return
        self._attach_publisher_to(link, attach, target)

    def _attach_publisher_to(self, link: Any, attach: Any, target: Any) -> None:
        if isinstance(target, address.QueueTarget):
            self.check_access("write", "", "exchange")  # the default exchange, as "amq.default"
            if not is_volatile(target.queue):
                self.vhost.queue(target.queue)  # raises not-found
            elif not self.node.volatile.exists(self.vhost.name, target.queue):
                raise NotFound(f"no queue '{target.queue}' in vhost '{self.vhost.name}'")  # its requester is gone
        elif target is not None:
            self.check_access("write", target.exchange, "exchange")
            # the default exchange is named only by v1's /queue
            if target.exchange != address.DEFAULT_EXCHANGE and self.vhost.routing.exchange(target.exchange) is None:
                raise NotFound(f"no exchange '{target.exchange}' in vhost '{self.vhost.name}'")
        link.max_message_size = self.node.config.max_message_size
        # RabbitMQ settles publishes itself: rcv-settle-mode first only
        link.attach(
            source=attach.source,
            target=attach.target,
            snd_settle_mode=attach.snd_settle_mode,
            rcv_settle_mode=d.RCV_FIRST,
            max_message_size=self.node.config.max_message_size,
        )
        publisher = Publisher(self, link, target)
        link.context = publisher
        self.node.metrics.links += 1
        publisher.top_up()

    def _attach_consumer(self, link: Any, attach: Any) -> None:
        if termini.is_dynamic(attach.source):
            if termini.wants_volatile_queue(attach.source):
                self._attach_volatile(link, attach)
            else:
                self._attach_when_prepared(link, attach.source, lambda: self._declare_dynamic(attach.source),
                                           lambda queue: self._attach_consumer_late(link, attach, queue))  # fmt: skip
            return
        source_addr = getattr(attach.source, "address", None)
        source = address.parse_link_source(source_addr, self.node.config.permit_amqp_address_v1)
        if v1_termini.creates_something(source):
            self._attach_when_prepared(link, attach.source, lambda: v1_termini.prepare(self, source, attach.source),
                                       lambda queue: self._attach_consumer_late(link, attach, queue))  # fmt: skip
            return
        self._attach_consumer_to(link, attach, source.queue)

    def _attach_volatile(self, link: Any, attach: Any) -> None:
        """Direct Reply-To: the link is the queue, named now, never in the
        metadata store. Replies go pre-settled whatever the client asked."""
        queue = self.node.volatile.create(self.vhost.name)
        link.attach(
            source=termini.dynamic_source(attach.source, address.QUEUES_PREFIX + queue.name),
            target=attach.target,
            snd_settle_mode=d.SND_SETTLED,
            rcv_settle_mode=d.RCV_FIRST,
            initial_delivery_count=0,
        )
        consumer = QueueConsumer(self, link, queue)
        link.context = consumer
        self.node.metrics.links += 1
        queue.attach_consumer(consumer)

    async def _declare_dynamic(self, source: Any) -> str:
        """A dynamic source without the volatile capability: an exclusive
        auto-delete classic queue the broker names (configure permission on it)."""
        queue = "amq.gen-" + base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
        self.check_access("configure", queue, "queue")
        await self.vhost.declare_queue(queue, False, self, True, {}, self.user or "")
        return queue

    def _attach_consumer_late(self, link: Any, attach: Any, queue_name: str) -> None:
        self._attach_consumer_to(link, attach, queue_name)
        if link.link_credit or link.drain:
            link.context.on_flow(link.drain, False)  # a FLOW that came while the ATTACH waited

    def _attach_consumer_to(self, link: Any, attach: Any, queue_name: str) -> None:
        self.check_access("read", queue_name, "queue")
        check_internal(queue_name, "consume from")
        queue = self.vhost.queue(queue_name)
        if queue.exclusive_owner is not None and queue.exclusive_owner is not self:
            raise ResourceLocked(f"cannot obtain exclusive access to locked queue '{queue.name}' in vhost "
                                 f"'{self.vhost.name}'")  # fmt: skip
        # None unless the queue is a stream
        read_spec = stream_read_spec(queue, attach.source, self.node.config.stream_sql_filter_max_length)
        try:
            priority = consumer_priority(attach.properties, read_spec is not None)
        except QueueArgumentError as e:
            raise InvalidArgument(str(e)) from None
        if termini.is_dynamic(attach.source):
            source = termini.dynamic_source(attach.source, address.QUEUES_PREFIX + address.quote_segment(queue_name))
        else:
            source = termini.reply_source(attach.source, read_spec.applied if read_spec else ())
        link.attach(
            source=source,
            target=attach.target,
            snd_settle_mode=attach.snd_settle_mode,
            rcv_settle_mode=attach.rcv_settle_mode,  # echoed, as RabbitMQ (second only with settled sends)
            initial_delivery_count=0,
        )
        consumer = QueueConsumer(self, link, queue)
        link.context = consumer
        self.node.metrics.links += 1
        if read_spec is not None:
            queue.attach_reader(consumer, read_spec)
            return
        queue.attach_consumer(consumer, priority)

    def _attach_when_prepared(self, link: Any, terminus: Any, prepare_queue: Any, finish: Any) -> None:
        """A v1 address that declares a queue (node/client/v1_termini.py), or
        a dynamic source: the ATTACH is answered once the metadata store has
        the queue `prepare_queue()` declares, by `finish(queue name)`, unless
        the link, its session or the connection went away meanwhile."""

        async def prepare() -> None:
            try:
                queue = await prepare_queue()
                if self._still_attaching(link):
                    finish(queue)
            except RoutingError as e:
                if self._still_attaching(link):
                    link.refuse(e.condition, e.description)
            except Exception:  # a bug of ours costs the link
                log.exception("attaching %r on %s failed", getattr(terminus, "address", None), self.name)
                if self._still_attaching(link):
                    link.refuse(Condition.INTERNAL_ERROR, "internal error")
            self.schedule_flush()

        task = self.node.loop.create_task(prepare())
        self._preparing.add(task)
        task.add_done_callback(self._preparing.discard)

    def _still_attaching(self, link: Any) -> bool:
        return not (self._closed or self.engine.closed or link.attach_sent or link.detach_received
                    or link.session.end_sent or link.session.end_received)  # fmt: skip
