"""One dynamic shovel at work: connect to the source and the destination,
move messages, reconnect after `reconnect-delay` when either side fails.

The source is an AMQP 1.0 connection (node/shovel/amqp_client.py; a `local` one
dials this node's own AMQP listener); the destination one too, except a `local`
one, which is handed the copies in this process (node/shovel/destinations.py).
Settlement follows the ack-mode:

- on-confirm: the source delivery stays unsettled until the destination
  settled the copy; its outcome (accepted, rejected, released) is then given
  to the source, so a message is never settled at the source before the
  destination took it. A failure in between leaves the source's deliveries
  unsettled: the source gives them again (duplicates only within the
  in-flight window).
- on-publish: the copy goes pre-settled, and the source delivery is accepted
  once the copy is written.
- no-ack: the source gives pre-settled deliveries, the copy goes pre-settled.

At most `src-prefetch-count` source deliveries are unfinished at a time (the
link credit, granted again in batches as they finish: `_Transfer._grant`). `src-delete-after` N stops after N
messages transferred (`queue-length`: the source queue's length when the
shovel first starts), and the shovel then deletes its own parameter, as
RabbitMQ's does.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

from amqp import definitions as d
from amqp import events as ev
from amqp.message import Message
from amqp.types import Symbol
from node.shovel.amqp_client import AmqpClient, ClientError
from node.shovel.definition import Endpoint, ShovelDefinition, local_vhost
from node.shovel.destinations import AmqpDestination, DirectDestination, DirectOpener

__all__ = ["ShovelPorts", "ShovelRunner", "ShovelStatus"]

log = logging.getLogger("warren.shovel")

STARTING, RUNNING, TERMINATED = "starting", "running", "terminated"
ACCEPTED, RELEASED = d.Accepted(), d.Released()


class ShovelPorts(Protocol):
    """What a shovel needs of its node."""

    node_id: str
    amqp_port: int | None
    local_host: str  # the address a local shovel dials this node's AMQP listener at

    direct_publisher: DirectOpener  # a local destination's copies, handed over in this process

    def cluster_name(self) -> str: ...

    async def queue_length(self, vhost: str, queue: str) -> int: ...


@dataclass
class ShovelStatus:
    """What /api/shovels reports of a shovel running here."""

    state: str = STARTING
    reason: str = ""  # the last error
    transferred: int = 0  # messages settled at the source as transferred, over every connection
    timestamp: float = field(default_factory=time.time)  # when `state` last changed
    restarts: int = 0

    def set(self, state: str, reason: str | None = None) -> None:
        self.state, self.timestamp = state, time.time()
        if reason is not None:
            self.reason = reason


class _Finished(Exception):
    """src-delete-after reached: the shovel is done."""


class _HandedOver(Exception):
    """The shovel moved to another node and what it had in flight is finished: it stops here."""


class ShovelRunner:
    def __init__(self, vhost: str, name: str, definition: ShovelDefinition, ports: ShovelPorts,
                 on_done: Callable[[], Awaitable[None]]) -> None:  # fmt: skip
        self.vhost, self.name, self.definition, self.ports = vhost, name, definition, ports
        self.status = ShovelStatus()
        self._on_done = on_done
        self._limit: int | None = None  # src-delete-after as a count, once known
        self._uri_turn = 0
        self._transfer: _Transfer | None = None
        self._handing_over = False

    def hand_over(self) -> None:
        """Another node runs this shovel now: take no more from the source, finish what is in
        flight (its copies confirmed, then settled at the source) and stop, so a planned move
        copies nothing twice. The caller bounds the wait (it cancels the task after a while)."""
        self._handing_over = True
        if self._transfer is not None:
            self._transfer.wind_down()

    # ------------------------------------------------------------ the loop

    async def run(self) -> None:
        """Until cancelled, until src-delete-after is reached, or once handed over."""
        while not self._handing_over:
            self.status.set(STARTING)
            try:
                await self._session()
            except _HandedOver:
                return
            except _Finished:
                self.status.set(TERMINATED, "")
                log.info("shovel %s/%s transferred %d messages: done", self.vhost, self.name, self.status.transferred)
                await self._on_done()
                return
            except (ClientError, OSError, LookupError) as e:  # LookupError: queue-length of a missing queue
                self.status.set(TERMINATED, str(e))
                log.warning("shovel %s/%s: %s; reconnecting in %s s", self.vhost, self.name, e,
                            self.definition.reconnect_delay)  # fmt: skip
            except Exception as e:  # a bug of ours costs this attempt, never the shovel
                self.status.set(TERMINATED, f"internal error: {type(e).__name__}: {e}")
                log.exception("shovel %s/%s failed; restarting in %s s", self.vhost, self.name,
                              self.definition.reconnect_delay)  # fmt: skip
            self.status.restarts += 1
            self._uri_turn += 1  # several URIs: the next one next time
            await asyncio.sleep(self.definition.reconnect_delay)

    async def _destination(self) -> AmqpDestination | DirectDestination:
        """A local destination is handed the copies in this process; an amqp10 one gets a connection."""
        end = self.definition.dest
        if end.protocol != "local":
            return AmqpDestination(await self._connect(end, "dest"))
        parts = urlsplit(end.uris[0])
        user = unquote(parts.username) if parts.username else None
        return DirectDestination(self.ports.direct_publisher, user, unquote(parts.password or ""),
                                 local_vhost(end.uris[0], self.vhost), end.queue)  # fmt: skip

    async def _connect(self, end: Endpoint, role: str) -> AmqpClient:
        uri = end.uris[self._uri_turn % len(end.uris)]
        container = f"warren-shovel-{self.name}-{role}"
        if end.protocol == "local":
            port = self.ports.amqp_port
            if port is None:
                raise ClientError("this node has no plain AMQP listener for a local shovel")
            return await AmqpClient.connect(uri, local_vhost(uri, self.vhost), container, self.ports.local_host, port)
        return await AmqpClient.connect(uri, None, container)

    async def _session(self) -> None:
        definition = self.definition
        if self._limit is None and definition.delete_after == "queue-length":
            self._limit = await self.ports.queue_length(local_vhost(definition.source.uris[0], self.vhost),
                                                        definition.source.queue)  # fmt: skip
        elif self._limit is None and isinstance(definition.delete_after, int):
            self._limit = definition.delete_after
        if self._limit is not None and self.status.transferred >= self._limit:
            raise _Finished
        src = dest = None
        try:
            dest = await self._destination()
            src = await self._connect(definition.source, "src")
            self._transfer = _Transfer(self, src, dest)
            if self._handing_over:
                raise _HandedOver
            await self._transfer.run()
        finally:
            self._transfer = None
            for end in (src, dest):
                if end is not None:
                    await end.close()

    def forward_annotations(self) -> dict:
        """RabbitMQ's forward headers: message annotations naming the shovel."""
        return {Symbol("x-opt-shovelled-by"): self.ports.cluster_name(), Symbol("x-opt-shovel-type"): "dynamic",
                Symbol("x-opt-shovel-name"): self.name}  # fmt: skip


