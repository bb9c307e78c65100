"""This node's delayed messages: what x-delayed-message exchanges hold until due.

A message published to a delayed exchange with a positive delay (routing/delayed.py)
is not routed: node/vhosts/vhost.py hands it to that exchange's `DelayedExchange`
here, as if it were a queue. It is written to the node's message store (the classic
queues' RocksDB, under its own store key, the due time in the record's expiry field)
and the publisher is confirmed (accepted) once that write is fsynced. Its due time and
store sequence enter the exchange's DelayIndex (routing/delay_index.py), which keeps
the earliest due in memory and only counts the rest, so bodies stay on disk and memory
stays bounded whatever the number of delays. A timer set to the earliest due time
reads the due bodies back and routes each as the exchange's x-delayed-type would route
it then (VHost.route_now); the message is deleted once every target queue confirmed it
(at least once: a crash between the confirms and the delete routes it again after the
restart, never zero times). A target that did not confirm (lost in flight, no space)
has the message routed again a second later; a message that reaches no queue, or that
a queue refuses (x-overflow reject-publish), is dropped, as the plugin drops it.

At start the store's index (due time and sequence, no body) is read back for every
delayed exchange that still exists; the stored messages of exchanges deleted meanwhile
are dropped, and so are an exchange's once it is deleted (noticed at its next timer).

What this does not do yet: replicate. The messages are kept by the node that took the
publish, as the plugin keeps them, durably (a restart loses none) but not on other
nodes: docs/architecture.md, "Delayed messages", says what replication adds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

from amqp.message import Message
from queues.base import ConfirmCallback, Outcome, QueueMessage
from queues.classic.persistence import decode_record, store_key
from routing.delay_index import Delay, DelayIndex, Reload, Retry, Routed, Routing
from routing.delayed import delay_of
from routing.errors import NotFound, RoutingError

__all__ = ["DelayedExchange", "DelayedMessages", "DelayedNode"]

log = logging.getLogger("warren.delayed")

KEY_PREFIX = "delayed:"
ROUTE_BATCH = 500  # due messages read and routed per timer turn
RETRY_S = 1.0  # a message whose targets did not all confirm is routed again this much later


class DelayedNode(Protocol):
    """What the delayed messages use of the node (node/broker.py)."""

    loop: asyncio.AbstractEventLoop
    store: Any  # storage.message_store.MessageStore
    persistence: Any  # queues.classic.persistence.StorePersistence

    vhosts: dict[str, Any]  # name -> node/vhosts/vhost.py's VHost

    def now_ms(self) -> int: ...


def _exists(node: DelayedNode, vhost: str, exchange: str) -> bool:
    held = node.vhosts.get(vhost)
    return held is not None and exchange in held.routing.delayed_exchanges


def _route_now(node: DelayedNode, vhost: str, exchange: str, routing_key: str, message: Message) -> list[Any]:
    """The queues `exchange` routes the message to now, without delaying it again;
    RoutingError when the exchange (or its vhost) is gone."""
    held = node.vhosts.get(vhost)
    if held is None:
        raise NotFound(f"no vhost '{vhost}'")
    return held.route_now(exchange, routing_key, message)


def delayed_store_key(vhost: str, exchange: str) -> str:
    return KEY_PREFIX + store_key(vhost, exchange)


class DelayedMessages:
    """Every delayed exchange's messages on this node."""

    def __init__(self, node: DelayedNode, window: int = 10_000):
        self._node = node
        self._window = window
        self._exchanges: dict[tuple[str, str], DelayedExchange] = {}

    def exchange(self, vhost: str, name: str) -> DelayedExchange:
        held = self._exchanges.get((vhost, name))
        if held is None:
            held = self._exchanges[vhost, name] = DelayedExchange(self._node, vhost, name, self._window, self._gone)
        return held

    def count(self, vhost: str, name: str) -> int:
        held = self._exchanges.get((vhost, name))
        return 0 if held is None else len(held.index)

    def stats(self, vhost: str, name: str) -> dict[str, int] | None:
        held = self._exchanges.get((vhost, name))
        return None if held is None else held.counters()

    def recover(self, keys: list[str]) -> list[str]:
        """At start, once the metadata is caught up: `keys` are the store keys with
        messages; the delayed exchanges' come back, those of deleted exchanges go.
        Returns the keys that were not delayed exchanges' (the caller's)."""
        others = []
        for key in keys:
            if not key.startswith(KEY_PREFIX):
                others.append(key)
                continue
            vhost, name = _parse(key[len(KEY_PREFIX) :])
            if vhost is not None and _exists(self._node, vhost, name):
                self.exchange(vhost, name).recover()
            else:
                self._node.store.delete_queue(key)
        return others

    def stop(self) -> None:
        for held in self._exchanges.values():
            held.stop()

    def _gone(self, held: DelayedExchange) -> None:
        if self._exchanges.get((held.vhost, held.name)) is held:
            del self._exchanges[held.vhost, held.name]


def _parse(key: str) -> tuple[str | None, str]:
    """store_key's f"{len(vhost)}:{vhost}/{name}" read back."""
    size, sep, rest = key.partition(":")
    if not sep or not size.isdigit() or len(rest) < int(size) + 1:
        return None, ""
    n = int(size)
    return rest[:n], rest[n + 1 :]


