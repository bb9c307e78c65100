"""Classic queues: one node, FIFO, durable or transient messages.

`ClassicQueue` is pure logic in the style of a sans-I/O core: no asyncio, no
clock, no disk. Time, timers, dead-lettering and self-deletion come through
the injected `QueueHost`; durability through an injected `Persistence`
(`StorePersistence` over the node's MessageStore and GroupCommitter, or
`MemoryPersistence` for transient queues and tests).

Where the messages are (invariant: every message is in exactly one place):

    _returned  heap of (seq, msg): messages that went back to the queue
               (released, modified, their consumer detached)
    _ready     deque of messages in seq order, never yet taken from the queue
    unacked    per consumer, seq -> msg: delivered, not yet settled

Every message taken from the queue is its head (the smallest seq), so each
returned seq is below every seq still in `_ready`: the head is `_returned[0]`
if there is one, else `_ready[0]`. Requeues are O(log n), everything else on
the publish/deliver path is O(1).

Durability: a message is written through `Persistence` only when both it and
the queue are durable ("stored"); its publish confirm is sent from the
`on_durable` callback, after the fsync that covers it [3.4.2]. Delivering a
stored message writes nothing: after a restart every recovered message counts
as acquired (first-acquirer false), since it may have been delivered before. A released message changes nothing on disk; a modified one (delivery
count, annotations) is rewritten.

Flow control is credit API v2 (REFERENCE.md): the queue holds each consumer
link's delivery-count, credit and drain, and answers FLOWs that asked for it
with `Consumer.credit_reply`. Delivery counts use RFC 1982 arithmetic.

Re-entrancy: `Consumer.deliver`, `credit_reply`, confirms and
`QueueHost.dead_letter` may call back into the queue (a dead letter can even
come back to it). All state is updated before any such call, and a dispatch
started while one runs only asks the running one to go round again.
"""

from __future__ import annotations

import heapq
import struct
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from amqp import serial
from amqp.codec import dumps, loads
from amqp.errors import DecodeError
from storage.message_store import Record, StoreFormatError, Ticket

from .base import ConfirmCallback, Consumer, Outcome, Queue, QueueArgumentError, QueueHost, QueueMessage, Settlement

__all__ = [
    "ClassicQueue",
    "ClassicQueueConfig",
    "ClassicQueueCounters",
    "MemoryPersistence",
    "Persistence",
    "QueueArgumentError",
    "StorePersistence",
    "decode_record",
    "encode_record",
    "store_key",
]

MAX_CREDIT = serial.HALF - 1  # keeps delivery_count + credit a meaningful serial number [2.6.7]
_MAX_U32 = serial.MASK

DROP_HEAD = "drop-head"
REJECT_PUBLISH = "reject-publish"
REJECT_PUBLISH_DLX = "reject-publish-dlx"
_OVERFLOWS = (DROP_HEAD, REJECT_PUBLISH, REJECT_PUBLISH_DLX)


# ---------------------------------------------------------------- configuration


def _non_negative(arguments: dict, name: str, positive: bool = False) -> int | None:
    value = arguments.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < (1 if positive else 0):
        kind = "a positive" if positive else "a non-negative"
        raise QueueArgumentError(f"{name} must be {kind} integer, got {value!r}")
    return int(value)


@dataclass(frozen=True, slots=True)
class ClassicQueueConfig:
    """The queue arguments a classic queue acts on, validated; immutable."""

    message_ttl: int | None = None  # x-message-ttl, ms
    expires: int | None = None  # x-expires, ms unused before the queue deletes itself
    max_length: int | None = None  # x-max-length, ready messages
    max_length_bytes: int | None = None  # x-max-length-bytes, ready payload bytes
    overflow: str = DROP_HEAD  # x-overflow
    dead_letter: bool = False  # x-dead-letter-exchange is set ("" is the default exchange)

    @property
    def limited(self) -> bool:
        return self.max_length is not None or self.max_length_bytes is not None

    @classmethod
    def from_arguments(cls, arguments: dict) -> ClassicQueueConfig:
        overflow = arguments.get("x-overflow", DROP_HEAD)
        if overflow not in _OVERFLOWS:
            raise QueueArgumentError(f"x-overflow must be one of {', '.join(_OVERFLOWS)}, got {overflow!r}")
        dlx = arguments.get("x-dead-letter-exchange")
        if dlx is not None and not isinstance(dlx, str):
            raise QueueArgumentError(f"x-dead-letter-exchange must be a string, got {dlx!r}")
        if arguments.get("x-dead-letter-routing-key") is not None and dlx is None:
            raise QueueArgumentError("x-dead-letter-routing-key requires x-dead-letter-exchange")
        return cls(
            message_ttl=_non_negative(arguments, "x-message-ttl"),
            expires=_non_negative(arguments, "x-expires", positive=True),
            max_length=_non_negative(arguments, "x-max-length"),
            max_length_bytes=_non_negative(arguments, "x-max-length-bytes"),
            overflow=str(overflow),
            dead_letter=dlx is not None,
        )


