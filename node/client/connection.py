"""One client connection: the asyncio protocol around the sans-I/O engine.

The reader feeds bytes to the engine and dispatches its events; the writer
gathers everything every session and queue produced during a loop turn and
flushes it with one socket write at the end of that turn (REFERENCE.md,
connection model).
"""

from __future__ import annotations

import asyncio
import logging
import platform
from typing import TYPE_CHECKING, Any

from amqp import definitions as d
from amqp import events as ev
from amqp.connection import SERVER, Connection
from amqp.errors import Condition
from amqp.types import Symbol
from node import __version__
from node.client import termini
from node.client.links import Publisher, QueueConsumer
from node.client.management import node_link
from node.client.management.node_link import ManagementLink, ReplyLink
from node.vhosts.vhost import ResourceLocked
from routing import address
from routing.errors import NotFound, RoutingError
from routing.permissions import check as check_permission

if TYPE_CHECKING:
    from node.broker import Broker

log = logging.getLogger("warren.connection")
CLOSE_GRACE_S = 2.0  # how long a forced close waits for the client's CLOSE


class ConnectionHandler(asyncio.Protocol):
    def __init__(self, node: Broker):
        self.node = node
        cfg = node.config
        self.engine = Connection(
            SERVER,
            container_id=cfg.node_name,
            max_frame_size=cfg.max_frame_size,
            channel_max=cfg.channel_max,
            idle_timeout=cfg.idle_timeout or None,
        )
        self.transport: asyncio.Transport | None = None
        self.user: str | None = None
        self.vhost: Any = None
        self.peer = ("?", 0)
        self.name = ""
        self._flush_scheduled = False
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False
        self.management_pairs: dict | None = None  # node/client/management/node_link.py, made on first use

    # ------------------------------------------------------------ asyncio side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername") or ("?", 0)
        self.peer = (peer[0], peer[1])
        local = transport.get_extra_info("sockname") or ("?", 0)
        self.name = f"{self.peer[0]}:{self.peer[1]} -> {local[0]}:{local[1]}"
        self.node.connections.add(self)
        self.node.metrics.connections_opened += 1
        self._arm_timer()

    def data_received(self, data: bytes) -> None:
        try:
            for event in self.engine.receive_data(data):
                self._dispatch(event)
        except Exception:  # a bug of ours must cost one connection, never the node
            log.exception("internal error on connection %s", self.name)
            self.engine.close(Condition.INTERNAL_ERROR, "internal error")
        self._flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cleanup()

    def schedule_flush(self) -> None:
        if not self._flush_scheduled and not self._closed:
            self._flush_scheduled = True
            self.node.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self.transport is None or self._closed:
            return
        data = self.engine.data_to_send()
        if data:
            self.transport.write(data)
        if self.engine.closed:
            self._closed = True
            self.transport.close()

    def _arm_timer(self) -> None:
        deadline = self.engine.tick()
        if deadline is None:
            if not self.engine.closed:
                self._timer = self.node.loop.call_later(1.0, self._on_timer)
            return
        self._timer = self.node.loop.call_later(max(0.0, deadline - self.engine.clock()) + 0.001, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self._closed:
            return
        self._arm_timer()
        self._flush()

    def force_close(self, condition: str, description: str) -> None:
        """Operator-initiated close (shutdown, management). A client that does
        not answer our CLOSE within a grace period loses its socket."""
        if not self.engine.closed:
            self.engine.close(condition, description)
        self._flush()
        if not self._closed:
            self.node.loop.call_later(CLOSE_GRACE_S, self._abort)

    def _abort(self) -> None:
        if not self._closed and self.transport is not None:
            self._closed = True
            self.transport.abort()

    def _cleanup(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._closed = True
        if self not in self.node.connections:
            return
        self.node.connections.discard(self)
        for session in list(self.engine.sessions.values()):
            self._session_gone(session)
        if self.vhost is not None:
            self.vhost.connection_closed(self)
        self.node.owners.forget(self)

    # ------------------------------------------------------------ engine events

    def _dispatch(self, event: Any) -> None:
        kind = type(event)
        if kind is ev.MessageReceived:
            event.link.context.on_message(event.delivery)
        elif kind is ev.DeliveriesUpdated:
            self._on_settled(event.deliveries)
        elif kind is ev.LinkFlow:
            context = event.link.context
            if isinstance(context, QueueConsumer):
                context.on_flow(event.drain, event.echo)
            elif isinstance(context, ReplyLink):
                context.on_flow(event.drain, event.echo)
        elif kind is ev.LinkAttached:
            self._on_attach(event.link, event.attach)
        elif kind is ev.LinkDetached:
            self._link_gone(event.link)
        elif kind is ev.SessionBegun:
            event.session.begin(incoming_window=self.node.config.session_window, handle_max=self.node.config.handle_max)
            if self.node.alarms.active:
                event.session.block()
        elif kind is ev.SessionEnded:
            self._session_gone(event.session)
            error = event.error
            if not event.remote and error is not None and error.condition == Condition.WINDOW_VIOLATION \
                    and self.node.alarms.active:  # fmt: skip
                # a publisher that ignores the shut window of an alarm is cut off (REFERENCE.md)
                self.engine.close(Condition.RESOURCE_LIMIT_EXCEEDED, "publishing while a resource alarm is raised")
        elif kind is ev.SaslInitReceived:
            self._on_sasl(event)
        elif kind is ev.ConnectionOpened:
            self._on_open(event.open)
        elif kind is ev.ConnectionClosed:
            if event.error is not None and not event.remote:
                log.info("closing connection %s: %s %s", self.name, event.error.condition, event.error.description)
        elif kind is ev.DeliveryAborted:
            pass  # nothing was routed yet

    def _on_sasl(self, event: ev.SaslInitReceived) -> None:
        user = self.node.auth.authenticate(event.mechanism, event.initial_response, self.peer[0])
        self.user = user
        self.engine.sasl_outcome(user is not None)
        if user is None:
            log.info("authentication failed on %s (%s)", self.name, event.mechanism)

    def _on_open(self, open_: Any) -> None:
        hostname = open_.hostname or ""
        vhost_name = hostname[len("vhost:") :] if hostname.startswith("vhost:") else "/"
        vhost = self.node.vhosts.get(vhost_name)
        if vhost is None:
            return self._refuse_open(f"virtual host '{vhost_name}' does not exist")
        if self.node.auth.permission(self.user, vhost_name) is None:
            return self._refuse_open(f"access to vhost '{vhost_name}' refused for user '{self.user}'")
        self.engine.open(properties=self.node.server_properties(), offered_capabilities=OFFERED_CAPABILITIES)
        self.vhost = vhost

    def _refuse_open(self, reason: str) -> None:
        """A missing or forbidden vhost: as RabbitMQ 4 does, no OPEN and no
        CLOSE, the socket is closed. An OPEN+CLOSE pair would be the polite
        [2.4.1] answer, but RabbitMQ's own client takes a remote CLOSE for a
        dropped connection and retries with back-off for minutes, while a
        closed socket fails its dial at once."""
        log.info("refusing connection %s (user %s): %s", self.name, self.user, reason)
        self._closed = True
        if self.transport is not None:
            self.transport.write(self.engine.data_to_send())  # the SASL outcome and protocol header
            self.transport.close()

    def _on_attach(self, link: Any, attach: Any) -> None:
        try:
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
            target = address.parse_target(target_addr)
            if isinstance(target, address.QueueTarget):
                self.check_access("write", "", "exchange")  # the default exchange, as "amq.default"
                self.vhost.queue(target.queue)  # raises not-found
            else:
                self.check_access("write", target.exchange, "exchange")
                if self.vhost.routing.exchange(target.exchange) is None:
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
        source_addr = getattr(attach.source, "address", None)
        source = address.parse_source(source_addr)
        self.check_access("read", source.queue, "queue")
        queue = self.vhost.queue(source.queue)
        if queue.exclusive_owner is not None and queue.exclusive_owner is not self:
            raise ResourceLocked(f"cannot obtain exclusive access to locked queue '{queue.name}' in vhost "
                                 f"'{self.vhost.name}'")  # fmt: skip
        link.attach(
            source=termini.reply_source(attach.source),
            target=attach.target,
            snd_settle_mode=attach.snd_settle_mode,
            rcv_settle_mode=d.RCV_FIRST,
            initial_delivery_count=0,
        )
        consumer = QueueConsumer(self, link, queue)
        link.context = consumer
        self.node.metrics.links += 1
        priority = 0
        props = attach.properties or {}
        if "rabbitmq:priority" in props:
            priority = int(props["rabbitmq:priority"])
        queue.attach_consumer(consumer, priority)

    def _on_settled(self, deliveries: list) -> None:
        by_link: dict[Any, list] = {}
        for delivery in deliveries:
            by_link.setdefault(delivery.link, []).append(delivery)
        for link, items in by_link.items():
            if isinstance(link.context, QueueConsumer):
                link.context.on_settled(items)

    def _link_gone(self, link: Any) -> None:
        context, link.context = link.context, None
        if context is not None:
            self.node.metrics.links -= 1
            if isinstance(context, QueueConsumer):
                context.detached()
            elif isinstance(context, ManagementLink):
                context.detached()

    def check_access(self, kind: str, resource: str, what: str) -> None:
        """Raises AccessRefused (unauthorized-access) unless the user may
        `kind` (configure, write, read) the resource in this vhost, as its
        permission entry reads now (routing/permissions.py)."""
        name = self.vhost.name
        check_permission(self.node.auth.permission(self.user, name), self.user, name, kind, resource, what)

    def _session_gone(self, session: Any) -> None:
        for link in list(session.links.values()):
            self._link_gone(link)

    def block(self) -> None:
        for session in self.engine.sessions.values():
            if session.begin_sent:
                session.block()
        self.schedule_flush()

    def unblock(self) -> None:
        for session in self.engine.sessions.values():
            if session.begin_sent:
                session.unblock()
        self.schedule_flush()

    def info(self) -> dict:
        return {
            "name": self.name,
            "user": self.user,
            "vhost": self.vhost.name if self.vhost else None,
            "protocol": "AMQP 1-0",
            "peer_host": self.peer[0],
            "peer_port": self.peer[1],
            "channels": len(self.engine.sessions),
        }


# Link Pair CS 01 (the /management node) and the anonymous relay (a null
# target, each message's `to` naming its destination), as RabbitMQ offers them.
OFFERED_CAPABILITIES = [Symbol("LINK_PAIR_V1_0"), Symbol("ANONYMOUS-RELAY")]


def server_properties(cfg: Any) -> dict:
    return {
        Symbol("product"): cfg.product,
        Symbol("version"): f"{cfg.product_version}+warren.{__version__}",
        Symbol("warren-version"): __version__,
        Symbol("platform"): f"Python {platform.python_version()}",
        Symbol("node"): cfg.node_name,
    }