class _Transfer:
    """One connection pair's worth of moving messages."""

    def __init__(self, runner: ShovelRunner, src: AmqpClient, dest: AmqpDestination | DirectDestination) -> None:
        self.runner, self.src, self.dest = runner, src, dest
        self.definition = runner.definition
        self.mode = self.definition.ack_mode
        self.in_flight = 0  # source deliveries received and not yet finished
        self.waiting: collections.deque = collections.deque()  # (source delivery, payload) for want of dest credit
        self.failed: asyncio.Future = asyncio.get_running_loop().create_future()
        self.annotations = runner.forward_annotations() if self.definition.forward_headers else None
        self.winding_down = False  # handed over: no more credit, ends once nothing is in flight

    async def run(self) -> None:
        definition = self.definition
        self.src.on_event = self._on_src_event
        try:
            await self.dest.attach(f"shovel-{self.runner.name}-dest", definition.dest.address, self._send_waiting,
                                   self._fail)  # fmt: skip
            self.src_link = await self.src.receiver(f"shovel-{self.runner.name}-src", definition.source.address,
                                                    self.mode == "no-ack")  # fmt: skip
            self.runner.status.set(RUNNING, "")
            self._grant()
            await self.failed  # raises: a connection or a link failed, or the shovel finished
        finally:
            self.failed.cancel()  # what the closing connections report after this is not waited for

    def _remaining(self) -> int | None:
        limit = self.runner._limit
        return None if limit is None else limit - self.runner.status.transferred - self.in_flight

    def _grant(self) -> None:
        """Keeps up to prefetch-count deliveries coming, granted in batches of at least half of it.

        Credit is granted only once the last grant is used up: RabbitMQ 3.x's
        AMQP 1.0 plugin computes the link's credit as [2.6.7] says, but hands it
        to its queue as a new consumer credit, which the queue counts from what it
        has dispatched, deliveries between it and the session included, so a grant
        made while any is in flight would be overrun by those. (It answers each
        FLOW with its own, delivery-count included: a point to resync at, should a
        scheme that grants before the last grant is used up be tried.)"""
        if self.src_link.link_credit > 0 or self.winding_down:
            return
        prefetch = self.definition.prefetch
        want = prefetch - self.in_flight
        remaining = self._remaining()
        if remaining is not None:
            want = min(want, remaining)
        if want > 0 and (want >= (prefetch + 1) // 2 or want == remaining or self.in_flight == 0):
            self.src_link.flow(link_credit=want)
            self.src.flush_soon()

    def wind_down(self) -> None:
        self.winding_down = True
        if hasattr(self, "src_link"):
            self.src_link.flow(link_credit=0)  # transfers already on the wire are still finished
            self.src.flush_soon()
        self._end_if_wound_down()

    def _end_if_wound_down(self) -> None:
        if self.winding_down and self.in_flight == 0:
            if hasattr(self, "src_link"):
                self.src.flush()  # the last settlements reach the source before the close
            self._fail(_HandedOver())

    def _fail(self, error: BaseException) -> None:
        if not self.failed.done():
            self.failed.set_exception(error)

    # ------------------------------------------------------------ source

    def _on_src_event(self, event: Any) -> None:
        kind = type(event)
        if kind is ev.MessageReceived and event.link is self.src_link:
            self._received(event.delivery)
        elif kind is ev.LinkDetached and event.link is getattr(self, "src_link", None):
            self._fail(ClientError(f"the source detached: {event.error}"))
        elif kind is ev.SessionEnded or kind is ev.ConnectionClosed:
            self._fail(ClientError(self.src.closed or f"the source ended the session: {event.error}"))

    def _received(self, delivery: Any) -> None:
        if self.winding_down and not delivery.settled:
            # sent before the source saw its credit taken back: given back, not copied, since
            # once nothing copied is in flight the connection closes, and the source would give
            # what this copied after that again to the next node (a pre-settled one is copied)
            self.src_link.session.settle(delivery, RELEASED)
            self.src.flush_soon()
            return
        self.in_flight += 1
        payload = delivery.payload
        if self.annotations is not None:
            payload = bytes(Message.from_bytes(payload).with_message_annotations(self.annotations))
        self.waiting.append((delivery, payload))
        self._send_waiting()

    def _send_waiting(self) -> None:
        dest, settled = self.dest, self.mode != "on-confirm"
        done = []
        while self.waiting and dest.credit > 0:
            delivery, payload = self.waiting.popleft()
            if settled:
                dest.send(delivery.tag, payload, delivery.message_format, None)
                done.append(delivery)
            else:
                dest.send(delivery.tag, payload, delivery.message_format,
                          lambda state, delivery=delivery: self._copied(delivery, state))  # fmt: skip
        dest.flush()
        # on-publish: settled at the source once the copies are written
        for delivery in done:
            self._finish(delivery, ACCEPTED)
        if done:
            self.src.flush_soon()

    def _finish(self, delivery: Any, outcome: Any) -> None:
        """A source delivery is done: settled there (unless it came pre-settled), counted, credit
        topped up. The caller flushes the source connection."""
        self.in_flight -= 1
        if not delivery.settled:
            self.src_link.session.settle(delivery, outcome)
        if type(outcome) is d.Accepted:
            self.runner.status.transferred += 1
        remaining = self._remaining()
        if remaining is not None and remaining <= 0 and self.in_flight == 0:
            self.src.flush()
            self._fail(_Finished())
            return
        self._grant()
        self._end_if_wound_down()

    def _copied(self, delivery: Any, state: Any) -> None:
        """The destination settled a copy (on-confirm): its outcome goes to the source."""
        self._finish(delivery, _source_outcome(state))
        self.src.flush_soon()


def _source_outcome(state: Any) -> Any:
    """What the source is told of a copy the destination settled: accepted and
    rejected pass through; anything else releases it back to the source."""
    if type(state) is d.Accepted:
        return ACCEPTED  # one object: the session merges consecutive settlements into one DISPOSITION
    if type(state) is d.Rejected:
        return state
    return RELEASED