@dataclass(slots=True)
class ClassicQueueCounters:
    """Monotonic counters for metrics."""

    published: int = 0  # publish() calls on a live queue, refused ones included
    confirmed: int = 0  # ACCEPTED confirms sent
    rejected: int = 0  # publishes refused by x-overflow reject-publish(-dlx)
    delivered: int = 0  # transfers handed to consumers
    redelivered: int = 0  # ... of messages that had been acquired before
    acknowledged: int = 0  # accepted settlements
    dead_lettered: int = 0  # handed to QueueHost.dead_letter (any reason)
    dropped: int = 0  # discarded without a dead-letter exchange (any reason)
    expired: int = 0  # TTL expiries (also counted as dead_lettered or dropped)


# ---------------------------------------------------------------- persistence


class Persistence(Protocol):
    """Where a durable queue writes its durable messages. Writes return a
    ticket; `on_durable(ticket, cb)` calls cb once that write (and every
    earlier one) is on disk."""

    def put(self, queue: str, seq: int, message: QueueMessage) -> Ticket: ...

    def update(self, queue: str, seq: int, message: QueueMessage) -> Ticket: ...

    def remove(self, queue: str, seq: int) -> Ticket: ...

    def drop_queue(self, queue: str) -> Ticket: ...

    def on_durable(self, ticket: Ticket, callback: Callable[[], None]) -> None: ...


class MemoryPersistence:
    """Keeps nothing; every write is "durable" at once, so confirms are
    immediate (transient queues, pure tests)."""

    def __init__(self) -> None:
        self._ticket: Ticket = 0

    def _next(self) -> Ticket:
        self._ticket += 1
        return self._ticket

    def put(self, queue: str, seq: int, message: QueueMessage) -> Ticket:
        return self._next()

    def update(self, queue: str, seq: int, message: QueueMessage) -> Ticket:
        return self._next()

    def remove(self, queue: str, seq: int) -> Ticket:
        return self._next()

    def drop_queue(self, queue: str) -> Ticket:
        return self._next()

    def on_durable(self, ticket: Ticket, callback: Callable[[], None]) -> None:
        callback()


# Envelope inside Record.body, version 1 (the store's record header already
# holds expires_at and delivery_count):
#
#     offset size field
#     0      1    envelope version, 1
#     1      4    N: u32 length of the metadata
#     5      N    metadata: one AMQP-encoded list
#                   [exchange: string, routing-keys: list of string,
#                    annotations: map or null]
#     5+N    ...  the message payload, exactly as published
#
# Record.flags bit 0 is "acquired" (first-acquirer false on the next
# delivery); the other bits are reserved and must be 0. A reader meeting
# another envelope version raises StoreFormatError; a new layout gets a new
# version and old versions stay decodable. enqueued_at is not used (0).
ENVELOPE_VERSION = 1
FLAG_ACQUIRED = 0x01
_ENVELOPE = struct.Struct(">BI")
_META_CACHE_MAX = 1024
_meta_cache: dict[tuple[str, str], bytes] = {}


def _meta(message: QueueMessage) -> bytes:
    keys = message.routing_keys
    if message.annotations or len(keys) != 1:
        return dumps([message.exchange, list(keys), message.annotations or None])
    # The common case (one key, no annotations) repeats: encode it once.
    cache_key = (message.exchange, keys[0])
    meta = _meta_cache.get(cache_key)
    if meta is None:
        if len(_meta_cache) >= _META_CACHE_MAX:
            _meta_cache.clear()
        meta = _meta_cache[cache_key] = dumps([message.exchange, [keys[0]], None])
    return meta


