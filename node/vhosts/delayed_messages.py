"""This node's side of x-delayed-message exchanges: their delayed messages are kept,
replicated, in internal quorum queues per exchange, and routed once due.

Each delayed exchange is backed by two quorum queues: "amq.delayed." + the exchange's
name (`backing_name`, the inbox) and "amq.delayed-later." + the name (`later_name`),
declared with the exchange (node/vhosts/vhost.py) and kept in step with it by `check`
(declared if missing, deleted once its exchange is gone). No new consensus: the
queues' Raft groups replicate the messages and their machines keep the bodies out of
memory (queues/quorum/), as for any quorum queue. No user deletes, purges or consumes
from them (node/vhosts/vhost.py refuses it, naming why).

In: a message with a positive delay (routing/delayed.py) published to the exchange
goes to the inbox instead of being routed (`DelayedPublish`, which node/vhosts/vhost.py's
`route` hands the publisher), with its due time (the node's clock + x-delay) in the
annotation x-opt-delay-until; the publisher is accepted once the queue confirms it,
i.e. once a majority of its members stored it.

Out: every node with members of the two queues attaches one consumer to both, a
`DelayScheduler`. Memory is bounded by a window (setting
delayed_message_memory_window, default 100,000): the scheduler holds checked out at
most that many messages, each as its due time and message id only (a DelayIndex
entry, routing/delay_index.py; the body stays in the queue), and no more than that
plus as many again (at most MOVING_MAX) are checked out of its queues at once, each
queue's open credit at most half of that extra (so the inbox's never starves a lap),
and no follower lease beyond it (`leased = False`, queues/quorum/queue.py). When the
window is full it keeps the earliest half, gives the rest back, and from then on
holds only messages before its horizon (the last it kept, by due time then id, so a
thousand due the same ms are cut too): a later one is moved to the "later" queue
(published there, stored by a majority, then settled where it was). So the inbox is
read continuously (a short delay published behind a million long ones is seen at
once), and what waits past the horizon lies in the later queue's machine as a ready
message (its ready list: a few bytes each, the floor) and on disk. Once the held
messages drain below a quarter of the window, the scheduler takes one lap of the
later queue (credit for the messages it holds then): it keeps the earliest again,
and moves the rest to the later queue's tail. Cost: beyond the window, each lap
rewrites what waits later; a message due in the gap between a horizon and the lap
that follows it may be routed up to a lap late.

A timer set to the earliest due time gives the due messages back to their queue,
which delivers them again at once (a returned message goes first), bodies and all; a
message that is due when it arrives is routed as the exchange's x-delayed-type routes
it then (VHost.route_now) and settled (accepted, removed from the queue) only once
every target queue confirmed it. A target that did not confirm (lost in flight, out
of space) has it released and routed again a second later; a message that reaches no
queue, or that a queue refuses (x-overflow reject-publish), is settled and dropped, as
the plugin drops it.

So nothing is lost when a node dies: its scheduler's messages are still in the
queues, checked out to a consumer of a node that is gone, and the queues' leaders
give them back (queues/quorum/: consumers of a down node are detached), to be
delivered to the other members' schedulers. A message may be routed twice (at least
once), when a node dies between its targets' confirms and its settlement, or be held
twice when it dies between a move's confirm and the settlement of the original.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from amqp.message import Message
from amqp.types import Symbol
from node.ops.periodic import Periodic
from queues.base import ACCEPT, RELEASE, ConfirmCallback, Outcome, QueueMessage
from routing.delay_index import Delay, DelayIndex, Keep, Take, entry
from routing.delayed import (
    BACKING_PREFIX,
    INTERNAL_PREFIXES,
    LATER_PREFIX,
    backing_name,
    check_internal,
    delay_of,
    is_internal,
    later_name,
    queue_names,
)
from routing.errors import NotAllowed, NotFound, RoutingError
from routing.table import MAX_NAME_BYTES

if TYPE_CHECKING:
    import asyncio

__all__ = ["BACKING_PREFIX", "INTERNAL_PREFIXES", "check_internal", "DelayScheduler", "DelayedMessages", "DelayedPublish",
           "backing_name", "is_internal", "later_name", "queue_names"]  # fmt: skip

log = logging.getLogger("warren.delayed")

DUE = Symbol("x-opt-delay-until")  # the due time (ms since the epoch) of a held message
# The scheduler holds messages checked out; the queue's consumer timeout (RabbitMQ's 30
# minutes) would give them all back every so often: the longest delay instead (about 49.7 days).
BACKING_ARGUMENTS = {"x-queue-type": "quorum", "x-consumer-timeout": 2**32 - 1}
DEFAULT_WINDOW = 100_000  # setting delayed_message_memory_window: messages a scheduler holds
MOVING_MAX = 1000  # checked out beyond the window: being routed or moved to the later queue
REFILL = 100  # credit is topped up by at least this much (one proposal per hundred deliveries)
ROUTE_BATCH = 1000  # due messages released per timer turn
RETRY_S = 1.0  # a message whose targets did not all confirm is routed again this much later
INBOX, LATER = 0, 1 << 64  # the tag of a held ref: the queue its message id belongs to


def check_queue_name(name: str) -> None:
    """The delayed exchanges' queues' prefixes are theirs alone (NotAllowed, as a reserved name)."""
    for prefix in INTERNAL_PREFIXES:
        if name.startswith(prefix):
            raise NotAllowed(f"queue name '{name}' contains reserved prefix '{prefix}*' "
                             f"(the queues of x-delayed-message exchanges)")  # fmt: skip


def check_name(exchange: str) -> None:
    """A delayed exchange's name leaves room for its queues' prefixes."""
    longest = max(INTERNAL_PREFIXES, key=len)
    if len((longest + exchange).encode()) > MAX_NAME_BYTES:
        raise RoutingError(f"a delayed exchange's name is at most {MAX_NAME_BYTES - len(longest)} bytes "
                           f"(its messages' queue is named '{longest}' + the name)")  # fmt: skip


def check_window(window: Any) -> int:
    """Setting delayed_message_memory_window: a whole number of messages, at least 1."""
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"delayed_message_memory_window must be a number of messages >= 1, got {window!r}")
    return window


class DelayedNode(Protocol):
    """What the delayed exchanges use of the node (node/broker.py)."""

    loop: asyncio.AbstractEventLoop
    vhosts: dict[str, Any]  # name -> node/vhosts/vhost.py's VHost

    def now_ms(self) -> int: ...

    def background(self, coro: Any, what: str) -> None: ...


class Counters:
    __slots__ = ("published", "routed", "dropped", "moved")

    def __init__(self) -> None:
        self.published = 0  # delayed messages taken and confirmed through this node (publish in)
        self.routed = 0  # routed once due by this node's scheduler, confirmed by the targets (publish out)
        self.dropped = 0  # due, and reaching no queue or refused by one
        self.moved = 0  # moved to the later queue by this node's scheduler (past its horizon)


class DelayedMessages:
    """Every delayed exchange of this node: the publishers' side, the schedulers, the counts."""

    def __init__(self, node: DelayedNode, window: int = DEFAULT_WINDOW):
        self._node = node
        self.window = check_window(window)
        self._schedulers: dict[tuple[str, str], DelayScheduler] = {}
        self._counters: dict[tuple[str, str], Counters] = {}
        self._reconciling = False
        self._check: Periodic | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Keeps the delayed exchanges' queues and schedulers in step, every second."""
        self._check = Periodic(loop, 1.0, self.check, "the delayed exchanges' check")
        self._check.start()

    # ------------------------------------------------------------ in

    def publisher(self, vhost: Any, exchange: str, delay: int) -> DelayedPublish:
        """Where a message delayed by `delay` ms goes: the exchange's inbox queue."""
        queue = vhost.queues.get(backing_name(exchange))
        if queue is None:
            raise NotFound(f"the queue that holds the delayed messages of exchange '{exchange}' in vhost "
                           f"'{vhost.name}' is not there yet (declared with the exchange): try again")  # fmt: skip
        return DelayedPublish(queue, self._node.now_ms() + delay, self.counters(vhost.name, exchange))

    def resolve(self, vhost: Any, queues: list[Any], headers: Any) -> list[Any]:
        """`queues` as routing found them, with each delayed exchange's queue (named by the
        table's walk for a delayed message that reached the exchange) as its DelayedPublish."""
        for i, queue in enumerate(queues):
            if queue.name.startswith(BACKING_PREFIX):
                queues[i] = self.publisher(vhost, queue.name[len(BACKING_PREFIX) :], delay_of(headers))
        return queues

    def counters(self, vhost: str, exchange: str) -> Counters:
        counters = self._counters.get((vhost, exchange))
        if counters is None:
            counters = self._counters[vhost, exchange] = Counters()
        return counters

    # ------------------------------------------------------------ counts

    def stats(self, vhost: str, exchange: str) -> dict[str, int]:
        """messages_delayed (the messages of the exchange's queues, wherever their members
        are) and this node's counters."""
        held = self._node.vhosts.get(vhost)
        delayed = 0
        for name in queue_names(exchange):
            queue = held.queues.get(name) if held is not None else None
            if queue is not None:
                delayed += queue.message_count + queue.unacked_count
        counters = self._counters.get((vhost, exchange)) or Counters()
        return {"messages_delayed": delayed, "published": counters.published, "routed": counters.routed,
                "dropped": counters.dropped}  # fmt: skip

    def schedulers(self) -> list[DelayScheduler]:
        return list(self._schedulers.values())

    # ------------------------------------------------------------ keeping in step

    def check(self) -> None:
        """Attaches a scheduler to each pair of queues with members here (and drops those
        whose queues went); declares the missing queues and deletes the orphans; lets each
        scheduler see whether a lap of its later queue is due."""
        wanted: dict[tuple[str, str], tuple[Any, Any]] = {}
        missing: list[tuple[Any, str, str]] = []
        orphans: list[tuple[Any, str]] = []
        for vhost in list(self._node.vhosts.values()):
            delayed = vhost.routing.delayed_exchanges
            for exchange in delayed:
                pair = []
                for name in queue_names(exchange):
                    queue = vhost.queues.get(name)
                    if queue is None:
                        missing.append((vhost, exchange, name))
                    pair.append(queue)
                inbox, later = pair
                if all(q is not None and not q.remote and q.type_name == "quorum" for q in pair):
                    wanted[vhost.name, exchange] = (inbox, later)
            for name in [n for n in vhost.queues if is_internal(n)]:
                prefix = BACKING_PREFIX if name.startswith(BACKING_PREFIX) else LATER_PREFIX
                if name[len(prefix) :] not in delayed:
                    orphans.append((vhost, name))
        for key, scheduler in list(self._schedulers.items()):
            if wanted.get(key) != (scheduler.inbox.queue, scheduler.later.queue) or scheduler.stopped:
                scheduler.stop()
                del self._schedulers[key]
        for key, (inbox, later) in wanted.items():
            scheduler = self._schedulers.get(key)
            if scheduler is None:
                scheduler = DelayScheduler(self._node, key[0], key[1], inbox, later, self.counters(*key), self.window)
                self._schedulers[key] = scheduler
                scheduler.start()
            else:
                scheduler.maybe_lap()
        if (missing or orphans) and not self._reconciling:
            self._reconciling = True
            self._node.background(self._reconcile(missing, orphans), "keeping delayed exchanges' queues in step")

    async def _reconcile(self, missing: list[tuple[Any, str, str]], orphans: list[tuple[Any, str]]) -> None:
        try:
            for vhost, exchange, name in missing:
                if exchange in vhost.routing.delayed_exchanges:
                    await vhost.declare_queue(name, True, arguments=dict(BACKING_ARGUMENTS), internal=True)
            for vhost, name in orphans:
                if name in vhost.queues:
                    await vhost.delete_queue(name, internal=True)
        except RoutingError as e:  # raced with another node or a user: the next check looks again
            log.info("delayed exchanges' queues: %s", e)
        finally:
            self._reconciling = False
        self.check()

    def stop(self) -> None:
        if self._check is not None:
            self._check.stop()
        for scheduler in self._schedulers.values():
            scheduler.stop()
        self._schedulers.clear()


