"""A virtual host on this node: its routing table, its queues, and the
dead-letter path between them.

Until the metadata store of [4/7] replicates topology, durable exchanges,
queues and bindings are kept in `<data_dir>/definitions.json`, rewritten
atomically (temp file, fsync, rename, directory fsync) on every change.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from node.amqp.errors import Condition
from node.amqp.types import Symbol, Timestamp
from node.routing.errors import InvalidArgument, NotFound, PreconditionFailed, RoutingError
from node.routing.table import RoutingTable
from queues.base import Queue, QueueMessage
from queues.classic import ClassicQueue, QueueArgumentError

QUEUE_TYPES = {"classic": ClassicQueue}
UNSUPPORTED_TYPES = {"quorum", "stream"}


class QueueTypeNotSupported(RoutingError):
    condition_code = Condition.NOT_IMPLEMENTED


class ResourceLocked(RoutingError):
    condition_code = Condition.RESOURCE_LOCKED


class VHost:
    def __init__(self, name: str, node: Any):
        self.name = name
        self.node = node
        self.description = ""
        self.tags: list[str] = []
        self.routing = RoutingTable(name)
        self.queues: dict[str, Queue] = {}

    # ------------------------------------------------------------ topology

    def declare_queue(
        self,
        name: str,
        durable: bool = True,
        exclusive_owner: Any = None,
        auto_delete: bool = False,
        arguments: dict | None = None,
        persist: bool = True,
    ) -> tuple[Queue, bool]:
        """Returns (queue, created). Redeclaring with other properties fails
        with precondition-failed, as in RabbitMQ."""
        arguments = dict(arguments or {})
        qtype = arguments.get("x-queue-type", "classic")
        if not name:
            name = f"amq.gen-{uuid.uuid4().hex[:22]}"  # server-named
        existing = self.queues.get(name)
        if existing is not None:
            if (
                existing.durable != durable
                or existing.auto_delete != auto_delete
                or (existing.exclusive_owner is not None) != (exclusive_owner is not None)
                or existing.arguments != arguments
            ):
                raise PreconditionFailed(f"inequivalent arguments for queue '{name}' in vhost '{self.name}'")
            if existing.exclusive_owner is not None and existing.exclusive_owner is not exclusive_owner:
                raise ResourceLocked(f"cannot obtain exclusive access to locked queue '{name}'")
            return existing, False
        if qtype in UNSUPPORTED_TYPES:
            raise QueueTypeNotSupported(f"queue type '{qtype}' is not supported yet")
        cls = QUEUE_TYPES.get(qtype)
        if cls is None:
            raise InvalidArgument(f"unknown queue type '{qtype}'")
        try:
            queue = self.node.make_queue(cls, self, name, durable, exclusive_owner, auto_delete, arguments)
        except QueueArgumentError as e:
            raise InvalidArgument(str(e)) from None
        self.queues[name] = queue
        self.routing.add_queue(name)
        if durable and exclusive_owner is None and persist:
            self.node.definitions.save()
        return queue, True

    def delete_queue(self, name: str) -> int:
        queue = self.queues.pop(name, None)
        if queue is None:
            raise NotFound(f"no queue '{name}' in vhost '{self.name}'")
        self.routing.remove_queue(name)
        dropped = queue.delete()
        if queue.durable:
            self.node.definitions.save()
        return dropped

    def queue(self, name: str) -> Queue:
        queue = self.queues.get(name)
        if queue is None:
            raise NotFound(f"no queue '{name}' in vhost '{self.name}'")
        return queue

    def declare_exchange(self, name: str, type: str = "direct", durable: bool = True, auto_delete: bool = False,
                         internal: bool = False, arguments: dict | None = None) -> None:  # fmt: skip
        self.routing.declare_exchange(
            name, type, durable=durable, auto_delete=auto_delete, internal=internal, arguments=arguments
        )
        if durable:
            self.node.definitions.save()

    def delete_exchange(self, name: str) -> bool:
        deleted = self.routing.delete_exchange(name)
        if deleted:
            self.node.definitions.save()
        return deleted

    def bind(self, source: str, kind: str, destination: str, key: str = "", arguments: dict | None = None) -> bool:
        created = self.routing.bind(source, kind, destination, key, arguments)
        if created:
            self.node.definitions.save()
        return created

    def unbind(self, source: str, kind: str, destination: str, key: str = "", arguments: dict | None = None) -> bool:
        removed = self.routing.unbind(source, kind, destination, key, arguments)
        if removed:
            self.node.definitions.save()
        return removed

    def connection_closed(self, owner: Any) -> None:
        """Exclusive queues die with their connection."""
        for name in [n for n, q in self.queues.items() if q.exclusive_owner is owner]:
            self.delete_queue(name)

    # ------------------------------------------------------------ routing

    def route(self, exchange: str, routing_key: str, headers: dict | None) -> list[Queue]:
        names = self.routing.route(exchange, routing_key, headers)
        return [self.queues[n] for n in names if n in self.queues]

    # ------------------------------------------------------------ QueueHost

    def queue_deleted(self, queue: Queue) -> None:
        if self.queues.get(queue.name) is queue:
            del self.queues[queue.name]
            self.routing.remove_queue(queue.name)
            if queue.durable:
                self.node.definitions.save()

    def dead_letter(self, queue: Queue, message: QueueMessage, reason: str) -> None:
        """Republishes a dead message to the queue's dead-letter exchange,
        recording why and from where in its annotations (x-opt-deaths and
        x-first/last-death-*, as RabbitMQ 4 does for AMQP 1.0 messages)."""
        dlx = queue.arguments.get("x-dead-letter-exchange")
        if dlx is None:
            return
        dl_key = queue.arguments.get("x-dead-letter-routing-key")
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
            for key in keys:
                for q in self.route(dlx, key, None):
                    if q not in targets:
                        targets.append(q)
        except RoutingError:
            return  # a missing dead-letter exchange drops the message, as in RabbitMQ
        for target in targets:
            if target is queue and reason != "rejected":
                continue  # a cycle that no client breaks would spin forever
            target.publish(
                QueueMessage(
                    seq=0,
                    payload=message.payload,
                    durable=message.durable,
                    exchange=dlx,
                    routing_keys=keys,
                    annotations=annotations,
                ),
                None,
            )
        self.node.metrics.count_dead_letter(reason)

    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def call_later(self, delay_s: float, fn: Callable[[], None]) -> Any:
        return self.node.loop.call_later(delay_s, fn)
