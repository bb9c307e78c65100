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
from typing import TYPE_CHECKING, Any, Protocol

from amqp import events as ev
from amqp.connection import SERVER, Connection
from amqp.errors import Condition
from amqp.types import Symbol
from node import __version__
from node.client.attaching import LinkAttaching
from node.client.back_pressure import WriteBackPressure
from node.client.handing_over import ConnectionHandover, ConnectionMover, HandedOver, TakenOver
from node.client.ingest import IngestBudget
from node.client.links import Publisher, QueueConsumer
from node.client.management.node_link import ManagementLink, ReplyLink
from node.client.opening import ConnectionOpening
from node.client.tls import distinguished_name, login_name
from node.client.tokens import TokenCredentials
from routing.permissions import check as check_permission

if TYPE_CHECKING:
    from metadata.projections import Projections
    from node.client.login import LoginService
    from node.cluster.node_names import NodeNames
    from node.config import Config
    from node.ops.alarms import Alarms
    from node.ops.metrics import NodeMetrics
    from node.vhosts.local_queues import Owners
    from node.vhosts.vhost import VHost
    from node.vhosts.volatile_queues import VolatileQueues
    from routing.users import Authenticator

log = logging.getLogger("warren.connection")
CLOSE_GRACE_S = 2.0  # how long a forced close waits for the client's CLOSE


class ClientNode(Protocol):
    """What a client connection and its links use of their node (node/broker.py provides it)."""

    node_id: str
    config: Config
    loop: asyncio.AbstractEventLoop
    connections: set[ConnectionHandler]  # every open connection: a connection adds and removes itself
    vhosts: dict[str, VHost]
    projections: Projections
    owners: Owners  # of exclusive queues
    volatile: VolatileQueues  # Direct Reply-To
    node_names: NodeNames | None  # members' node names (the /management node's queue replies)
    auth: Authenticator
    logins: LoginService
    alarms: Alarms  # publishers wait while one is active
    metrics: NodeMetrics
    handover: ConnectionMover | None  # with several workers: moves a connection to its queue's worker

    def now_ms(self) -> int: ...

    def server_properties(self) -> dict: ...