class DelayedPublish:
    """What a publisher sees of a delayed exchange for one message: a queue, the inbox
    one, that takes the message with its due time (and holds the publisher when it does)."""

    type_name = "x-delayed-message"
    remote = False

    def __init__(self, queue: Any, due: int, counters: Counters):
        self.queue = queue
        self.due = due
        self._counters = counters

    @property
    def publish_hold(self) -> Any:
        return getattr(self.queue, "publish_hold", None)

    def publish(self, message: QueueMessage, confirm: ConfirmCallback | None) -> None:
        counters = self._counters

        def confirmed(outcome: Outcome) -> None:
            if outcome is Outcome.ACCEPTED:
                counters.published += 1
            if confirm is not None:
                confirm(outcome)

        # durable whatever the header says: the delay is a promise; the TTL counts from routing
        annotations = {**(message.annotations or {}), DUE: self.due}  # a dead letter's x-opt-deaths kept
        held = QueueMessage(0, message.payload, True, None, 0, False, message.exchange, list(message.routing_keys),
                            annotations=annotations)  # fmt: skip
        self.queue.publish(held, confirmed)


class _Source:
    """One of the two queues a scheduler consumes, and its side of the credit."""

    __slots__ = ("queue", "tag", "delivered", "credit_end", "unsettled", "owed")

    def __init__(self, queue: Any, tag: int) -> None:
        self.queue = queue
        self.tag = tag  # INBOX or LATER, or'ed into the refs the index holds
        self.delivered = 0  # deliveries received: the link's delivery-count
        self.credit_end = 0  # delivered + the credit still open
        self.unsettled = 0  # delivered, not yet accepted or released by the scheduler
        self.owed = 0  # the later queue: deliveries still wanted (the lap's rest, what was given back)

    @property
    def open(self) -> int:
        return self.credit_end - self.delivered


