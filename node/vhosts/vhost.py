"""A virtual host as this node sees it: the routing table (the metadata
projection, metadata/projections.py), the queues (local queue processes for
the queues this node leads, proxies for the others), and the dead-letter
path between them.

Changes to the topology go through the metadata store (node/vhosts/metadata_store.py):
each method proposes a command and returns once it is committed by a majority
and applied here, so the caller reads its own write. The queue processes
themselves are started and stopped by node/vhosts/local_queues.py when the commands
are applied, on every node alike.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from amqp.errors import Condition
from amqp.message import Message
from amqp.types import Symbol, Timestamp
from metadata import commands as mc
from metadata import limits
from metadata.feature_flags import QUEUE_DECLARING_USER, QUORUM_CONSUMER_TIMEOUT
from node.vhosts import delayed_messages
from node.vhosts.metadata_store import new_key as mc_key
from queues.arguments import check_declare as check_queue_type_arguments
from queues.base import Outcome, Queue, QueueArgumentError, QueueMessage, consumer_timeout_of
from queues.classic import ClassicQueueConfig
from queues.equivalence import first_difference, inequivalent
from queues.quorum import QuorumConfig
from queues.stream.config import check_stream_declaration
from routing.delayed import delay_of
from routing.errors import InvalidArgument, NotFound, PreconditionFailed, RoutingError
from routing.exchange_types import Headers
from routing.table import RoutingTable

if TYPE_CHECKING:
    import asyncio

    from metadata.projections import Projections
    from node.ops.metrics import NodeMetrics
    from node.vhosts.delayed_messages import DelayedMessages
    from node.vhosts.local_queues import LocalQueues, Owners
    from node.vhosts.metadata_store import MetadataStore
    from node.vhosts.streams import StreamQueues

log = logging.getLogger("warren.vhost")

QUEUE_TYPES = ("classic", "quorum", "stream")
UNSUPPORTED_TYPES: set[str] = set()  # types this build knows but cannot run (none now)
DEFAULT_QUORUM_SIZE = 3  # x-quorum-initial-group-size, capped by the cluster size


def wall_ms() -> int:
    """The wall clock, which NTP or an operator may step."""
    return int(time.time() * 1000)


def monotonic_ms() -> int:
    """A clock of real time only (as asyncio's and uvloop's timers count), for durations."""
    return int(time.monotonic() * 1000)


class QueueTypeNotSupported(RoutingError):
    condition_code = Condition.NOT_IMPLEMENTED


class ResourceLocked(RoutingError):
    condition_code = Condition.RESOURCE_LOCKED


class LeaderLocator(Protocol):
    """Where a new quorum queue's leader goes (node/cluster/placement.py)."""

    def leader_for(self, vhost: str, name: str, arguments: Any) -> str: ...


class VHostNode(Protocol):
    """What a vhost uses of its node (node/broker.py provides it). Read at
    each use: `metadata` and `loop` exist only once the node has started."""

    node_id: str
    loop: asyncio.AbstractEventLoop
    metadata: MetadataStore
    projections: Projections
    metrics: NodeMetrics
    owners: Owners
    local_queues: LocalQueues
    streams: StreamQueues
    placement: LeaderLocator
    delayed: DelayedMessages

    def background(self, coro: Any, what: str) -> None: ...