class ConnectionHandler(ConnectionOpening, LinkAttaching, ConnectionHandover, WriteBackPressure, TokenCredentials,
                        asyncio.Protocol):  # fmt: skip
    def __init__(self, node: ClientNode, taken: TakenOver | None = None):
        """`taken`: a connection another worker of this node accepted and handed over."""
        self.node = node
        cfg = node.config
        self.engine = Connection(
            SERVER,
            container_id=cfg.node_name,
            max_frame_size=cfg.max_frame_size,
            # as RabbitMQ 4: at most session_max sessions, so channels 0 .. session_max - 1 [2.7.1]
            channel_max=max(0, min(cfg.channel_max, cfg.session_max - 1)),
            idle_timeout=cfg.idle_timeout or None,
            handle_max=cfg.handle_max,
            sasl_mechanisms=[m for m in cfg.auth_mechanisms if m != "EXTERNAL"],  # see _tls_accepted
        )
        self.transport: asyncio.Transport | None = None
        self.user: str | None = None
        self.tls = False  # accepted on the AMQPS listener
        self.certificate_user: str | None = None  # who a verified client certificate names (SASL EXTERNAL)
        self.peer_cert_subject: str | None = None  # that certificate's subject, RFC 4514
        self.vhost: Any = None
        self.peer = ("?", 0)
        self.name = ""
        self._flush_scheduled = False
        self._timer: asyncio.TimerHandle | None = None
        self._handshake_timer: asyncio.TimerHandle | None = None
        self._closed = False
        self._login: asyncio.Task | None = None  # the SASL check in progress
        # Back-pressure on writes: while the client does not take what we
        # send, its consumers stop being fed and deliveries wait in their
        # queues (`writing_paused`). Paused by the transport (its buffer passed
        # max_write_buffer) or by what the engine holds for the client.
        self.writing_paused = False
        self._transport_paused = False
        self._holding_too_much = False
        self._unflushed = 0  # delivery bytes since the last write
        self._write_chunk = max(1, cfg.max_write_buffer // 4)
        self.ingest: IngestBudget | None = None  # bytes taken in per loop turn, bounded (made with the transport)
        self.management_pairs: dict | None = None  # node/client/management/node_link.py, made on first use
        self._preparing: set[asyncio.Task] = set()  # ATTACHes waiting for a v1 address's declaration
        self.fed_publishers: list[Publisher] = []  # took messages from the input being dispatched
        # what the HTTP API shows (RabbitMQ's connection fields): socket reads and writes, and their bytes
        self.connected_at = 0
        self.recv_oct = self.recv_cnt = self.send_oct = self.send_cnt = 0
        # what the client sent while the connection may still move to another worker
        # (node/client/handing_over.py), and what one moved here brought along
        self._kept: list[bytes] | None = None
        self._kept_bytes = 0
        self._taken = taken

    # ------------------------------------------------------------ asyncio side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.connected_at = self.node.now_ms()
        limit = self.node.config.max_write_buffer
        transport.set_write_buffer_limits(high=limit, low=limit // 2)  # type: ignore[attr-defined]
        peer = transport.get_extra_info("peername") or ("?", 0)
        self.peer = (peer[0], peer[1])
        local = transport.get_extra_info("sockname") or ("?", 0)
        self.name = f"{self.peer[0]}:{self.peer[1]} -> {local[0]}:{local[1]}"
        if self.node.config.ingest_per_turn > 0:
            self.ingest = IngestBudget(self.node.loop, self.transport, self.node.config.ingest_per_turn)
        if transport.get_extra_info("ssl_object") is not None:
            self._tls_accepted(transport)
        self.node.connections.add(self)
        self._arm_timer()
        if self.node.config.handshake_timeout > 0:
            self._handshake_timer = self.node.loop.call_later(self.node.config.handshake_timeout,
                                                              self._handshake_expired)  # fmt: skip
        if self._taken is not None:
            self._replay_taken(self._taken)
            return
        self.node.metrics.connections_opened += 1
        if self.node.handover is not None and not self.tls:
            self._kept = []

    def _tls_accepted(self, transport: asyncio.BaseTransport) -> None:
        """The TLS handshake is done (the transport calls connection_made
        after it): a client certificate here was verified against tls_ca, and
        SASL EXTERNAL is offered, when auth_mechanisms lists it, to log in as
        the user it names."""
        self.tls = True
        peercert = transport.get_extra_info("peercert")
        self.certificate_user = login_name(peercert, self.node.config.ssl_cert_login_from)
        self.peer_cert_subject = distinguished_name(peercert) if peercert else None
        if self.certificate_user is not None and "EXTERNAL" in self.node.config.auth_mechanisms:
            self.engine.sasl_mechanisms = list(self.node.config.auth_mechanisms)

    def data_received(self, data: bytes) -> None:
        self.recv_oct += len(data)
        self.recv_cnt += 1
        if self._kept is not None:
            self._keep(data)
        try:
            events = self.engine.receive_data(data)
            while True:
                for event in events:
                    self._dispatch(event)
                # bytes pipelined behind a SASL init wait for its outcome, given
                # above: process them now, the client may send nothing more
                if not self.engine.input_pending:
                    break
                events = self.engine.receive_data(b"")
            if self.fed_publishers:  # all dispatched: their credit, from what they really hold
                fed, self.fed_publishers = self.fed_publishers, []
                for publisher in fed:
                    publisher.fed = False
                    publisher.top_up()
        except HandedOver:  # another worker has the socket now
            return
        except Exception:  # a bug of ours must cost one connection, never the node
            log.exception("internal error on connection %s", self.name)
            self.engine.close(Condition.INTERNAL_ERROR, "internal error")
        self._flush()
        if self._holding_too_much:  # the client's FLOW may have let held transfers go
            self._check_output()
        if self.ingest is not None and not self._closed:
            self.ingest.took(len(data))

    def connection_lost(self, exc: Exception | None) -> None:
        self._cleanup()

    def schedule_flush(self) -> None:
        if not self._flush_scheduled and not self._closed:
            self._flush_scheduled = True
            self.node.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        self._unflushed = 0
        if self.transport is None or self._closed:
            return
        data = self.engine.data_to_send()
        if data:
            self.transport.write(data)
            self.send_oct += len(data)
            self.send_cnt += 1
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

    def _handshake_expired(self) -> None:
        """A client that has not sent its OPEN by now (silent, stuck in SASL,
        or trickling bytes) loses its socket, as RabbitMQ's handshake_timeout."""
        self._handshake_timer = None
        if self._closed or self.engine.open_received:
            return
        log.info("closing connection %s: no OPEN within the handshake timeout (%gs)", self.name,
                 self.node.config.handshake_timeout)  # fmt: skip
        self._abort()

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
        if self._login is not None:
            self._login.cancel()
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
        self._cancel_token_timer()
        if self.ingest is not None:
            self.ingest.stop()
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
            if self._kept is not None or self._taken is not None:
                self._first_link(event.link, event.attach)
            else:
                self._on_attach(event.link, event.attach)
        elif kind is ev.LinkDetached:
            self._link_gone(event.link)
        elif kind is ev.SessionBegun:
            if self._taken is None:  # a session replayed was counted where it began
                self.node.metrics.sessions_opened += 1
            event.session.begin(incoming_window=self.node.config.session_window, handle_max=self.node.config.handle_max)
        elif kind is ev.SessionEnded:
            self._session_gone(event.session)
        elif kind is ev.SaslInitReceived:
            self._on_sasl(event)
        elif kind is ev.ConnectionOpened:
            self._on_open(event.open)
        elif kind is ev.ConnectionClosed:
            if event.error is not None and not event.remote:
                log.info("closing connection %s: %s %s", self.name, event.error.condition, event.error.description)
        elif kind is ev.DeliveryAborted:
            pass  # nothing was routed yet

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
        permission entry (or token, node/client/tokens.py) reads now (routing/permissions.py)."""
        name = self.vhost.name
        check_permission(self.permission(name), self.user, name, kind, resource, what)

    def _session_gone(self, session: Any) -> None:
        for link in list(session.links.values()):
            self._link_gone(link)

    def block(self) -> None:
        """A resource alarm is raised: publishers are held by their link
        credit, taken back to zero, as RabbitMQ 4 does; links and sessions stay
        open and consumers go on. (Only a publisher that sends past the credit
        it was given loses its link, with transfer-limit-exceeded.)"""
        for publisher in self._publishers():
            publisher.hold()
        self.schedule_flush()

    def unblock(self) -> None:
        for publisher in self._publishers():
            publisher.top_up()
        self.schedule_flush()

    def link_counts(self) -> tuple[int, int]:
        """Its publishers and consumers (Prometheus' rabbitmq_global_publishers/consumers)."""
        return len(self._publishers()), len(self._consumers())

    def _publishers(self) -> list[Publisher]:
        return [link.context for session in self.engine.sessions.values() for link in session.links.values()
                if isinstance(link.context, Publisher)]  # fmt: skip

    def info(self) -> dict:
        return {
            "name": self.name,
            "user": self.user,
            "vhost": self.vhost.name if self.vhost else None,
            "protocol": "AMQP 1-0",
            "ssl": self.tls,
            "peer_cert_subject": self.peer_cert_subject,
            "peer_host": self.peer[0],
            "peer_port": self.peer[1],
            "channels": len(self.engine.sessions),
            "connected_at": self.connected_at,
            "recv_oct": self.recv_oct,
            "recv_cnt": self.recv_cnt,
            "send_oct": self.send_oct,
            "send_cnt": self.send_cnt,
        }


# Link Pair CS 01 (the /management node) and the anonymous relay (a null
# target, each message's `to` naming its destination), as RabbitMQ offers them.
def server_properties(cfg: Any) -> dict:
    return {
        Symbol("product"): cfg.product,
        Symbol("version"): f"{cfg.product_version}+warren.{__version__}",
        Symbol("warren-version"): __version__,
        Symbol("platform"): f"Python {platform.python_version()}",
        Symbol("node"): cfg.node_name,
    }