def encode_record(message: QueueMessage) -> Record:
    meta = _meta(message)
    return Record(
        body=_ENVELOPE.pack(ENVELOPE_VERSION, len(meta)) + meta + message.payload,
        expires_at=message.expires_at,
        delivery_count=min(message.delivery_count, _MAX_U32),
        flags=FLAG_ACQUIRED if message.acquired else 0,
    )


def decode_record(seq: int, record: Record) -> QueueMessage:
    """The stored message at `seq` as a durable QueueMessage."""
    body = record.body
    if len(body) < _ENVELOPE.size:
        raise StoreFormatError(f"message {seq}: record body of {len(body)} bytes has no envelope")
    version, n = _ENVELOPE.unpack_from(body)
    if version != ENVELOPE_VERSION:
        raise StoreFormatError(f"message {seq}: unknown envelope version {version}")
    end = _ENVELOPE.size + n
    if end > len(body):
        raise StoreFormatError(f"message {seq}: envelope metadata runs past the record")
    try:
        meta = loads(body[_ENVELOPE.size : end])
    except DecodeError as e:
        raise StoreFormatError(f"message {seq}: bad envelope metadata: {e}") from None
    if not isinstance(meta, list) or len(meta) != 3:
        raise StoreFormatError(f"message {seq}: envelope metadata is not [exchange, keys, annotations]")
    exchange, keys, annotations = meta
    return QueueMessage(
        seq=seq,
        payload=body[end:],
        durable=True,
        expires_at=record.expires_at,
        delivery_count=record.delivery_count,
        # Any recovered message may have been delivered before the restart:
        # first-acquirer false is the safe answer [3.2.1], and it spares a
        # write per delivery to remember it.
        acquired=True,
        exchange=exchange,
        routing_keys=list(keys),
        annotations=annotations,
    )


class StorePersistence:
    """Persistence on the node's MessageStore, made durable by its GroupCommitter."""

    def __init__(self, store: Any, committer: Any) -> None:
        self.store = store  # storage.message_store.MessageStore
        self.committer = committer  # storage.group_commit.GroupCommitter

    def put(self, queue: str, seq: int, message: QueueMessage) -> Ticket:
        return self.store.put(queue, seq, encode_record(message))

    def update(self, queue: str, seq: int, message: QueueMessage) -> Ticket:
        return self.store.update(queue, seq, encode_record(message))

    def remove(self, queue: str, seq: int) -> Ticket:
        return self.store.delete(queue, seq)

    def drop_queue(self, queue: str) -> Ticket:
        return self.store.delete_queue(queue)

    def on_durable(self, ticket: Ticket, callback: Callable[[], None]) -> None:
        self.committer.on_durable(ticket, callback)


def store_key(vhost: str, name: str) -> str:
    """The queue's name in the message store: unique per (vhost, name); the
    length prefix keeps "a"+"b/c" apart from "a/b"+"c"."""
    return f"{len(vhost)}:{vhost}/{name}"


# ---------------------------------------------------------------- the queue


class _ConsumerState:
    """One consumer link's flow state as the queue holds it (credit API v2).

    Invariants: active == (credit > 0) outside a dispatch step, and an active
    consumer is in exactly one deque of ClassicQueue._active (its priority's).
    """

    __slots__ = ("consumer", "priority", "delivery_count", "credit", "drain", "active", "reply", "unacked")

    def __init__(self, consumer: Consumer, priority: int, delivery_count: int) -> None:
        self.consumer = consumer
        self.priority = priority
        self.delivery_count = delivery_count  # serial number, wraps at 2^32
        self.credit = 0
        self.drain = False
        self.active = False
        self.reply = False  # a credit_reply is owed after the current dispatch
        self.unacked: dict[int, QueueMessage] = {}


