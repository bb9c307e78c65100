"""This node's side of x-delayed-message exchanges: their delayed messages are kept,
replicated, in an internal quorum queue per exchange, and routed once due.

Each delayed exchange is backed by a quorum queue named "amq.delayed." + the
exchange's name (`backing_name`), declared with the exchange (node/vhosts/vhost.py)
and kept in step with it by `check` (declared if missing, deleted once its exchange is
gone). No new consensus: the queue's Raft group replicates the messages and its
machine keeps their bodies out of memory (queues/quorum/), as for any quorum queue.

In: a message with a positive delay (routing/delayed.py) published to the exchange
goes to the backing queue instead of being routed (`DelayedPublish`, which node/vhosts/vhost.py's
`route` hands the publisher), with its due time (the node's clock + x-delay) in the
annotation x-opt-delay-until; the publisher is accepted once the queue confirms it,
i.e. once a majority of its members stored it.

Out: every node with a member of the backing queue attaches one consumer to it, a
`DelayScheduler`, with credit for everything. It keeps each message it receives
checked out, drops the body and keeps only the due time and the message id (a
DelayIndex entry, routing/delay_index.py). A timer set to the earliest due time
releases the due messages back to the queue, which delivers them again at once (a
returned message goes first), bodies and all; a message that is due when it arrives
is routed as the exchange's x-delayed-type routes it then (VHost.route_now) and
settled (accepted, removed from the queue) only once every target queue confirmed it.
A target that did not confirm (lost in flight, out of space) has it released and
routed again a second later; a message that reaches no queue, or that a queue refuses
(x-overflow reject-publish), is settled and dropped, as the plugin drops it.

So nothing is lost when a node dies: its scheduler's messages are still in the queue,
checked out to a consumer of a node that is gone, and the queue's leader gives them
back (queues/quorum/: consumers of a down node are detached), to be delivered to the
other members' schedulers. A message may be routed twice (at least once), when a node
dies between its targets' confirms and its settlement.
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
from routing.delay_index import Delay, DelayIndex, Take
from routing.delayed import BACKING_PREFIX, backing_name, delay_of
from routing.errors import NotAllowed, NotFound, RoutingError
from routing.table import MAX_NAME_BYTES

if TYPE_CHECKING:
    import asyncio

__all__ = ["BACKING_PREFIX", "DelayScheduler", "DelayedMessages", "DelayedPublish", "backing_name"]

log = logging.getLogger("warren.delayed")

DUE = Symbol("x-opt-delay-until")  # the due time (ms since the epoch) of a held message
# The scheduler holds every message checked out; the queue's consumer timeout (RabbitMQ's 30
# minutes) would give them all back every so often: the longest delay instead (about 49.7 days).
BACKING_ARGUMENTS = {"x-queue-type": "quorum", "x-consumer-timeout": 2**32 - 1}
CREDIT = 1 << 30  # the scheduler's credit: everything the queue holds
ROUTE_BATCH = 1000  # due messages released per timer turn
RETRY_S = 1.0  # a message whose targets did not all confirm is routed again this much later


def check_queue_name(name: str) -> None:
    """The delayed exchanges' queues' prefix is theirs alone (NotAllowed, as a reserved name)."""
    if name.startswith(BACKING_PREFIX):
        raise NotAllowed(f"queue name '{name}' contains reserved prefix '{BACKING_PREFIX}*' "
                         f"(the queues of x-delayed-message exchanges)")  # fmt: skip


def check_name(exchange: str) -> None:
    """A delayed exchange's name leaves room for its queue's prefix."""
    if len(backing_name(exchange).encode()) > MAX_NAME_BYTES:
        raise RoutingError(f"a delayed exchange's name is at most {MAX_NAME_BYTES - len(BACKING_PREFIX)} bytes "
                           f"(its messages' queue is named '{BACKING_PREFIX}' + the name)")  # fmt: skip


class DelayedNode(Protocol):
    """What the delayed exchanges use of the node (node/broker.py)."""

    loop: asyncio.AbstractEventLoop
    vhosts: dict[str, Any]  # name -> node/vhosts/vhost.py's VHost

    def now_ms(self) -> int: ...

    def background(self, coro: Any, what: str) -> None: ...


class Counters:
    __slots__ = ("published", "routed", "dropped")

    def __init__(self) -> None:
        self.published = 0  # delayed messages taken and confirmed through this node (publish in)
        self.routed = 0  # routed once due by this node's scheduler, confirmed by the targets (publish out)
        self.dropped = 0  # due, and reaching no queue or refused by one


class DelayedMessages:
    """Every delayed exchange of this node: the publishers' side, the schedulers, the counts."""

    def __init__(self, node: DelayedNode):
        self._node = node
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
        """Where a message delayed by `delay` ms goes: the exchange's backing queue."""
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
        """messages_delayed (the backing queue's messages, wherever its members are) and
        this node's counters."""
        held = self._node.vhosts.get(vhost)
        queue = held.queues.get(backing_name(exchange)) if held is not None else None
        delayed = 0 if queue is None else queue.message_count + queue.unacked_count
        counters = self._counters.get((vhost, exchange)) or Counters()
        return {"messages_delayed": delayed, "published": counters.published, "routed": counters.routed,
                "dropped": counters.dropped}  # fmt: skip

    # ------------------------------------------------------------ keeping in step

    def check(self) -> None:
        """Attaches a scheduler to each backing queue with a member here (and drops those
        whose queue went); declares the missing backing queues and deletes the orphans."""
        wanted: dict[tuple[str, str], Any] = {}
        missing: list[tuple[Any, str]] = []
        orphans: list[tuple[Any, str]] = []
        for vhost in list(self._node.vhosts.values()):
            delayed = vhost.routing.delayed_exchanges
            for exchange in delayed:
                queue = vhost.queues.get(backing_name(exchange))
                if queue is None:
                    missing.append((vhost, exchange))
                elif not queue.remote and queue.type_name == "quorum":
                    wanted[vhost.name, exchange] = queue
            for name in [n for n in vhost.queues if n.startswith(BACKING_PREFIX)]:
                if name[len(BACKING_PREFIX) :] not in delayed:
                    orphans.append((vhost, name))
        for key, scheduler in list(self._schedulers.items()):
            if wanted.get(key) is not scheduler.queue or scheduler.stopped:
                scheduler.stop()
                del self._schedulers[key]
        for key, queue in wanted.items():
            if key not in self._schedulers:
                scheduler = DelayScheduler(self._node, key[0], key[1], queue, self.counters(*key))
                self._schedulers[key] = scheduler
                scheduler.start()
        if (missing or orphans) and not self._reconciling:
            self._reconciling = True
            self._node.background(self._reconcile(missing, orphans), "keeping delayed exchanges' queues in step")

    async def _reconcile(self, missing: list[tuple[Any, str]], orphans: list[tuple[Any, str]]) -> None:
        try:
            for vhost, exchange in missing:
                if exchange in vhost.routing.delayed_exchanges:
                    await vhost.declare_queue(
                        backing_name(exchange), True, arguments=dict(BACKING_ARGUMENTS), internal=True
                    )
            for vhost, name in orphans:
                if name[len(BACKING_PREFIX) :] not in vhost.routing.delayed_exchanges and name in vhost.queues:
                    await vhost.delete_queue(name)
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
    """What a publisher sees of a delayed exchange for one message: a queue, the backing
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


class DelayScheduler:
    """The consumer of one backing queue on this node: holds what it receives until due,
    then routes it (see the module's docstring)."""

    presettled = False

    def __init__(self, node: DelayedNode, vhost: str, exchange: str, queue: Any, counters: Counters):
        self._node = node
        self.vhost = vhost
        self.exchange = exchange
        self.queue = queue
        self.counters = counters
        self.index = DelayIndex()
        self.stopped = False
        self._detached = False
        self._received = 0  # deliveries: the link's delivery-count, for the credit top-ups
        self._granted_at = 0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None

    def start(self) -> None:
        self.queue.attach_consumer(self)
        self.queue.credit(self, 0, CREDIT, False, False)

    def stop(self) -> None:
        self._halt()
        if not self._detached and not self.queue.deleted:
            self._detached = True
            self.queue.detach_consumer(self)  # what it held goes back to the queue

    # ------------------------------------------------------------ Consumer

    def deliver(self, queue: Any, message: QueueMessage) -> None:
        self._received += 1
        if self._received - self._granted_at >= CREDIT // 2:
            self._granted_at = self._received
            queue.credit(self, self._received & 0xFFFFFFFF, CREDIT, False, False)
        if self.stopped:
            return
        due = (message.annotations or {}).get(DUE)
        now = self._node.now_ms()
        if isinstance(due, int) and due > now:
            self.index.apply(Delay(message.seq, due))  # the body is dropped: the queue keeps it
            self._arm()
        else:  # due (or published straight to the queue: routed at once)
            self._route(message)

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
            self.queue.settle(self, list(refs), RELEASE)
        self._arm()

    def _route(self, message: QueueMessage) -> None:
        ref = message.seq
        key = message.routing_keys[0] if message.routing_keys else ""
        try:
            parsed = Message.from_bytes(message.payload)
            vhost = self._node.vhosts.get(self.vhost)
            if vhost is None:
                raise NotFound(f"no vhost '{self.vhost}'")
            queues = vhost.route_now(self.exchange, key, parsed)
        except RoutingError:  # the exchange is gone: its queue goes too (DelayedMessages.check)
            return
        except Exception:
            log.exception("delayed message %s of exchange '%s' in vhost '%s' could not be routed; dropped",
                          ref, self.exchange, self.vhost)  # fmt: skip
            self._settled(ref, dropped=True)
            return
        if not queues:
            self._settled(ref, dropped=True)  # unroutable once due: the plugin drops it too
            return
        header = parsed.header
        ttl = header.ttl if header is not None else None
        expires_at = self._node.now_ms() + ttl if ttl is not None else None  # the TTL counts from routing
        durable = bool(header is not None and header.durable)
        on_outcome = _all_outcomes(len(queues), lambda outcomes: self._confirmed(ref, outcomes))
        annotations = {k: v for k, v in (message.annotations or {}).items() if k != DUE} or None
        for q in queues:
            q.publish(QueueMessage(0, message.payload, durable, expires_at, 0, False, self.exchange, [key],
                                   annotations=annotations), on_outcome)  # fmt: skip

    def _confirmed(self, ref: int, outcomes: list[Outcome]) -> None:
        if self.stopped:
            return  # detached: the queue gave the message back, another scheduler routes it again
        if all(o is Outcome.ACCEPTED for o in outcomes):
            self._settled(ref, dropped=False)
        elif Outcome.REJECTED in outcomes and not {Outcome.UNKNOWN, Outcome.NO_SPACE} & set(outcomes):
            self._settled(ref, dropped=True)  # refused by a queue (reject-publish), as a publisher is told
        else:  # lost in flight or no space: released, so delivered and routed again (at least once)
            self._node.loop.call_later(RETRY_S, self._retry, ref)

    def _retry(self, ref: int) -> None:
        if not self.stopped:
            self.queue.settle(self, [ref], RELEASE)

    def _settled(self, ref: int, dropped: bool) -> None:
        if dropped:
            self.counters.dropped += 1
        else:
            self.counters.routed += 1
        if not self.stopped:
            self.queue.settle(self, [ref], ACCEPT)


def _all_outcomes(n: int, done: Callable[[list[Outcome]], None]) -> ConfirmCallback:
    outcomes: list[Outcome] = []

    def one(outcome: Outcome) -> None:
        outcomes.append(outcome)
        if len(outcomes) == n:
            done(outcomes)

    return one