class DelayScheduler:
    """The consumer of one delayed exchange's two queues on this node: holds what it
    receives until due, at most `window` of them, then routes it (see the module's
    docstring)."""

    presettled = False
    # no follower lease (queues/quorum/credit_lease.py): it would check out messages beyond the
    # credit and hold them in the replica until more is granted, which a finished lap never does
    leased = False

    def __init__(self, node: DelayedNode, vhost: str, exchange: str, inbox: Any, later: Any, counters: Counters,
                 window: int = DEFAULT_WINDOW):  # fmt: skip
        self._node = node
        self.vhost = vhost
        self.exchange = exchange
        self.inbox = _Source(inbox, INBOX)
        self.later = _Source(later, LATER)
        self.counters = counters
        self.window = window
        self.index = DelayIndex()
        # held: every message seen whose entry (due, then ref) is at most this one; None: no cut since the lap
        self.horizon: int | None = None
        self.lapping = False
        self.laps = 0
        self.stopped = False
        self._detached = False
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None

    @property
    def queue(self) -> Any:
        return self.inbox.queue

    def start(self) -> None:
        for src in (self.inbox, self.later):
            src.queue.attach_consumer(self)
        self._refill(self.inbox)
        self.maybe_lap()

    def stop(self) -> None:
        self._halt()
        if not self._detached:
            self._detached = True
            for src in (self.inbox, self.later):
                if not src.queue.deleted:
                    src.queue.detach_consumer(self)  # what it held goes back to the queue

    @property
    def checked_out(self) -> int:
        return self.inbox.unsettled + self.later.unsettled

    # ------------------------------------------------------------ credit and laps

    def _refill(self, src: _Source) -> None:
        """Opens credit so that what is checked out, and may come, stays within the window
        and MOVING_MAX; the later queue only for the deliveries owed to it."""
        if self.stopped:
            return
        extra = min(MOVING_MAX, self.window)
        room = self.window + extra - self.checked_out - self.inbox.open - self.later.open
        # each queue's open credit is at most half the extra: the inbox's never starves a lap
        cap = max(1, extra // 2)
        room = min(room, cap - src.open)
        if src is self.later:
            room = min(room, src.owed - src.open)
        if room <= 0 or (room < min(REFILL, cap) and src.open > 0):
            return
        src.credit_end += room
        src.queue.credit(self, src.delivered & 0xFFFFFFFF, src.open, False, False)

    def maybe_lap(self) -> None:
        """Starts a lap of the later queue if it holds messages and the window drained
        below a quarter (or none was taken since this scheduler started)."""
        if self.stopped or self.lapping:
            return
        waiting = self.later.queue.message_count
        if waiting <= 0 or (self.laps and len(self.index) >= max(1, self.window // 4)):
            return
        self.lapping = True
        self.laps += 1
        self.horizon = None  # the window takes the earliest of what comes, as at the start
        self.later.owed += waiting
        self._refill(self.later)

    # ------------------------------------------------------------ Consumer

    def deliver(self, queue: Any, message: QueueMessage) -> None:
        src = self.later if queue is self.later.queue else self.inbox
        src.delivered += 1
        src.unsettled += 1
        if src is self.later and src.owed:
            src.owed -= 1
            if not src.owed:
                self.lapping = False
        if self.stopped:
            return
        due = (message.annotations or {}).get(DUE)
        if isinstance(due, int) and due > self._node.now_ms():
            ref = src.tag | message.seq
            if self.horizon is None or entry(ref, due) <= self.horizon:  # a tie on `due` is ordered by ref
                self.index.apply(Delay(ref, due))  # the body is dropped: the queue keeps it
                if len(self.index) > self.window:
                    self._cut()
                self._arm()
            else:
                self._move(src, message)
        else:  # due (or published straight to the queue: routed at once)
            self._route(src, message)
        self._refill(src)

    def credit_reply(self, delivery_count: int, credit: int, available: int, drain: bool) -> None:
        pass  # the scheduler never asks for one (no echo, no drain)

    def queue_deleted(self) -> None:
        self._halt()  # DelayedMessages.check drops it

    def timed_out(self, description: str) -> None:
        # held longer than the queue's consumer timeout (the longest delay): every held message
        # went back to the queue; DelayedMessages.check detaches this one and attaches anew
        self._halt()

    def _halt(self) -> None:
        self.stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # ------------------------------------------------------------ the window

    def _cut(self) -> None:
        """The window is full: keep its earliest half, give the rest back (delivered again,
        they are past the new horizon: moved to the later queue)."""
        back = self.index.apply(Keep(max(1, self.window // 2)))
        self.horizon = self.index.last_entry()
        self._give_back(back)

    def _give_back(self, refs: tuple[int, ...] | list[int]) -> None:
        """Releases held refs to their queues, which deliver them again at once, bodies and all."""
        mask = LATER - 1
        for src in (self.inbox, self.later):
            ids = [r & mask for r in refs if r & LATER == src.tag]
            if ids:
                src.unsettled -= len(ids)
                if src is self.later:
                    src.owed += len(ids)
                src.queue.settle(self, ids, RELEASE)
                self._refill(src)

    def _move(self, src: _Source, message: QueueMessage) -> None:
        """Past the horizon: to the later queue's tail; settled where it was once stored there."""
        ref = message.seq
        moved = QueueMessage(0, message.payload, True, None, 0, False, message.exchange,
                             list(message.routing_keys), annotations=message.annotations)  # fmt: skip

        def confirmed(outcome: Outcome) -> None:
            if self.stopped:
                return  # detached: the original went back to its queue
            if outcome is Outcome.ACCEPTED:
                self.counters.moved += 1
                self._settle(src, ref, ACCEPT)
            else:  # not stored: the original goes back, to be delivered and moved again
                self._node.loop.call_later(RETRY_S, self._retry, src, ref)

        self.later.queue.publish(moved, confirmed)

    def _settle(self, src: _Source, ref: int, settlement: Any) -> None:
        src.unsettled -= 1
        if settlement is RELEASE and src is self.later:
            src.owed += 1
        src.queue.settle(self, [ref], settlement)
        self._refill(src)

    # ------------------------------------------------------------ out

    def _arm(self) -> None:
        due = self.index.next_due()
        if due is None or self.stopped or (self._timer is not None and self._timer_at is not None
                                            and self._timer_at <= due):  # fmt: skip
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = due
        self._timer = self._node.loop.call_later(max(0, due - self._node.now_ms()) / 1000, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._timer_at = None
        if self.stopped:
            return
        refs = self.index.apply(Take(self._node.now_ms(), ROUTE_BATCH))
        if refs:
            # back to the queue, which delivers them again at once, with their bodies: routed then
            self._give_back(refs)
        self._arm()
        self.maybe_lap()

    def _route(self, src: _Source, message: QueueMessage) -> None:
        ref = message.seq
        key = message.routing_keys[0] if message.routing_keys else ""
        try:
            parsed = Message.from_bytes(message.payload)
            vhost = self._node.vhosts.get(self.vhost)
            if vhost is None:
                raise NotFound(f"no vhost '{self.vhost}'")
            queues = vhost.route_now(self.exchange, key, parsed)
        except RoutingError:  # the exchange is gone: its queues go too (DelayedMessages.check)
            return
        except Exception:
            log.exception("delayed message %s of exchange '%s' in vhost '%s' could not be routed; dropped",
                          ref, self.exchange, self.vhost)  # fmt: skip
            self._settled(src, ref, dropped=True)
            return
        if not queues:
            self._settled(src, ref, dropped=True)  # unroutable once due: the plugin drops it too
            return
        header = parsed.header
        ttl = header.ttl if header is not None else None
        expires_at = self._node.now_ms() + ttl if ttl is not None else None  # the TTL counts from routing
        durable = bool(header is not None and header.durable)
        on_outcome = _all_outcomes(len(queues), lambda outcomes: self._confirmed(src, ref, outcomes))
        annotations = {k: v for k, v in (message.annotations or {}).items() if k != DUE} or None
        for q in queues:
            q.publish(QueueMessage(0, message.payload, durable, expires_at, 0, False, self.exchange, [key],
                                   annotations=annotations), on_outcome)  # fmt: skip

    def _confirmed(self, src: _Source, ref: int, outcomes: list[Outcome]) -> None:
        if self.stopped:
            return  # detached: the queue gave the message back, another scheduler routes it again
        if all(o is Outcome.ACCEPTED for o in outcomes):
            self._settled(src, ref, dropped=False)
        elif Outcome.REJECTED in outcomes and not {Outcome.UNKNOWN, Outcome.NO_SPACE} & set(outcomes):
            self._settled(src, ref, dropped=True)  # refused by a queue (reject-publish), as a publisher is told
        else:  # lost in flight or no space: released, so delivered and routed again (at least once)
            self._node.loop.call_later(RETRY_S, self._retry, src, ref)

    def _retry(self, src: _Source, ref: int) -> None:
        if not self.stopped:
            self._settle(src, ref, RELEASE)

    def _settled(self, src: _Source, ref: int, dropped: bool) -> None:
        if dropped:
            self.counters.dropped += 1
        else:
            self.counters.routed += 1
        if not self.stopped:
            self._settle(src, ref, ACCEPT)


def _all_outcomes(n: int, done: Callable[[list[Outcome]], None]) -> ConfirmCallback:
    outcomes: list[Outcome] = []

    def one(outcome: Outcome) -> None:
        outcomes.append(outcome)
        if len(outcomes) == n:
            done(outcomes)

    return one
