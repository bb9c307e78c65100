"""Classic queues: one node, FIFO, durable or transient messages.

`ClassicQueue` is pure logic in the style of a sans-I/O core: no asyncio, no
clock, no disk. Time, timers, dead-lettering and self-deletion come through
the injected `QueueHost`; durability and paging through an injected
`Persistence` (persistence.py: `StorePersistence` over the node's
MessageStore and GroupCommitter, for durable and transient queues alike
since both page; `MemoryPersistence` for pure tests).

Where the messages are (invariant: every message is in exactly one place):
ready for delivery (messages.py: `ReadyMessages`, the returned heap, the
ready deque in memory and, behind the memory window, the paged tail of
positions whose bodies are on disk only: paging.py), or per consumer,
delivered and not yet settled (`ConsumerState.unacked`, seq -> msg).

Durability: a message is written through `Persistence` only when both it and
the queue are durable ("stored"); its publish confirm is sent from the
`on_durable` callback, after the fsync that covers it [3.4.2]. Delivering a
stored message writes nothing: after a restart every recovered message counts
as acquired (first-acquirer false), since it may have been delivered before.
A released message changes nothing on disk; a modified one (delivery count,
annotations) is rewritten.

Flow control is credit API v2 (flow.py: `CreditFlow`). Limits (x-max-length,
x-max-length-bytes with x-overflow), TTL (x-message-ttl and per message,
checked at the head) and x-expires are handled here, around the dispatch.

Re-entrancy: `Consumer.deliver`, `credit_reply`, confirms and
`QueueHost.dead_letter` may call back into the queue (a dead letter can even
come back to it). All state is updated before any such call, and a dispatch
started while one runs only asks the running one to go round again.
"""

from __future__ import annotations

from typing import Any

from amqp import serial
from queues.base import ConfirmCallback, Consumer, Outcome, Queue, QueueHost, QueueMessage, Settlement

from .checkpoint import CHECKPOINT_EVERY, Checkpointer
from .config import DROP_HEAD, REJECT_PUBLISH_DLX, ClassicQueueConfig, ClassicQueueCounters
from .figures import QueueFigures
from .flow import CreditFlow
from .messages import ReadyMessages
from .paging import PagedTail
from .persistence import MemoryPersistence, Persistence, store_key
from .recovery import QueueRecovery
from .retention import Retention
from .timeouts import ConsumerTimeouts

__all__ = ["ClassicQueue"]



def _modify(msg: QueueMessage, settlement: Settlement) -> bool:
    """[3.4.5] Merges the settlement's annotations into the message and counts
    a failed delivery; returns whether the message changed."""
    changed = False
    if settlement.annotations:
        merged = dict(msg.annotations) if msg.annotations else {}
        merged.update(settlement.annotations)
        msg.annotations = merged
        changed = True
    if settlement.delivery_failed:
        msg.delivery_count += 1
        changed = True
    return changed


