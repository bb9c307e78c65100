"""The stream queue type on one node: an append-only log read by offset.

Publishing: each message is encoded as a record (the publisher's bytes
untouched) and waits for the next flush. A flush, scheduled once per loop
turn, cuts what waits into chunks (at most CHUNK_RECORDS / CHUNK_BYTES
each), hands them to a worker thread that writes and fsyncs them, and when
that returns commits them (readers see them), confirms their publishers and
applies retention. One flush is in flight at a time; what arrives meanwhile
makes the next one, so under load a flush carries many messages for one
fsync (the group commit of storage/group_commit.py, per stream).

Replicated (feature flag stream_replication), this is the leader's side:
`role` (queues/stream/leader.py) learns the replicas' durable ends and moves
`committed_end`, the offset readers and confirms go up to, once a majority
has a chunk on disk. Without a role (one node) a chunk is committed as soon
as it is on this node's disk.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from amqp.message import MESSAGE_ANNOTATIONS, Message
from queues.base import ConfirmCallback, Consumer, Outcome, Queue, QueueMessage, Settlement
from queues.classic.config import ClassicQueueCounters
from queues.stream.chunk import record_head, record_prefix
from queues.stream.config import StreamConfig
from queues.stream.disk import StreamDisk
from queues.stream.log import StreamLog, WritePlan
from queues.stream.readers import StreamReaders
from queues.stream.spec import ReadSpec
from routing.errors import PreconditionFailed

__all__ = ["StreamQueue"]

log = logging.getLogger("warren.stream")

CHUNK_RECORDS = 4096
CHUNK_BYTES = 1 << 20
FILTER_VALUE = "x-stream-filter-value"
_FILTER_VALUE_BYTES = FILTER_VALUE.encode()
RETENTION_CHECK_S = 60.0  # how often age retention runs without publishes


_FILTER_VALUE_MEMO_MAX = 1024  # sections kept, each of at most _FILTER_VALUE_MEMO_BYTES
_FILTER_VALUE_MEMO_BYTES = 256
_filter_value_memo: dict[bytes, str | None] = {}  # message-annotation section bytes -> its filter value
_UNKNOWN: Any = object()


def filter_value_of(payload: bytes) -> str | None:
    """The message annotation x-stream-filter-value, decoding the message only when its
    bytes name it. Publishers repeat a few annotation sections (a value per region, per
    tenant...), so the value is kept by the section's bytes and the map decoded once."""
    if _FILTER_VALUE_BYTES not in payload:
        return None
    message = Message.from_bytes(payload)
    section = bytes(message.section_bytes(MESSAGE_ANNOTATIONS))
    value = _filter_value_memo.get(section, _UNKNOWN)
    if value is _UNKNOWN:
        value = (message.message_annotations or {}).get(FILTER_VALUE)
        value = value if isinstance(value, str) else None
        if len(section) > _FILTER_VALUE_MEMO_BYTES:
            return value
        if len(_filter_value_memo) >= _FILTER_VALUE_MEMO_MAX:
            _filter_value_memo.clear()  # a publisher of unique annotations: start over, stay bounded
        _filter_value_memo[section] = value
    return value


class _LastRecord:
    """The record head last made, by payload identity: a fanout hands every stream it
    reaches the same payload object with the same exchange and key, so the second and
    third stream reuse the first one's head and filter value. A record is its head
    (length and prefix: exchange, key, filter value) then the payload, kept apart until
    the chunk joins them: the payload is not copied per record. The head is kept by
    value too: a publisher's messages share the prefix, and often the size."""

    __slots__ = ("payload", "exchange", "key", "value", "prefix_of", "prefix", "size", "head")

    def __init__(self) -> None:
        self.payload: bytes | None = None
        self.exchange = self.key = ""
        self.value: str | None = None
        self.prefix_of: tuple = ()
        self.prefix = b""
        self.size = -1
        self.head = b""

    def get(self, payload: bytes, exchange: str, key: str) -> tuple[str | None, bytes]:
        """(filter value, record head) of a record of `payload`."""
        if payload is not self.payload or exchange != self.exchange or key != self.key:
            value = self.value = filter_value_of(payload)
            prefix_of = (exchange, key, value)
            if prefix_of != self.prefix_of:
                self.prefix_of, self.prefix, self.size = prefix_of, record_prefix(exchange, key, value), -1
            size = len(self.prefix) + len(payload)
            if size != self.size:
                self.size, self.head = size, record_head(size, self.prefix)
            self.payload, self.exchange, self.key = payload, exchange, key
        return self.value, self.head


