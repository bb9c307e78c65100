"""The consumer links of a classic queue and their credit (credit API v2).

The queue holds each link's delivery-count, credit and drain (REFERENCE.md),
and answers the FLOWs that asked for it with `Consumer.credit_reply`.
Consumers with credit wait in one rotating deque per priority (round robin
among equals); `prios` lists the priorities with a non-empty deque, highest
first. Delivery counts use RFC 1982 arithmetic.

With x-single-active-consumer only one consumer (`sac`, the earliest
attached) is ever put in a deque: the others keep their credit and wait;
when the active one detaches, the next in attach order takes over. A
waiting consumer that drains has its drain completed at once, as if the
queue were empty, since it would get nothing until it is active.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from amqp import serial
from queues.base import Consumer, QueueMessage

__all__ = ["MAX_CREDIT", "ConsumerState", "CreditFlow"]

MAX_CREDIT = serial.HALF - 1  # keeps delivery_count + credit a meaningful serial number [2.6.7]


class ConsumerState:
    """One consumer link's flow state as the queue holds it.

    Invariants: active == (credit > 0) outside a dispatch step (a waiting
    single-active consumer: active is False whatever its credit), and an active
    consumer is in exactly one deque of CreditFlow.active (its priority's).
    """

    __slots__ = ("consumer", "priority", "delivery_count", "credit", "drain", "active", "reply", "unacked", "timed_out")

    def __init__(self, consumer: Consumer, priority: int, delivery_count: int) -> None:
        self.consumer = consumer
        self.priority = priority
        self.delivery_count = delivery_count  # serial number, wraps at 2^32
        self.credit = 0
        self.drain = False
        self.active = False
        self.reply = False  # a credit_reply is owed after the current dispatch
        self.unacked: dict[int, QueueMessage] = {}
        self.timed_out = False  # held a message past the consumer timeout (timeouts.py): never active again


class CreditFlow:
    def __init__(self, single_active: bool = False) -> None:
        self.single_active = single_active
        self.sac: ConsumerState | None = None  # single active consumer: the one that receives
        self.consumers: dict[int, ConsumerState] = {}  # id(consumer) -> (attach order)
        self.active: dict[int, deque[ConsumerState]] = {}
        self.prios: list[int] = []
        self.draining: dict[int, ConsumerState] = {}
        self.replies: list[ConsumerState] = []

    def get(self, consumer: Consumer) -> ConsumerState | None:
        return self.consumers.get(id(consumer))

    def attach(self, consumer: Consumer, priority: int, delivery_count: int) -> None:
        key = id(consumer)
        if key in self.consumers:
            raise ValueError("consumer is already attached")
        cs = self.consumers[key] = ConsumerState(consumer, priority, delivery_count & serial.MASK)
        if self.single_active and self.sac is None:
            self.sac = cs

    def detach(self, consumer: Consumer) -> ConsumerState | None:
        cs = self.consumers.pop(id(consumer), None)
        if cs is not None:
            if cs.active:
                self.deactivate(cs)
            self.draining.pop(id(consumer), None)
            if cs is self.sac:
                self.sac = nxt = next(iter(self.consumers.values()), None)
                if nxt is not None and nxt.credit > 0:
                    self.activate(nxt)
        return cs

    def waiting(self, cs: ConsumerState) -> bool:
        """Attached but not the single active consumer."""
        return self.single_active and cs is not self.sac

    def set_credit(self, cs: ConsumerState, delivery_count: int | None, link_credit: int, drain: bool,
                   echo: bool) -> None:  # fmt: skip
        # [2.6.7] The receiver may send this FLOW before it has seen our
        # latest transfers: its delivery-count lags ours by those, and they
        # count against the credit it grants now:
        # credit = delivery_count_rcv + link_credit - delivery_count_snd.
        lag = 0 if delivery_count is None else serial.diff(cs.delivery_count, delivery_count)
        credit = link_credit - lag
        cs.credit = 0 if credit <= 0 else min(credit, MAX_CREDIT)
        cs.drain = drain
        if cs.credit > 0 and not cs.active:
            self.activate(cs)
        elif cs.credit == 0 and cs.active:
            self.deactivate(cs)
        key = id(cs.consumer)
        if drain:
            self.draining[key] = cs
        else:
            self.draining.pop(key, None)
        if drain or echo:
            self.owe_reply(cs)

    def send_replies(self, out_of_messages: bool, available: Callable[[], int]) -> None:
        """After a dispatch: completes drains and sends the credit replies owed.
        `available()`: the ready messages, the count a reply carries."""
        # [2.6.7] drain: once the messages run out, use up the credit by
        # advancing delivery-count, and tell the receiver.
        draining = self.draining
        if draining:
            if out_of_messages:
                self.draining = {}
                for cs in draining.values():
                    if cs.credit > 0:
                        cs.delivery_count = serial.add(cs.delivery_count, cs.credit)
                        cs.credit = 0
                        self.deactivate(cs)
                        self.owe_reply(cs)
            else:
                for key in [k for k, cs in draining.items() if cs.credit == 0 or self.waiting(cs)]:
                    cs = draining.pop(key)
                    if cs.credit > 0:  # waiting: nothing would come, complete the drain
                        cs.delivery_count = serial.add(cs.delivery_count, cs.credit)
                        cs.credit = 0
                        self.owe_reply(cs)
        replies, self.replies = self.replies, []
        for cs in replies:
            cs.reply = False
            if self.consumers.get(id(cs.consumer)) is cs:
                cs.consumer.credit_reply(cs.delivery_count, cs.credit, available(), cs.drain)

    def owe_reply(self, cs: ConsumerState) -> None:
        if not cs.reply:
            cs.reply = True
            self.replies.append(cs)

    def activate(self, cs: ConsumerState) -> None:
        if (self.single_active and cs is not self.sac) or cs.timed_out:
            return  # waits with its credit (stays inactive)
        level = self.active.get(cs.priority)
        if level is None:
            level = self.active[cs.priority] = deque()
            self.prios.append(cs.priority)
            self.prios.sort(reverse=True)
        level.append(cs)
        cs.active = True

    def deactivate(self, cs: ConsumerState) -> None:
        if not cs.active:
            return
        level = self.active[cs.priority]
        level.remove(cs)  # O(consumers of this priority): only on FLOW and detach
        cs.active = False
        if not level:
            del self.active[cs.priority]
            self.prios.remove(cs.priority)

    def clear(self) -> None:
        self.consumers.clear()
        self.active.clear()
        self.prios.clear()
        self.draining.clear()
        self.replies.clear()
        self.sac = None