class ClassicQueue(QueueRecovery, QueueFigures, Queue):
    """`memory_window`/`memory_bytes`: the most ready messages/payload bytes
    kept in memory (None: no limit); the rest are paged to `persistence`.
    `checkpoint_every`: publishes or tail reads between a durable queue's
    checkpoints, at least (checkpoint.py). `consumer_timeout`: the node's, ms
    (timeouts.py; x-consumer-timeout overrides it); 0: none."""

    type_name = "classic"

    def __init__(self, vhost: str, name: str, durable: bool, exclusive_owner: Any, auto_delete: bool,
                 arguments: dict, *, host: QueueHost, persistence: Persistence | None = None,
                 memory_window: int | None = None, memory_bytes: int | None = None,
                 checkpoint_every: int = CHECKPOINT_EVERY, consumer_timeout: int = 0) -> None:  # fmt: skip
        super().__init__(vhost, name, durable, exclusive_owner, auto_delete, arguments)
        self.config = ClassicQueueConfig.from_arguments(self.arguments)
        self.stats = ClassicQueueCounters()
        self.store_key = store_key(vhost, name)
        self._host = host
        self._persistence: Persistence = persistence if persistence is not None else MemoryPersistence()
        self._next_seq = 0
        self._recovered_below = 0  # seqs below this were recovered at start: they count as acquired
        self._messages = self._ready_messages(memory_window, memory_bytes)
        self._unacked_count = 0
        self._unacked_bytes = 0  # payload bytes of unsettled deliveries (held_bytes)
        self._flow = CreditFlow(self.config.single_active_consumer)
        self._dispatching = False
        self._again = False
        self._fresh: QueueMessage | None = None  # being published: exempt from TTL for its first dispatch
        self._drop_head = self.config.limited and self.config.overflow == DROP_HEAD
        self._reject_when_full = self.config.limited and self.config.overflow != DROP_HEAD
        self._has_ttl = self.config.message_ttl is not None
        self._had_consumer = False
        self._retention = Retention(self)  # dead-lettering, limits, TTL, x-expires
        self._discard = self._retention.discard
        self._checkpoints = self._checkpointer(checkpoint_every) if durable else None
        self._timeouts = ConsumerTimeouts(self, consumer_timeout)

    def _checkpointer(self, every: int) -> Checkpointer | None:
        """A durable queue's crash-safe positions (checkpoint.py)."""
        tail = self._messages.tail
        checkpoints = Checkpointer(self._make_checkpoint,
                                   lambda blob: self._persistence.put_positions(self.store_key, blob),
                                   lambda: tail.positions.runs, every)  # fmt: skip
        tail.before_take = checkpoints.before_take
        return checkpoints

    def _ready_messages(self, memory_window: int | None, memory_bytes: int | None) -> ReadyMessages:
        """Where the ready messages are kept (a priority queue keeps one such per priority)."""
        tail = PagedTail(self._persistence, self.store_key, self._load_paged)
        return ReadyMessages(tail, memory_window, memory_bytes, self._page_out)

    # ------------------------------------------------------------ state

    @property
    def consumer_count(self) -> int:
        return len(self._flow.consumers)

    @property
    def consumer_capacity(self) -> float:
        """1.0 while some consumer may receive (it has credit and, under
        x-single-active-consumer, is the active one), else 0.0."""
        return 1.0 if any(self._flow.active.values()) else 0.0

    def link_state(self, consumer: Consumer) -> tuple[int, int, bool] | None:
        """(delivery_count, credit, drain) of an attached consumer."""
        cs = self._flow.get(consumer)
        return None if cs is None else (cs.delivery_count, cs.credit, cs.drain)

    def consumer_activity(self, consumer: Consumer) -> str:
        """As RabbitMQ's consumer listing: "up", or with x-single-active-consumer
        "single_active" or "waiting"."""
        cs = self._flow.get(consumer)
        if cs is None or not self._flow.single_active:
            return "up"
        return "waiting" if self._flow.waiting(cs) else "single_active"

    def touch(self) -> None:
        """The queue was used without a consumer (redeclared, read by
        management): restarts the x-expires countdown."""
        self._retention.touch()

    def apply_policy(self, arguments: dict) -> None:
        """Acts from now on on `arguments`: the queue's own and those a
        policy adds (node/vhosts/policies.py). Limits apply at once to the
        messages already here; a message TTL to messages published from now on."""
        config = ClassicQueueConfig.from_arguments(arguments)  # raises QueueArgumentError
        if config == self.config and arguments == self.effective_arguments:
            return
        self._timeouts.configure(arguments)  # raises QueueArgumentError
        self.effective_arguments = dict(arguments)
        self.config = config
        self._drop_head = config.limited and config.overflow == DROP_HEAD
        self._reject_when_full = config.limited and config.overflow != DROP_HEAD
        self._has_ttl = self._has_ttl or config.message_ttl is not None
        self._retention.expiry_changed()
        if not self.deleted:
            self._dispatch()

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
        if self._reject_when_full and self._retention.would_overflow(message.size):
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
        if self.durable and message.durable:
            ticket = self._persistence.put(self.store_key, seq, message)
            self._messages.append(message, ticket, stored=True)
            if confirm is not None:
                # on a full disk the confirm waits for the write once there is room: the
                # message is in the queue already, so refusing it would be a lie
                self._persistence.on_durable(ticket, lambda: self._confirm(confirm))
        else:
            self._messages.append(message)
            if confirm is not None:
                self._confirm(confirm)
        if self._checkpoints is not None:
            self._checkpoints.published(self._next_seq)
        outer, self._fresh = self._fresh, message
        try:
            self._dispatch()
        finally:
            self._fresh = outer

    def _confirm(self, confirm: ConfirmCallback) -> None:
        self.stats.confirmed += 1
        confirm(Outcome.ACCEPTED)

    # ------------------------------------------------------------ consuming

    def attach_consumer(self, consumer: Consumer, priority: int = 0, *, delivery_count: int = 0) -> None:
        """A new consumer starts with no credit; `delivery_count` is the
        initial delivery-count the broker sent in its attach [2.7.4]."""
        if self.deleted:
            return
        self._flow.attach(consumer, priority, delivery_count)
        self._had_consumer = True

    def detach_consumer(self, consumer: Consumer) -> None:
        cs = self._flow.detach(consumer)
        if cs is None:
            return
        for msg in cs.unacked.values():
            self._unacked_bytes -= msg.size
            self._requeue(msg, changed=False)
        self._unacked_count -= len(cs.unacked)
        cs.unacked = {}
        if not self._flow.consumers:
            if self.auto_delete and self._had_consumer:
                self._delete_self()
                return
            self._retention.idle_since_now()
        self._dispatch()

    def credit(self, consumer: Consumer, delivery_count: int | None, link_credit: int, drain: bool,
               echo: bool) -> None:  # fmt: skip
        cs = self._flow.get(consumer)
        if cs is None or self.deleted:
            return
        self._flow.set_credit(cs, delivery_count, link_credit, drain, echo)
        self._dispatch()

    def settle(self, consumer: Consumer, seqs: list[int], settlement: Settlement) -> None:
        cs = self._flow.get(consumer)
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
            self._unacked_bytes -= msg.size
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
                changed = _modify(msg, settlement)
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
            for msg in self._messages.in_memory():
                if msg.durable:
                    remove(key, msg.seq)
        self._messages.tail.drop()
        self._messages.clear()
        self.write_checkpoint()  # in the purge's batch: the old checkpoint's runs are gone
        self._retention.cancel_ttl_timer()
        self.stats.dropped += count  # the audit's conservation counts purged messages as dropped
        return count

    def delete(self) -> int:
        """Drops everything, ready and unsettled; returns how many messages."""
        if self.deleted:
            return 0
        count = self.message_count + self._unacked_count
        self.deleted = True
        consumers = [cs.consumer for cs in self._flow.consumers.values()]
        self._retention.cancel()
        if self.durable or self._messages.tail:  # a transient queue may have page copies
            self._persistence.drop_queue(self.store_key)
        self._messages.clear()
        self._unacked_count = 0
        self._unacked_bytes = 0
        self._flow.clear()
        for consumer in consumers:  # after the state is gone: they may call back
            consumer.queue_deleted()
        return count

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
                if self._flow.prios:
                    self._deliver_loop()
                if self._drop_head:
                    self._retention.drop_over_limit()
                if self._has_ttl:
                    self._retention.expire_head()
                if not self._again or self.deleted:
                    break
        finally:
            self._dispatching = False
        if self._unacked_count and self._timeouts.timeout:
            self._timeouts.watch()
        flow = self._flow
        if flow.draining or flow.replies:
            flow.send_replies(not self._messages, lambda: self.message_count)

    def _deliver_loop(self) -> None:
        messages = self._messages
        head, pop_head = messages.head, messages.pop_head
        active, prios = self._flow.active, self._flow.prios
        stats = self.stats
        durable = self.durable
        now = -1
        while prios and messages and not self.deleted:
            msg = head()
            expires_at = msg.expires_at
            if expires_at is not None and msg is not self._fresh:
                if now < 0:
                    now = self._host.now_ms()
                if expires_at <= now:
                    pop_head()
                    self._discard(msg, "expired")
                    continue
            pop_head()
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
                self._unacked_bytes += msg.size
            consumer.deliver(self, msg)

    def _requeue(self, msg: QueueMessage, changed: bool) -> None:
        """Back to its place among the ready messages (by seq)."""
        msg.acquired = True
        self._timeouts.requeued(msg.seq)
        self._messages.requeue(msg)
        if changed and self.durable and msg.durable:
            self._persistence.update(self.store_key, msg.seq, msg)

    # ------------------------------------------------------------ x-expires, auto-delete

    def _delete_self(self) -> None:
        self.delete()
        self._host.queue_deleted(self)