_last_record = _LastRecord()


class StreamQueue(Queue):
    type_name = "stream"

    def __init__(self, vhost: str, name: str, arguments: dict, directory: str, host: Any,
                 loop: asyncio.AbstractEventLoop, disk: StreamDisk | None = None) -> None:  # fmt: skip
        super().__init__(vhost, name, True, None, False, arguments)
        self.disk = disk if disk is not None else StreamDisk()  # the node's: a full disk raises the alarm
        self.config = StreamConfig.from_arguments(arguments)
        self.stats = ClassicQueueCounters()  # the same counters as a classic queue's (metrics, snapshots)
        self.host = host
        self.loop = loop
        self.log = StreamLog(directory, self.config)
        self.readers = StreamReaders(self, self.log, loop.call_soon)
        self.committed_end = self.log.next_offset  # readers and confirms go up to here
        self._unconfirmed: deque[tuple[int, list]] = deque()  # (end offset, confirms) on disk here, not committed
        self.role: Any = None  # the leader's replication (queues/stream/leader.py); None: one node
        self._parts: list[bytes] = []  # the records waiting: each one's head, then its payload
        self._filter_values: list[str | None] = []
        self._confirms: list[ConfirmCallback | None] = []
        self._waiting_bytes = 0
        self._flush_scheduled = False
        self._in_flight = False
        self._held = False  # handing the leadership over: publishes wait, nothing new is written
        self._closing: Callable[[], None] | None = None  # what to do once the write in flight returns
        self.closed = False  # close() was called: nothing more is written, no replica answered
        self._retention_timer: Any = None
        self._arm_retention()

    # -- publishing --------------------------------------------------------------------

    def publish(self, message: QueueMessage, confirm: ConfirmCallback | None) -> None:
        if self.deleted or self.closed:  # not written: the publisher may send it again
            if confirm is not None:
                confirm(Outcome.RELEASED)
            return
        self.stats.published += 1
        key = message.routing_keys[0] if message.routing_keys else ""
        payload = message.payload
        value, head = _last_record.get(payload, message.exchange, key)
        self._parts += (head, payload)
        self._filter_values.append(value)
        self._confirms.append(confirm)
        self._waiting_bytes += len(head) + len(payload)
        if not (self._flush_scheduled or self._in_flight):
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._in_flight or not self._parts or self._closing is not None or self._held:
            return
        now = self.host.now_ms()
        plans: list[WritePlan] = []
        parts, values = self._parts, self._filter_values
        if len(values) <= CHUNK_RECORDS and self._waiting_bytes <= CHUNK_BYTES:
            plans.append(self.log.plan(parts, values, now))  # the usual flush: one chunk
        else:
            start = 0
            while start < len(values):
                end, size = start, 0
                while end < len(values) and end - start < CHUNK_RECORDS and (size == 0 or size < CHUNK_BYTES):
                    size += len(parts[2 * end]) + len(parts[2 * end + 1])
                    end += 1
                plans.append(self.log.plan(parts[2 * start : 2 * end], values[start:end], now))
                start = end
        confirms = self._confirms
        self._parts, self._filter_values, self._confirms, self._waiting_bytes = [], [], [], 0
        self._in_flight = True
        if self.role is not None:
            self.role.flushing(plans)  # replicas write them while this node does
        future = self.loop.run_in_executor(None, StreamLog.write, plans, self.disk.faults)
        future.add_done_callback(lambda f: self._written(f, plans, confirms))

    def _written(self, future: asyncio.Future, plans: list[WritePlan], confirms: list) -> None:
        self._in_flight = False
        error = future.exception()
        if self._closing is not None:
            closing, self._closing = self._closing, None
            if error is None and not self.deleted:
                self.log.commit(plans)  # on disk: the log says so, as the files will when reopened
            outcome = self._closing_outcome(error)
            for confirm in confirms:
                if confirm is not None:
                    confirm(outcome)
            closing()
            return
        if error is not None:
            log.error("stream %s/%s: write failed: %s", self.vhost, self.name, error)
            self.log.abandon()  # the next flush writes where the committed chunks end
            if self.role is not None:
                self.role.abandoned()
            # a full disk: rejected as no space, and the stream waits for room (the disk alarm)
            full = self.disk.failed(f"{self.vhost}/{self.name}", sum(len(p.chunk) for p in plans), error)
            outcome = Outcome.NO_SPACE if full else Outcome.REJECTED
            self.stats.rejected += len(confirms)  # refused: they never entered the stream (the audit's conservation)
            for confirm in confirms:
                if confirm is not None:
                    confirm(outcome)
            return
        self.log.commit(plans)
        self.disk.wrote(f"{self.vhost}/{self.name}")
        self._unconfirmed.append((self.log.next_offset, confirms))
        if self.role is None:
            self.advance(self.log.next_offset)
        else:
            self.role.appended(self.log.next_offset)
        self.log.apply_retention(self.host.now_ms())
        if self._parts:
            self._flush()

    def advance(self, committed_end: int) -> None:
        """A majority (or this node alone) has everything before `committed_end`
        on disk: confirm its publishers, let readers read it."""
        if committed_end <= self.committed_end:
            return
        self.committed_end = committed_end
        while self._unconfirmed and self._unconfirmed[0][0] <= committed_end:
            _, confirms = self._unconfirmed.popleft()
            confirmed = 0
            accepted = Outcome.ACCEPTED  # read once: an Enum member off its class costs ~60 ns
            for confirm in confirms:
                if confirm is not None:
                    confirm(accepted)
                    confirmed += 1
            self.stats.confirmed += confirmed
        self.readers.wake()

    def _closing_outcome(self, error: BaseException | None) -> Outcome:
        """What the publishes of a write that returned after close() or delete() hear: deleted
        meanwhile, RELEASED (as for a classic queue deleted under a message); failed, REJECTED;
        on disk here, ACCEPTED for a stream of one node, and UNKNOWN for a replicated one,
        whose chunk is committed only once a majority has it (a replica that took it keeps it
        in the next epoch; one that did not may lead it)."""
        if self.deleted:
            return Outcome.RELEASED
        if error is not None:
            return Outcome.REJECTED
        return Outcome.ACCEPTED if self.role is None else Outcome.UNKNOWN

    def _release_unconfirmed(self, outcome: Outcome) -> None:
        """Written here but not known committed: RELEASED when the stream is deleted; UNKNOWN when
        this node stops leading it, since a replica that has the chunk keeps it in the next epoch
        (RELEASED then made publishers send again what a consumer later read twice)."""
        unconfirmed, self._unconfirmed = self._unconfirmed, deque()
        for _, confirms in unconfirmed:
            for confirm in confirms:
                if confirm is not None:
                    confirm(outcome)

    # -- handing the leadership over (node/vhosts/stream_handover.py) -------------------

    def hold(self) -> None:
        """Writes nothing more (publishes wait), so a replica can catch up with a log that stands still."""
        self._held = True

    def release(self) -> None:
        """The hand-over did not happen: write what waited."""
        self._held = False
        if self._parts and not (self._flush_scheduled or self._in_flight):
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)

    @property
    def writing(self) -> bool:
        return self._in_flight

    # -- retention ---------------------------------------------------------------------

    def _arm_retention(self) -> None:
        if self._retention_timer is not None:
            self._retention_timer.cancel()
            self._retention_timer = None
        if self.config.max_age_s is not None and not self.deleted:
            delay = min(RETENTION_CHECK_S, float(self.config.max_age_s))
            self._retention_timer = self.host.call_later(delay, self._retention_tick)

    def _retention_tick(self) -> None:
        self._retention_timer = None
        if not self._in_flight and not self.deleted:
            self.log.apply_retention(self.host.now_ms())
        self._arm_retention()

    def apply_policy(self, arguments: dict) -> None:
        config = StreamConfig.from_arguments(arguments)  # raises QueueArgumentError: the policy is refused
        self.effective_arguments = dict(arguments)
        self.config = self.log.config = config
        self._arm_retention()

    # -- consuming ---------------------------------------------------------------------

    def attach_consumer(self, consumer: Consumer, priority: int = 0) -> None:
        self.readers.attach(consumer, ReadSpec())

    def attach_reader(self, consumer: Consumer, spec: ReadSpec) -> None:
        self.readers.attach(consumer, spec)

    def detach_consumer(self, consumer: Consumer) -> None:
        self.readers.detach(consumer)

    def credit(self, consumer: Consumer, delivery_count: int, link_credit: int, drain: bool, echo: bool) -> None:
        self.readers.credit(consumer, delivery_count, link_credit, drain, echo)

    def settle(self, consumer: Consumer, seqs: list[int], settlement: Settlement) -> None:
        """Nothing to do: a stream keeps its messages whatever a consumer says."""

    # -- management --------------------------------------------------------------------

    def purge(self) -> int:
        raise PreconditionFailed(f"queue '{self.name}' is a stream: streams are not purged (retention removes messages)")

    def delete(self) -> int:
        if self.deleted:
            return 0
        self.deleted = True
        count = self.log.message_count
        if self._retention_timer is not None:
            self._retention_timer.cancel()
        for confirm in self._confirms:
            if confirm is not None:
                confirm(Outcome.RELEASED)
        self._parts, self._filter_values, self._confirms = [], [], []
        self._release_unconfirmed(Outcome.RELEASED)
        self.readers.queue_deleted()
        self.log.retire()
        self._when_idle(self.log.destroy)
        return count

    def close(self, then: Callable[[], None] | None = None) -> None:
        """The node stops, or this node no longer leads: files closed once the
        write in flight returns, then `then` (the replica opening them)."""
        self.closed = True
        if self._retention_timer is not None:
            self._retention_timer.cancel()
        self._release_unconfirmed(Outcome.UNKNOWN)
        waiting, self._confirms = self._confirms, []  # never written (held for a hand-over): sent again elsewhere
        self._parts, self._filter_values, self._waiting_bytes = [], [], 0
        for confirm in waiting:
            if confirm is not None:
                confirm(Outcome.RELEASED)

        def closed() -> None:
            self.log.close()
            if then is not None:
                then()

        self._when_idle(closed)

    def _when_idle(self, fn: Callable[[], None]) -> None:
        if self._in_flight:
            self._closing = fn
        else:
            fn()

    @property
    def message_count(self) -> int:
        return self.log.message_count

    @property
    def consumer_count(self) -> int:
        return len(self.readers)

    @property
    def ready_bytes(self) -> int:
        return self.log.bytes

    def info(self) -> dict:
        info = super().info()
        info["first_offset"] = self.log.first_offset
        info["committed_offset"] = self.committed_end - 1
        info["segments"] = len(self.log.segments)
        info["log_bytes"] = self.log.bytes  # the segment files' size on this node
        if self.role is not None:  # replicated: shown as a quorum queue's leader and members
            info.update(leader=self.role.me, members=list(self.role.replicas), epoch=self.role.epoch)
        return info