class DelayedExchange:
    """One delayed exchange's messages on this node; a publisher sees it as a queue
    (`publish` with a confirm callback)."""

    type_name = "x-delayed-message"
    remote = False
    publish_hold = None

    def __init__(self, node: DelayedNode, vhost: str, name: str, window: int,
                 gone: Callable[[DelayedExchange], None]):  # fmt: skip
        self._node = node
        self.vhost = vhost
        self.name = name
        self.key = delayed_store_key(vhost, name)
        self.index = DelayIndex(window)
        self._gone = gone
        self._next_seq = 1
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None
        self._stopped = False
        self.published = 0  # messages taken and confirmed (publish in)
        self.routed = 0  # messages routed once due and confirmed by their targets (publish out)
        self.dropped = 0  # due messages that reached no queue or that a queue refused

    def counters(self) -> dict[str, int]:
        return {"messages_delayed": len(self.index), "published": self.published, "routed": self.routed,
                "dropped": self.dropped}  # fmt: skip

    # ------------------------------------------------------------ in

    def publish(self, message: QueueMessage, confirm: ConfirmCallback | None) -> None:
        now = self._node.now_ms()
        due = now + delay_of(Message.from_bytes(message.payload))
        seq = self._next_seq
        self._next_seq += 1
        stored = QueueMessage(seq, message.payload, True, due, 0, False, message.exchange, list(message.routing_keys))
        persistence = self._node.persistence
        ticket = persistence.put(self.key, seq, stored)

        def durable() -> None:
            # into the index only once on disk: a reload (routing/delay_index.py) reads the disk
            self.index.apply(Delay(seq, due))
            self.published += 1
            self._arm()
            if confirm is not None:
                confirm(Outcome.ACCEPTED)

        def failed() -> None:
            if confirm is not None:
                confirm(Outcome.NO_SPACE)

        persistence.on_durable(ticket, durable, failed)

    def recover(self) -> None:
        entries = []
        last = 0
        for seq, _size, _flags, due in self._node.store.iter_index(self.key):
            entries.append((due, seq))
            last = seq
        self._next_seq = max(self._next_seq, last + 1)
        self.index.load(entries)
        self._arm()

    def stop(self) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # ------------------------------------------------------------ out

    def _arm(self) -> None:
        if self._stopped:
            return
        if self.index.needs_reload:
            self._reload()
        due = self.index.next_due()
        if due is None or (self._timer is not None and self._timer_at is not None and self._timer_at <= due):
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = due
        delay = max(0, due - self._node.now_ms()) / 1000
        self._timer = self._node.loop.call_later(delay, self._fire)

    def _reload(self) -> None:
        """The window ran dry: the earliest stored messages back from the index (no bodies)."""
        self.index.apply(_reload_command(self._node.store.iter_index(self.key)))

    def _fire(self) -> None:
        self._timer = None
        self._timer_at = None
        if self._stopped:
            return
        if not _exists(self._node, self.vhost, self.name):
            self._drop_all()
            return
        now = self._node.now_ms()
        due = self.index.due(now, ROUTE_BATCH)
        if due:
            self.index.apply(Routing(tuple(ref for _, ref in due)))
            records = self._node.persistence.read(self.key, [ref for _, ref in due])
            for (at, ref), record in zip(due, records, strict=True):
                if record is None:  # deleted meanwhile (cannot happen while in flight): nothing to route
                    self.index.apply(Routed((ref,)))
                    continue
                self._route(at, ref, decode_record(ref, record))
        self._arm()

    def _route(self, due: int, ref: int, stored: QueueMessage) -> None:
        key = stored.routing_keys[0] if stored.routing_keys else ""
        try:
            message = Message.from_bytes(stored.payload)
            queues = _route_now(self._node, self.vhost, self.name, key, message)
        except RoutingError:
            self._drop_all()  # the exchange is gone
            return
        except Exception:
            log.exception("delayed message %s of exchange '%s' in vhost '%s' could not be routed; dropped",
                          ref, self.name, self.vhost)  # fmt: skip
            self.dropped += 1
            self._delete(ref)
            return
        if not queues:
            self.dropped += 1  # unroutable once due: the plugin drops it too
            self._delete(ref)
            return
        header = message.header
        ttl = header.ttl if header is not None else None
        expires_at = self._node.now_ms() + ttl if ttl is not None else None  # the TTL counts from routing
        durable = bool(header is not None and header.durable)
        outcomes: list[Outcome] = []

        def confirmed(outcome: Outcome) -> None:
            outcomes.append(outcome)
            if len(outcomes) < len(queues) or self._stopped:
                return
            if all(o is Outcome.ACCEPTED for o in outcomes):
                self.routed += 1
                self._delete(ref)
            elif Outcome.REJECTED in outcomes and not {Outcome.UNKNOWN, Outcome.NO_SPACE} & set(outcomes):
                self.dropped += 1  # refused by a queue (reject-publish): as a publisher would be told
                self._delete(ref)
            else:  # lost in flight or no space: routed again (at least once)
                self._node.loop.call_later(RETRY_S, self._retry, due, ref)

        for q in queues:
            q.publish(QueueMessage(0, stored.payload, durable, expires_at, 0, False, self.name, [key]), confirmed)

    def _retry(self, due: int, ref: int) -> None:
        if self._stopped or not self.index.is_in_flight(ref):
            return
        self.index.apply(Retry(((due, ref),)))
        self._arm()

    def _delete(self, ref: int) -> None:
        persistence = self._node.persistence
        ticket = persistence.remove(self.key, ref)
        # out of the index once the delete is on disk, so that a reload never reads it back
        persistence.on_durable(ticket, lambda: self._deleted(ref), lambda: self._deleted(ref))

    def _deleted(self, ref: int) -> None:
        self.index.apply(Routed((ref,)))
        if self.index.needs_reload:
            self._arm()

    def _drop_all(self) -> None:
        self.stop()
        self._node.store.delete_queue(self.key)
        self._gone(self)


def _reload_command(rows: Any) -> Reload:
    return Reload(tuple((due, seq) for seq, _size, _flags, due in rows))