class ClassicQueue(Queue):
    type_name = "classic"

    def __init__(self, vhost: str, name: str, durable: bool, exclusive_owner: Any, auto_delete: bool,
                 arguments: dict, *, host: QueueHost, persistence: Persistence | None = None) -> None:  # fmt: skip
        super().__init__(vhost, name, durable, exclusive_owner, auto_delete, arguments)
        self.config = ClassicQueueConfig.from_arguments(self.arguments)
        self.stats = ClassicQueueCounters()
        self.store_key = store_key(vhost, name)
        self._host = host
        self._persistence: Persistence = persistence if persistence is not None else MemoryPersistence()
        self._next_seq = 0
        self._ready: deque[QueueMessage] = deque()
        self._returned: list[tuple[int, QueueMessage]] = []
        self._ready_bytes = 0
        self._unacked_count = 0
        self._consumers: dict[int, _ConsumerState] = {}  # id(consumer) ->
        # Consumers with credit, one rotating deque per priority; priorities
        # with a non-empty deque, highest first.
        self._active: dict[int, deque[_ConsumerState]] = {}
        self._active_prios: list[int] = []
        self._draining: dict[int, _ConsumerState] = {}
        self._replies: list[_ConsumerState] = []
        self._dispatching = False
        self._again = False
        self._fresh: QueueMessage | None = None  # being published: exempt from TTL for its first dispatch
        self._drop_head = self.config.limited and self.config.overflow == DROP_HEAD
        self._reject_when_full = self.config.limited and self.config.overflow != DROP_HEAD
        self._has_ttl = self.config.message_ttl is not None
        self._ttl_timer: Any = None
        self._ttl_timer_at = 0
        self._had_consumer = False
        self._expiry_timer: Any = None
        self._last_used = 0
        if self.config.expires is not None:
            self._last_used = host.now_ms()
            self._arm_expiry(self.config.expires)

    # ------------------------------------------------------------ state

    @property
    def message_count(self) -> int:
        """Ready messages (not those delivered and unsettled), as RabbitMQ reports."""
        return len(self._ready) + len(self._returned)

    @property
    def unacked_count(self) -> int:
        return self._unacked_count

    @property
    def ready_bytes(self) -> int:
        return self._ready_bytes

    @property
    def consumer_count(self) -> int:
        return len(self._consumers)

    def link_state(self, consumer: Consumer) -> tuple[int, int, bool] | None:
        """(delivery_count, credit, drain) of an attached consumer."""
        cs = self._consumers.get(id(consumer))
        return None if cs is None else (cs.delivery_count, cs.credit, cs.drain)

    def info(self) -> dict:
        info = super().info()
        info["messages_unacknowledged"] = self._unacked_count
        info["message_bytes_ready"] = self._ready_bytes
        return info

    def touch(self) -> None:
        """The queue was used without a consumer (redeclared, read by
        management): restarts the x-expires countdown."""
        self._last_used = self._host.now_ms()

    # ------------------------------------------------------------ publishing

    def publish(self, message: QueueMessage, confirm: ConfirmCallback | None) -> None:
        """Takes ownership of `message` and sets its seq."""
        if self.deleted:
            if confirm is not None:
                confirm(Outcome.RELEASED)
            return
        stats = self.stats
        stats.published += 1
        cfg = self.config
        if self._reject_when_full and self._would_overflow(message.size):
            stats.rejected += 1
            if cfg.overflow == REJECT_PUBLISH_DLX and cfg.dead_letter:
                stats.dead_lettered += 1
                self._host.dead_letter(self, message, "maxlen")
            if confirm is not None:
                confirm(Outcome.REJECTED)
            return
        seq = message.seq = self._next_seq
        self._next_seq = seq + 1
        if cfg.message_ttl is not None:
            expires_at = self._host.now_ms() + cfg.message_ttl
            if message.expires_at is None or expires_at < message.expires_at:
                message.expires_at = expires_at
        if message.expires_at is not None:
            self._has_ttl = True
        self._ready.append(message)
        self._ready_bytes += message.size
        if self.durable and message.durable:
            ticket = self._persistence.put(self.store_key, seq, message)
            if confirm is not None:
                self._persistence.on_durable(ticket, lambda: self._confirm(confirm))
        elif confirm is not None:
            self._confirm(confirm)
        outer, self._fresh = self._fresh, message
        try:
            self._dispatch()
        finally:
            self._fresh = outer

    def _confirm(self, confirm: ConfirmCallback) -> None:
        self.stats.confirmed += 1
        confirm(Outcome.ACCEPTED)

    def _would_overflow(self, size: int) -> bool:
        cfg = self.config
        return (cfg.max_length is not None and self.message_count + 1 > cfg.max_length) or (
            cfg.max_length_bytes is not None and self._ready_bytes + size > cfg.max_length_bytes
        )

    # ------------------------------------------------------------ consuming

    def attach_consumer(self, consumer: Consumer, priority: int = 0, *, delivery_count: int = 0) -> None:
        """A new consumer starts with no credit; `delivery_count` is the
        initial delivery-count the broker sent in its attach [2.7.4]."""
        if self.deleted:
            return
        key = id(consumer)
        if key in self._consumers:
            raise ValueError("consumer is already attached")
        self._consumers[key] = _ConsumerState(consumer, priority, delivery_count & serial.MASK)
        self._had_consumer = True

    def detach_consumer(self, consumer: Consumer) -> None:
        cs = self._consumers.pop(id(consumer), None)
        if cs is None:
            return
        if cs.active:
            self._deactivate(cs)
        self._draining.pop(id(consumer), None)
        for msg in cs.unacked.values():
            self._requeue(msg, changed=False)
        self._unacked_count -= len(cs.unacked)
        cs.unacked = {}
        if not self._consumers:
            if self.auto_delete and self._had_consumer:
                self._delete_self()
                return
            if self.config.expires is not None:
                self._last_used = self._host.now_ms()
                self._arm_expiry(self.config.expires)
        self._dispatch()

    def credit(self, consumer: Consumer, delivery_count: int | None, link_credit: int, drain: bool,
               echo: bool) -> None:  # fmt: skip
        cs = self._consumers.get(id(consumer))
        if cs is None or self.deleted:
            return
        # [2.6.7] The receiver may send this FLOW before it has seen our
        # latest transfers: its delivery-count lags ours by those, and they
        # count against the credit it grants now:
        # credit = delivery_count_rcv + link_credit - delivery_count_snd.
        lag = 0 if delivery_count is None else serial.diff(cs.delivery_count, delivery_count)
        credit = link_credit - lag
        cs.credit = 0 if credit <= 0 else min(credit, MAX_CREDIT)
        cs.drain = drain
        if cs.credit > 0 and not cs.active:
            self._activate(cs)
        elif cs.credit == 0 and cs.active:
            self._deactivate(cs)
        if drain:
            self._draining[id(consumer)] = cs
        else:
            self._draining.pop(id(consumer), None)
        if drain or echo:
            self._owe_reply(cs)
        self._dispatch()

    def settle(self, consumer: Consumer, seqs: list[int], settlement: Settlement) -> None:
        cs = self._consumers.get(id(consumer))
        if cs is None or self.deleted:
            return
        kind = settlement.kind
        if kind not in ("accepted", "rejected", "released", "modified"):
            raise ValueError(f"unknown settlement {kind!r}")
        unacked = cs.unacked
        stats = self.stats
        returned = False
        for seq in seqs:
            msg = unacked.pop(seq, None)
            if msg is None:
                continue  # unknown, or settled already
            self._unacked_count -= 1
            if kind == "accepted":
                stats.acknowledged += 1
                if self.durable and msg.durable:
                    self._persistence.remove(self.store_key, seq)
            elif kind == "released":
                self._requeue(msg, changed=False)  # [3.4.4] not a failed delivery
                returned = True
            elif kind == "rejected":
                self._discard(msg, "rejected")
            else:  # modified [3.4.5]
                changed = False
                if settlement.annotations:
                    merged = dict(msg.annotations) if msg.annotations else {}
                    merged.update(settlement.annotations)
                    msg.annotations = merged
                    changed = True
                if settlement.delivery_failed:
                    msg.delivery_count += 1
                    changed = True
                if settlement.undeliverable_here:
                    self._discard(msg, "rejected")
                else:
                    self._requeue(msg, changed)
                    returned = True
        if returned:
            self._dispatch()

    # ------------------------------------------------------------ management

    def purge(self) -> int:
        """Drops the ready messages (not the unsettled ones); returns how many."""
        if self.deleted:
            return 0
        count = self.message_count
        if self.durable:
            remove, key = self._persistence.remove, self.store_key
            for _, msg in self._returned:
                if msg.durable:
                    remove(key, msg.seq)
            for msg in self._ready:
                if msg.durable:
                    remove(key, msg.seq)
        self._returned.clear()
        self._ready.clear()
        self._ready_bytes = 0
        self._cancel_ttl_timer()
        self.stats.dropped += count  # the audit's conservation counts purged messages as dropped
        return count

    def delete(self) -> int:
        """Drops everything, ready and unsettled; returns how many messages."""
        if self.deleted:
            return 0
        count = self.message_count + self._unacked_count
        self.deleted = True
        consumers = [cs.consumer for cs in self._consumers.values()]
        self._cancel_ttl_timer()
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None
        if self.durable:
            self._persistence.drop_queue(self.store_key)
        self._returned.clear()
        self._ready.clear()
        self._ready_bytes = 0
        self._unacked_count = 0
        self._consumers.clear()
        self._active.clear()
        self._active_prios.clear()
        self._draining.clear()
        self._replies.clear()
        for consumer in consumers:  # after the state is gone: they may call back
            consumer.queue_deleted()
        return count

    def restore(self, messages: Iterable[QueueMessage]) -> None:
        """Puts back messages recovered after a restart (any order), before
        anything is published."""
        if self.message_count or self._unacked_count or self._next_seq:
            raise RuntimeError("restore() must come before the queue is used")
        for msg in sorted(messages, key=lambda m: m.seq):
            self._ready.append(msg)
            self._ready_bytes += msg.size
            if msg.expires_at is not None:
                self._has_ttl = True
        if self._ready:
            self._next_seq = self._ready[-1].seq + 1
        self._dispatch()

    def recover(self, records: Iterable[tuple[int, Record]]) -> None:
        """restore() from this queue's entry in MessageStore.recover()."""
        self.restore(decode_record(seq, record) for seq, record in records)

    # ------------------------------------------------------------ dispatch

    def _dispatch(self) -> None:
        """Delivers what credit allows, enforces x-max-length and TTL at the
        head, then completes drains and sends owed credit replies."""
        if self._dispatching:
            self._again = True
            return
        self._dispatching = True
        try:
            while True:
                self._again = False
                if self._active_prios:
                    self._deliver_loop()
                if self._drop_head:
                    self._drop_over_limit()
                if self._has_ttl:
                    self._expire_head()
                if not self._again or self.deleted:
                    break
        finally:
            self._dispatching = False
        if self._draining or self._replies:
            self._credit_replies()

    def _deliver_loop(self) -> None:
        returned, ready = self._returned, self._ready
        active, prios = self._active, self._active_prios
        stats = self.stats
        durable = self.durable
        now = -1
        while prios and (returned or ready) and not self.deleted:
            msg = returned[0][1] if returned else ready[0]
            expires_at = msg.expires_at
            if expires_at is not None and msg is not self._fresh:
                if now < 0:
                    now = self._host.now_ms()
                if expires_at <= now:
                    self._pop_head()
                    self._discard(msg, "expired")
                    continue
            self._pop_head()
            prio = prios[0]
            level = active[prio]
            cs = level[0]
            cs.credit -= 1
            cs.delivery_count = serial.add(cs.delivery_count, 1)
            if cs.credit == 0:
                level.popleft()
                cs.active = False
                if not level:
                    del active[prio]
                    prios.pop(0)
            elif len(level) > 1:
                level.rotate(-1)  # round-robin among equals
            stats.delivered += 1
            if msg.acquired:
                stats.redelivered += 1
            consumer = cs.consumer
            if consumer.presettled:
                if durable and msg.durable:
                    self._persistence.remove(self.store_key, msg.seq)
            else:
                cs.unacked[msg.seq] = msg
                self._unacked_count += 1
            consumer.deliver(self, msg)

    def _credit_replies(self) -> None:
        # [2.6.7] drain: once the messages run out, use up the credit by
        # advancing delivery-count, and tell the receiver.
        draining = self._draining
        if draining:
            if not self._returned and not self._ready:
                self._draining = {}
                for cs in draining.values():
                    if cs.credit > 0:
                        cs.delivery_count = serial.add(cs.delivery_count, cs.credit)
                        cs.credit = 0
                        self._deactivate(cs)
                        self._owe_reply(cs)
            else:
                for key in [k for k, cs in draining.items() if cs.credit == 0]:
                    del draining[key]
        replies, self._replies = self._replies, []
        for cs in replies:
            cs.reply = False
            if self._consumers.get(id(cs.consumer)) is cs:
                cs.consumer.credit_reply(cs.delivery_count, cs.credit, self.message_count, cs.drain)

    def _owe_reply(self, cs: _ConsumerState) -> None:
        if not cs.reply:
            cs.reply = True
            self._replies.append(cs)

    def _activate(self, cs: _ConsumerState) -> None:
        level = self._active.get(cs.priority)
        if level is None:
            level = self._active[cs.priority] = deque()
            self._active_prios.append(cs.priority)
            self._active_prios.sort(reverse=True)
        level.append(cs)
        cs.active = True

    def _deactivate(self, cs: _ConsumerState) -> None:
        if not cs.active:
            return
        level = self._active[cs.priority]
        level.remove(cs)  # O(consumers of this priority): only on FLOW and detach
        cs.active = False
        if not level:
            del self._active[cs.priority]
            self._active_prios.remove(cs.priority)

    # ------------------------------------------------------------ message moves

    def _pop_head(self) -> QueueMessage:
        msg = heapq.heappop(self._returned)[1] if self._returned else self._ready.popleft()
        self._ready_bytes -= msg.size
        return msg

    def _requeue(self, msg: QueueMessage, changed: bool) -> None:
        """Back to its place among the ready messages (by seq)."""
        msg.acquired = True
        heapq.heappush(self._returned, (msg.seq, msg))
        self._ready_bytes += msg.size
        if changed and self.durable and msg.durable:
            self._persistence.update(self.store_key, msg.seq, msg)

    def _discard(self, msg: QueueMessage, reason: str) -> None:
        """A message leaves the queue other than by acceptance: dead-letter
        it (reason "rejected", "expired" or "maxlen") or drop it."""
        stats = self.stats
        if reason == "expired":
            stats.expired += 1
        if self.durable and msg.durable:
            self._persistence.remove(self.store_key, msg.seq)
        if self.config.dead_letter:
            stats.dead_lettered += 1
            self._host.dead_letter(self, msg, reason)
        else:
            stats.dropped += 1

    def _over_limit(self) -> bool:
        cfg = self.config
        return (cfg.max_length is not None and self.message_count > cfg.max_length) or (
            cfg.max_length_bytes is not None and self._ready_bytes > cfg.max_length_bytes
        )

    def _drop_over_limit(self) -> None:
        # x-overflow drop-head: the oldest ready messages make room.
        while (self._returned or self._ready) and not self.deleted and self._over_limit():
            self._discard(self._pop_head(), "maxlen")

    # ------------------------------------------------------------ timers

    def _expire_head(self) -> None:
        """Expired messages leave when they reach the head (RabbitMQ: per-message
        TTL is checked only there); a timer watches the head's expiry."""
        now = self._host.now_ms()
        while (self._returned or self._ready) and not self.deleted:
            msg = self._returned[0][1] if self._returned else self._ready[0]
            expires_at = msg.expires_at
            if expires_at is None:
                return
            if expires_at > now:
                self._arm_ttl(expires_at, now)
                return
            self._pop_head()
            self._discard(msg, "expired")

    def _arm_ttl(self, expires_at: int, now: int) -> None:
        if self._ttl_timer is not None:
            if self._ttl_timer_at <= expires_at:
                return  # fires first; it re-arms for the head then
            self._ttl_timer.cancel()
        self._ttl_timer_at = expires_at
        self._ttl_timer = self._host.call_later((expires_at - now) / 1000, self._on_ttl_timer)

    def _cancel_ttl_timer(self) -> None:
        if self._ttl_timer is not None:
            self._ttl_timer.cancel()
            self._ttl_timer = None

    def _on_ttl_timer(self) -> None:
        self._ttl_timer = None
        if not self.deleted:
            self._dispatch()

    def _arm_expiry(self, delay_ms: int) -> None:
        if self._expiry_timer is None:
            self._expiry_timer = self._host.call_later(delay_ms / 1000, self._on_expiry_timer)

    def _on_expiry_timer(self) -> None:
        self._expiry_timer = None
        expires = self.config.expires
        if self.deleted or self._consumers or expires is None:
            return  # a consumer's detach re-arms it
        left = self._last_used + expires - self._host.now_ms()
        if left > 0:
            self._arm_expiry(left)
        else:
            self._delete_self()

    def _delete_self(self) -> None:
        self.delete()
        self._host.queue_deleted(self)