class VHost:
    def __init__(self, name: str, node: VHostNode, description: str = "", tags: list[str] | None = None):
        self.name = name
        self.node = node
        self.description = description
        self.tags: list[str] = list(tags or [])
        self.default_queue_type = ""  # from the metadata; "" for none (classic)
        self.protected_from_deletion = False  # from the metadata: its deletion is refused
        self.queues: dict[str, Queue] = {}
        self._empty_table = RoutingTable(name)

    @property
    def routing(self) -> RoutingTable:
        """The projection's table (replaced wholesale when a snapshot is restored)."""
        return self.node.projections.table(self.name) or self._empty_table

    # ------------------------------------------------------------ topology (through the metadata store)

    async def declare_queue(
        self,
        name: str,
        durable: bool = True,
        exclusive_owner: Any = None,
        auto_delete: bool = False,
        arguments: dict | None = None,
        user: str = "",
        *,
        internal: bool = False,
    ) -> tuple[Queue, bool]:
        """Returns (queue, created); a redeclaration with other properties is precondition-failed, as in
        RabbitMQ. `user`: who declares it, kept once the queue_declaring_user flag is on ("" unknown).
        `internal`: a delayed exchange's own queue, whose reserved name no one else may take."""
        if not internal:
            delayed_messages.check_queue_name(name)
        arguments = self.with_default_type(durable, exclusive_owner is not None, auto_delete, arguments)
        _check_arguments("queue", arguments, queue=True)
        qtype = arguments.get("x-queue-type", "classic")
        if not name:
            name = f"amq.gen-{uuid.uuid4().hex[:22]}"  # server-named
        existing = self.queues.get(name)
        if existing is not None:
            self._check_redeclare(existing, durable, exclusive_owner, auto_delete, arguments)
            self.node.metrics.queues_declared += 1
            return existing, False
        if qtype in UNSUPPORTED_TYPES:
            raise QueueTypeNotSupported(f"queue type '{qtype}' is not supported yet")
        if qtype not in QUEUE_TYPES:
            raise InvalidArgument(f"invalid arg 'x-queue-type': unknown queue type '{qtype}'")
        replicas: tuple[str, ...] = ()
        try:  # refuse early, without a round through Raft
            if qtype == "quorum":
                QuorumConfig.from_arguments(arguments)
                if "x-consumer-timeout" in arguments and QUORUM_CONSUMER_TIMEOUT not in self.node.projections.feature_flags:
                    raise QueueArgumentError(f"x-consumer-timeout on a quorum queue needs the feature flag "
                                             f"{QUORUM_CONSUMER_TIMEOUT} (warren ctl enable_feature_flag all)")  # fmt: skip
                replicas = self._place_replicas(name, durable, exclusive_owner, auto_delete, arguments)
            elif qtype == "stream":
                config = check_stream_declaration(durable, exclusive_owner, auto_delete, arguments)
                replicas = self.node.streams.place(self.name, name, arguments, config)
            else:
                ClassicQueueConfig.from_arguments(arguments)
                consumer_timeout_of(arguments)
            check_queue_type_arguments(qtype, arguments)  # after the type's own, more telling, refusals
        except QueueArgumentError as e:
            raise InvalidArgument(str(e)) from None
        owner_id = None if exclusive_owner is None else self.node.owners.id_of(exclusive_owner)
        leader = replicas[0] if replicas else self.node.node_id
        if user and QUEUE_DECLARING_USER in self.node.projections.feature_flags:
            command = mc.DeclareQueueByUser(mc_key(), self.name, name, qtype, durable, auto_delete, owner_id, arguments,
                                            leader, replicas, user)  # fmt: skip
        else:  # version 1, which every member applies while the flag is off
            command = mc.DeclareQueue(mc_key(), self.name, name, qtype, durable, auto_delete, owner_id, arguments,
                                      leader, replicas)  # fmt: skip
        created = await self.node.metadata.created(command)
        queue = self.queues.get(name)
        if queue is None:
            record = self.node.metadata.state.queue(self.name, name)
            if record is None:  # deleted again before this node applied the declaration
                raise NotFound(f"no queue '{name}' in vhost '{self.name}'")
            # it removed itself here but the metadata kept it (the delete did not commit)
            queue = self.node.local_queues.start(self, record)
        if not created:
            self._check_redeclare(queue, durable, exclusive_owner, auto_delete, arguments)
        self.node.metrics.queues_declared += 1
        self.node.metrics.queues_created += created
        return queue, created

    def with_default_type(self, durable: bool, exclusive: bool, auto_delete: bool, arguments: dict | None) -> dict:
        """`arguments` with x-queue-type set to the vhost's default queue type
        when they lack it, as RabbitMQ 4.2's augment_declare_args: a type that
        cannot hold the queue (quorum and stream queues are durable, not
        exclusive and not auto-delete) gives a classic one instead. Applied
        to redeclarations too, so they compare with what was stored."""
        arguments = dict(arguments or {})
        if self.default_queue_type and "x-queue-type" not in arguments:
            fits = self.default_queue_type == "classic" or (durable and not exclusive and not auto_delete)
            arguments["x-queue-type"] = self.default_queue_type if fits else "classic"
        return arguments

    def _place_replicas(self, name: str, durable: bool, exclusive_owner: Any, auto_delete: bool,
                        arguments: dict) -> tuple:  # fmt: skip
        """The leader its locator chooses first (node/cluster/placement.py: this node, or the
        member leading the fewest), then other members, as many as x-quorum-initial-group-size."""
        if not durable or exclusive_owner is not None or auto_delete:
            raise PreconditionFailed("a quorum queue is durable, not exclusive and not auto-delete")
        size = arguments.get("x-quorum-initial-group-size", DEFAULT_QUORUM_SIZE)
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise InvalidArgument(f"invalid x-quorum-initial-group-size {size!r}: a positive integer")
        leader = self.node.placement.leader_for(self.name, name, arguments)
        others = sorted(m for m in self.node.metadata.state.members if m != leader)
        random.shuffle(others)
        return (leader, *others[: size - 1])

    def _check_redeclare(self, existing: Queue, durable: bool, exclusive_owner: Any, auto_delete: bool,
                         arguments: dict) -> None:  # fmt: skip
        difference = first_difference((
            ("durable", existing.durable, durable),
            ("auto_delete", existing.auto_delete, auto_delete),
            ("exclusive", existing.exclusive_owner is not None, exclusive_owner is not None),
        ), existing.arguments, arguments)  # fmt: skip
        if difference is not None:
            raise PreconditionFailed(inequivalent("queue", existing.name, self.name, difference))
        if existing.exclusive_owner is not None and existing.exclusive_owner is not exclusive_owner:
            raise ResourceLocked(f"cannot obtain exclusive access to locked queue '{existing.name}'")

    async def delete_queue(self, name: str, *, internal: bool = False) -> int:
        """Deletes the queue everywhere; returns how many messages it held (`internal`: a delayed exchange's)."""
        delayed_messages.check_internal(name, "delete", allowed=internal)
        queue = self.queue(name)
        if queue.remote:  # the count its node reports
            await queue.refresh_counts()
        count = queue.message_count
        await self.node.metadata.run(mc.DeleteQueue(mc_key(), self.name, name))
        self.node.metrics.queues_deleted += 1
        return count

    def queue(self, name: str) -> Queue:
        queue = self.queues.get(name)
        if queue is None:
            raise NotFound(f"no queue '{name}' in vhost '{self.name}'")
        return queue

    async def declare_exchange(self, name: str, type: str = "direct", durable: bool = True,
                               auto_delete: bool = False, internal: bool = False,
                               arguments: dict | None = None) -> bool:  # fmt: skip
        _check_arguments("exchange", arguments)
        if delayed := str(type) == "x-delayed-message":
            delayed_messages.check_name(name)
        created = await self.node.metadata.created(mc.DeclareExchange(
            mc_key(), self.name, name, str(type), durable, auto_delete, internal, dict(arguments or {})))  # fmt: skip
        if delayed:  # its messages' queue, before a delayed message comes (node/vhosts/delayed_messages.py)
            for queue in delayed_messages.queue_names(name):
                await self.declare_queue(queue, True, arguments=dict(delayed_messages.BACKING_ARGUMENTS), internal=True)
            self.node.delayed.check()
        return created

    async def delete_exchange(self, name: str) -> bool:
        if self.routing.exchange(name) is None:
            return False
        await self.node.metadata.run(mc.DeleteExchange(mc_key(), self.name, name))
        for backing in () if name in self.routing.delayed_exchanges else delayed_messages.queue_names(name):
            with contextlib.suppress(NotFound):  # a delayed exchange's messages go with it
                await self.delete_queue(backing, internal=True)
        return True

    async def bind(self, source: str, kind: str, destination: str, key: str = "",
                   arguments: dict | None = None) -> bool:  # fmt: skip
        _check_arguments("binding", arguments)
        return await self.node.metadata.created(mc.Bind(mc_key(), self.name, source, str(kind), destination, key,
                                                        dict(arguments or {})))  # fmt: skip

    async def unbind(self, source: str, kind: str, destination: str, key: str = "",
                     arguments: dict | None = None) -> None:  # fmt: skip
        await self.node.metadata.run(mc.Unbind(mc_key(), self.name, source, str(kind), destination, key,
                                               dict(arguments or {})))  # fmt: skip

    def connection_closed(self, owner: Any) -> None:
        """Exclusive queues die with their connection: at once here, and in the metadata soon after."""
        for queue in [q for q in self.queues.values() if q.exclusive_owner is owner]:
            if not queue.deleted:
                queue.delete()
            self.queue_deleted(queue)

    def forget(self, name: str) -> None:
        """Delete a queue from the metadata in the background (it removed itself, or its owner left)."""
        self.node.background(self._forget(name), f"deleting queue '{name}' in vhost '{self.name}'")

    async def _forget(self, name: str) -> None:
        try:
            await self.node.metadata.run(mc.DeleteQueue(mc_key(), self.name, name))
        except RoutingError as e:
            if e.condition != Condition.NOT_FOUND:
                raise
        else:
            self.node.metrics.queues_deleted += 1

    # ------------------------------------------------------------ routing

    def route(self, exchange: str, routing_key: str, headers: Headers) -> list[Queue]:
        """`headers`: the application-properties, or a function that decodes
        them when a headers exchange needs them. A message with a delay that reaches
        an x-delayed-message exchange (published to it, or through exchange-to-exchange
        bindings: the table names the exchange's queue) goes to that exchange's queue
        with its due time, to be routed once due (node/vhosts/delayed_messages.py)."""
        routing = self.routing
        if routing.delayed_exchanges:
            if exchange in routing.delayed_exchanges:
                delay = delay_of(headers)
                if delay > 0:
                    return [self.node.delayed.publisher(self, exchange, delay)]  # type: ignore[list-item]
            return self._resolve(routing.targets(exchange, routing_key, headers), headers)
        get = self.queues.get  # one lookup per target queue (the table remembers the names per key)
        return [q for q in map(get, routing.targets(exchange, routing_key, headers)) if q is not None]

    def route_now(self, exchange: str, routing_key: str, headers: Headers) -> list[Queue]:
        """As `route`, not delaying a message published to a delayed exchange: one that is due."""
        return self._resolve(self.routing.targets(exchange, routing_key, headers), headers)

    def route_keys(self, exchange: str, routing_keys: list[str], headers: Headers) -> list[Queue]:
        """As `route`, for a message with several routing keys (x-cc)."""
        if exchange in self.routing.delayed_exchanges and delay_of(headers) > 0:
            raise InvalidArgument(f"message annotation x-cc is not supported with x-delay (exchange '{exchange}' "
                                  f"holds one routing key per delayed message)")  # fmt: skip
        return self._resolve(sorted(self.routing.route_keys(exchange, routing_keys, headers)), headers)

    def _resolve(self, names: Iterable[str], headers: Headers) -> list[Queue]:
        """Queue objects by name; a delayed exchange's queue, named by the walk for a
        delayed message that reached that exchange, takes it with its due time."""
        queues = [q for q in map(self.queues.get, names) if q is not None]
        return self.node.delayed.resolve(self, queues, headers) if self.routing.delayed_exchanges else queues

    # ------------------------------------------------------------ QueueHost

    def queue_deleted(self, queue: Queue) -> None:
        """The queue removed itself (x-expires, auto-delete)."""
        if self.queues.get(queue.name) is queue:
            del self.queues[queue.name]  # gone here at once; everywhere once the metadata says so
            self.forget(queue.name)

    def queue_expired(self, queue: Queue) -> None:
        if self.queues.get(queue.name) is queue:
            self.forget(queue.name)  # every replica stops when the metadata deletes it

    def dead_letter(self, queue: Queue, message: QueueMessage, reason: str,
                    confirmed: Callable[[bool], None] | None = None) -> None:  # fmt: skip
        """Republishes a dead message to the queue's dead-letter exchange,
        recording why and from where in its annotations (x-opt-deaths and
        x-first/last-death-*, as RabbitMQ 4 does for AMQP 1.0 messages).

        `confirmed` (at-least-once): called once, True when every target
        queue accepted the message, False when it reached none (no such
        exchange, no route) or a target refused it; the caller keeps the
        message and tries again later, as RabbitMQ's dead-letter worker does."""
        arguments = queue.effective_arguments  # a policy's keys too
        dlx = arguments.get("x-dead-letter-exchange")
        if dlx is None:
            if confirmed is not None:
                confirmed(False)
            else:
                self.node.metrics.count_dead_letter(reason, queue.type_name, "disabled")
            return
        strategy = "at_least_once" if confirmed is not None else "at_most_once"
        dl_key = arguments.get("x-dead-letter-routing-key")
        keys = [dl_key] if dl_key is not None else (message.routing_keys or [""])
        annotations = dict(message.annotations or {})
        now = Timestamp(int(time.time() * 1000))
        # copies: the entries may be shared with other copies of this message
        # (a fanout dead-letter exchange), which must keep their own history
        deaths = [dict(death) for death in annotations.get(Symbol("x-opt-deaths")) or []]
        for death in deaths:
            if death.get(Symbol("queue")) == queue.name and death.get(Symbol("reason")) == reason:
                death[Symbol("count")] = death.get(Symbol("count"), 0) + 1
                death[Symbol("last-time")] = now
                break
        else:
            deaths.insert(0, {
                Symbol("queue"): queue.name,
                Symbol("reason"): Symbol(reason),
                Symbol("count"): 1,
                Symbol("first-time"): now,
                Symbol("last-time"): now,
                Symbol("exchange"): message.exchange,
                Symbol("routing-keys"): list(message.routing_keys),
            })  # fmt: skip
        annotations[Symbol("x-opt-deaths")] = deaths
        annotations.setdefault(Symbol("x-first-death-queue"), queue.name)
        annotations.setdefault(Symbol("x-first-death-reason"), Symbol(reason))
        annotations.setdefault(Symbol("x-first-death-exchange"), message.exchange)
        annotations[Symbol("x-last-death-queue")] = queue.name
        annotations[Symbol("x-last-death-reason")] = Symbol(reason)
        annotations[Symbol("x-last-death-exchange")] = message.exchange
        try:
            targets: list[Queue] = []
            # a delayed dead-letter exchange reads the message's x-delay (and its x-delayed-type its headers)
            facts = Message.from_bytes(message.payload) if dlx in self.routing.delayed_exchanges else None
            for key in keys:
                for q in self.route(dlx, key, facts):
                    if q not in targets:
                        targets.append(q)
        except RoutingError:
            if confirmed is not None:
                confirmed(False)  # at-least-once: kept until the exchange exists
            return  # at-most-once: a missing dead-letter exchange drops the message, as in RabbitMQ
        targets = [t for t in targets if t is not queue or reason == "rejected"]  # a cycle no client breaks
        on_outcome = None
        if confirmed is not None:
            if not targets:
                confirmed(False)  # at-least-once: kept until a binding routes it
                return
            metrics = self.node.metrics

            def counted(ok: bool) -> None:
                if ok:  # counted once it left, not at each attempt
                    metrics.count_dead_letter(reason, queue.type_name, strategy)
                confirmed(ok)

            on_outcome = _all_accepted(len(targets), counted)
        for target in targets:
            target.publish(
                QueueMessage(
                    seq=0,
                    payload=message.payload,
                    durable=message.durable,
                    exchange=dlx,
                    routing_keys=keys,
                    annotations=annotations,
                ),
                on_outcome,
            )
        if confirmed is None:
            self.node.metrics.count_dead_letter(reason, queue.type_name, strategy)

    def count_dropped(self, queue: Queue, reason: str, n: int) -> None:
        self.node.metrics.count_dead_letter(reason, queue.type_name, "disabled", n)

    now_ms = staticmethod(wall_ms)  # TTLs, timestamps
    monotonic_ms = staticmethod(monotonic_ms)  # durations, as the loop's timers count them

    def call_later(self, delay_s: float, fn: Callable[[], None]) -> Any:
        return self.node.loop.call_later(delay_s, fn)


def _check_arguments(what: str, arguments: dict | None, queue: bool = False) -> None:
    """Values out of the ranges RabbitMQ enforces, or that no AMQP type holds,
    are a bad request (metadata/limits.py), not a failure to encode them."""
    try:
        limits.check_arguments(what, arguments, queue)
    except limits.Invalid as e:
        raise InvalidArgument(str(e)) from None


def _all_accepted(n: int, confirmed: Callable[[bool], None]) -> Callable[[Outcome], None]:
    """A confirm callback for n target queues: `confirmed(True)` once all
    accepted, `confirmed(False)` at the first other outcome."""
    left = n
    failed = False

    def outcome(result: Outcome) -> None:
        nonlocal left, failed
        if failed:
            return
        if result is not Outcome.ACCEPTED:
            failed = True
            confirmed(False)
            return
        left -= 1
        if left == 0:
            confirmed(True)

    return outcome
