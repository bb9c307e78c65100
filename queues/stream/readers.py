"""A stream's consumers: each reads the log on its own from its own offset.

Nothing is acquired or removed: a reader only moves its offset forward, so
settlement is a no-op. Credit is credit API v2 as for the other queue types
(the reader holds delivery-count, credit and drain). A reader at the end of
the log waits; the queue wakes it when a chunk commits.

Reading never stalls the event loop on a long log: a pump reads at most
READ_BUDGET bytes of chunks per turn and schedules itself again for the
rest, so other connections get their turn between chunks. A message that
per-message filters (properties, application properties, SQL) examine
counts as ReadSpec.message_cost bytes of that budget (more for costly SQL
expressions), so a selective filter does not test a whole MiB of small
messages in one turn.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from amqp import serial
from amqp.types import Long, Symbol
from queues.base import Consumer, QueueMessage
from queues.stream.chunk import Record
from queues.stream.spec import ReadSpec

if TYPE_CHECKING:
    from queues.stream.log import StreamLog

__all__ = ["Reader", "StreamReaders"]

READ_BUDGET = 1 << 20  # chunk bytes one reader reads per loop turn
MAX_CREDIT = serial.HALF - 1
X_STREAM_OFFSET = Symbol("x-stream-offset")


class Reader:
    __slots__ = ("consumer", "spec", "offset", "delivery_count", "credit", "drain", "reply", "pending", "scheduled")

    def __init__(self, consumer: Consumer, spec: ReadSpec, offset: int) -> None:
        self.consumer = consumer
        self.spec = spec
        self.offset = offset  # the next offset to look at
        self.delivery_count = 0
        self.credit = 0
        self.drain = False
        self.reply = False
        self.pending: deque[Record] = deque()  # the rest of the chunk being read
        self.scheduled = False


class StreamReaders:
    def __init__(self, queue: Any, log: StreamLog, call_soon: Callable[[Callable[[], None]], Any]) -> None:
        self.queue = queue
        self.log = log
        self.call_soon = call_soon
        self.readers: dict[int, Reader] = {}
        self.frozen = False  # the copy changes role: readers keep their credit but read nothing

    def __len__(self) -> int:
        return len(self.readers)

    @property
    def end(self) -> int:
        """One past the last offset readers may see: the committed end (a replica's or leader's)."""
        return min(self.queue.committed_end, self.log.next_offset)

    def start_offset(self, spec: ReadSpec) -> int:
        log = self.log
        end = self.end
        if spec.start == "first":
            return log.first_offset
        if spec.start == "last":
            ref = log.chunk_for(end - 1) if end > log.first_offset else None
            return ref.first_offset if ref is not None else end
        if spec.start == "offset":  # before the head: from the head; past the end: wait there
            return max(spec.value, log.first_offset)
        if spec.start == "timestamp":
            return min(log.offset_for_timestamp(spec.value), end)
        return end

    def attach(self, consumer: Consumer, spec: ReadSpec) -> None:
        key = id(consumer)
        if key in self.readers:
            raise ValueError("consumer is already attached")
        self.readers[key] = Reader(consumer, spec, self.start_offset(spec))

    def detach(self, consumer: Consumer) -> None:
        self.readers.pop(id(consumer), None)

    def credit(self, consumer: Consumer, delivery_count: int, link_credit: int, drain: bool, echo: bool) -> None:
        r = self.readers.get(id(consumer))
        if r is None:
            return
        # [2.6.7] transfers the receiver has not seen yet count against the credit it grants now
        credit = link_credit - serial.diff(r.delivery_count, delivery_count)
        r.credit = 0 if credit <= 0 else min(credit, MAX_CREDIT)
        r.drain = drain
        r.reply = r.reply or drain or echo
        self.pump(r)

    def wake(self) -> None:
        """New chunks committed: readers waiting at the end read on."""
        for r in list(self.readers.values()):
            if r.credit > 0 and not r.scheduled:
                self.pump(r)

    def queue_deleted(self) -> None:
        readers, self.readers = self.readers, {}
        for r in readers.values():
            r.consumer.queue_deleted()

    # -- moving readers to another copy (node/vhosts/stream_moves.py) ------------------

    def freeze(self) -> None:
        """Nothing more is read (the log is closing); credit and detaches are still taken."""
        self.frozen = True

    def thaw(self) -> None:
        self.frozen = False
        for r in list(self.readers.values()):
            self.pump(r)

    def hand_off(self) -> list[Reader]:
        """Every reader, at the next offset it would look at, to be adopted by another copy."""
        readers, self.readers = list(self.readers.values()), {}
        for r in readers:
            if r.pending:  # the rest of a chunk it was reading: read again from the new copy
                r.offset = r.pending[0].offset
                r.pending.clear()
            r.scheduled = False
        return readers

    def adopt(self, r: Reader) -> None:
        """A reader of another copy of the same log goes on here, with its credit and delivery-count."""
        self.readers[id(r.consumer)] = r
        self.pump(r)  # also sends a credit reply it owes

    # -- reading -----------------------------------------------------------------------

    def _schedule(self, r: Reader) -> None:
        r.scheduled = True

        def again() -> None:
            r.scheduled = False
            if self.readers.get(id(r.consumer)) is r:
                self.pump(r)

        self.call_soon(again)

    def pump(self, r: Reader) -> None:
        """Delivers what the reader's credit allows, up to READ_BUDGET of chunks this turn."""
        if self.frozen:
            return
        budget = READ_BUDGET
        log = self.log
        end = self.end
        filter_cost, filter_cost_per_byte = r.spec.message_cost, r.spec.message_cost_per_byte
        while r.credit > 0:
            if r.pending:
                if filter_cost:  # evaluating filters is work too: without this a turn could test every message
                    if budget <= 0:  # of a MiB of chunks, unbounded in count, and all may fail to match
                        self._schedule(r)  # (checked before charging: each turn examines at least one)
                        return
                    budget -= filter_cost + filter_cost_per_byte * len(r.pending[0].payload)
                self._deliver(r, r.pending.popleft())
                continue
            if budget <= 0:
                self._schedule(r)
                return
            if r.offset < log.first_offset:  # retention removed what it had not read yet
                r.offset = log.first_offset
            ref = log.chunk_for(r.offset) if r.offset < end else None
            if ref is None or ref.first_offset >= end:
                break  # at the (committed) end: wait for a commit
            header, bloom = ref.header()
            budget -= header.size
            if not r.spec.chunk_may_match(header, bloom):
                r.offset = ref.next_offset
                continue
            r.pending.extend(rec for rec in ref.records(header) if rec.offset >= r.offset)
            r.offset = ref.next_offset
        self._settle_flow(r)

    def _deliver(self, r: Reader, record: Record) -> None:
        if not r.spec.matches(record.filter_value, record.payload):
            return
        r.delivery_count = serial.add(r.delivery_count, 1)
        r.credit -= 1
        message = QueueMessage(record.offset, record.payload, True, None, 0, False, record.exchange,
                               [record.routing_key], {X_STREAM_OFFSET: Long(record.offset)})  # fmt: skip
        self.queue.stats.delivered += 1
        r.consumer.deliver(self.queue, message)

    def _settle_flow(self, r: Reader) -> None:
        """Completes a drain at the end of the log, and sends the credit reply owed."""
        end = self.end
        available = end - r.offset + len(r.pending)
        if r.drain and r.credit > 0 and not r.pending and r.offset >= end:
            r.delivery_count = serial.add(r.delivery_count, r.credit)
            r.credit = 0
            r.reply = True
        if r.reply:
            r.reply = False
            r.consumer.credit_reply(r.delivery_count, r.credit, max(available, 0), r.drain)
