"""What the ClassicQueue tests share (test_classic*.py): a fake host (manual
clock and timers, recorded dead letters and self-deletions), recording
consumers, a recording persistence that confirms only when the test says so,
and shorthands to make a queue, publish, grant credit and deliver. Not a test
module; the tests import it relatively (from .classic_fakes import ...)."""

from __future__ import annotations

from queues.base import Outcome, QueueMessage
from queues.classic import ClassicQueue, MemoryPersistence

T0 = 1_700_000_000_000


# ---------------------------------------------------------------- fakes


class Timer:
    def __init__(self, when: int, fn) -> None:
        self.when = when
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeHost:
    """Two clocks, as a node has: `now` the wall clock (now_ms: TTLs, timestamps) and `mono`
    the monotonic one (monotonic_ms, and what timers count); `advance` moves both, `jump`
    steps the wall clock alone (NTP, an operator)."""

    def __init__(self) -> None:
        self.now = T0
        self.mono = T0
        self.timers: list[Timer] = []
        self.dead: list[tuple[int, str, QueueMessage]] = []
        self.deleted: list[ClassicQueue] = []
        self.dropped: dict[str, int] = {}  # reason -> messages dropped with no dead-letter exchange
        self.republish_to: ClassicQueue | None = None  # dead letters go back here

    def now_ms(self) -> int:
        return self.now

    def monotonic_ms(self) -> int:
        return self.mono

    def call_later(self, delay_s: float, fn) -> Timer:
        assert delay_s >= 0
        timer = Timer(self.mono + round(delay_s * 1000), fn)
        self.timers.append(timer)
        return timer

    def pending_timers(self) -> list[Timer]:
        return [t for t in self.timers if not t.cancelled]

    def advance(self, ms: int) -> None:
        target = self.mono + ms
        while True:
            due = [t for t in self.timers if not t.cancelled and t.when <= target]
            if not due:
                break
            timer = min(due, key=lambda t: t.when)
            self.timers.remove(timer)
            self._tick(max(0, timer.when - self.mono))
            timer.fn()
        self._tick(target - self.mono)

    def _tick(self, ms: int) -> None:
        self.now += ms
        self.mono += ms

    def jump(self, ms: int) -> None:
        """The wall clock stepped by `ms` (either way); timers and the monotonic clock do not move."""
        self.now += ms

    def dead_letter(self, queue, message: QueueMessage, reason: str, confirmed=None) -> None:
        self.dead.append((message.seq, reason, message))
        if self.republish_to is not None:
            payload = message.payload
            self.republish_to.publish(QueueMessage(0, payload, message.durable), None)

    def count_dropped(self, queue, reason: str, n: int) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + n

    def queue_deleted(self, queue) -> None:
        self.deleted.append(queue)


class FakeConsumer:
    def __init__(self, presettled: bool = False) -> None:
        self.presettled = presettled
        self.got: list[QueueMessage] = []
        self.first_acquirer: list[bool] = []
        self.replies: list[tuple[int, int, int, bool]] = []
        self.on_deliver = None
        self.on_reply = None
        self.deleted = 0
        self.timeouts: list[str] = []  # the descriptions timed_out was called with
        self.on_timed_out = None

    @property
    def seqs(self) -> list[int]:
        return [m.seq for m in self.got]

    @property
    def bodies(self) -> list[bytes]:
        return [m.payload for m in self.got]

    def deliver(self, queue, message: QueueMessage) -> None:
        self.got.append(message)
        self.first_acquirer.append(not message.acquired)
        if self.on_deliver is not None:
            self.on_deliver(queue, message)

    def credit_reply(self, delivery_count: int, credit: int, available: int, drain: bool) -> None:
        self.replies.append((delivery_count, credit, available, drain))
        if self.on_reply is not None:
            self.on_reply()

    def queue_deleted(self) -> None:
        self.deleted += 1

    def timed_out(self, description: str) -> None:
        self.timeouts.append(description)
        if self.on_timed_out is not None:
            self.on_timed_out()


class RecordingPersistence(MemoryPersistence):
    """Records writes; on_durable callbacks wait for commit()."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[tuple] = []
        self.stored: dict[int, QueueMessage] = {}
        self.waiting: list = []

    def put(self, queue, seq, message):
        self.writes.append(("put", seq))
        self.stored[seq] = QueueMessage(**{f: getattr(message, f) for f in message.__slots__})
        return super().put(queue, seq, message)

    def update(self, queue, seq, message):
        assert seq in self.stored, "update of a message that is not stored"
        self.writes.append(("update", seq))
        self.stored[seq] = QueueMessage(**{f: getattr(message, f) for f in message.__slots__})
        return super().update(queue, seq, message)

    def remove(self, queue, seq):
        self.writes.append(("remove", seq))
        self.stored.pop(seq, None)
        return super().remove(queue, seq)

    def drop_queue(self, queue):
        self.writes.append(("drop", queue))
        self.stored.clear()
        return super().drop_queue(queue)

    def on_durable(self, ticket, callback, on_failed=None):
        self.waiting.append(callback)

    def commit(self) -> None:
        waiting, self.waiting = self.waiting, []
        for cb in waiting:
            cb()


def make(host=None, durable=False, auto_delete=False, persistence=None, consumer_timeout=0,
         **arguments) -> ClassicQueue:  # fmt: skip
    args = {k.replace("_", "-"): v for k, v in arguments.items()}
    return ClassicQueue("/", "q", durable, None, auto_delete, args, host=host or FakeHost(),
                        persistence=persistence, consumer_timeout=consumer_timeout)  # fmt: skip


def msg(body: bytes | str = b"m", durable: bool = False, expires_at: int | None = None) -> QueueMessage:
    if isinstance(body, str):
        body = body.encode()
    return QueueMessage(0, body, durable, expires_at, exchange="ex", routing_keys=["k"])


def fill(q: ClassicQueue, n: int, prefix: str = "m", **kw) -> list[Outcome]:
    outcomes: list[Outcome] = []
    for i in range(n):
        q.publish(msg(f"{prefix}{i}", **kw), outcomes.append)
    return outcomes


def grant(q, c: FakeConsumer, credit: int, drain: bool = False, echo: bool = False) -> None:
    """A FLOW from a receiver that has seen every transfer so far."""
    dc = q.link_state(c)[0]
    q.credit(c, dc, credit, drain, echo)


def _delivered(q, n, consumer=None, **kw):
    c = consumer or FakeConsumer(**kw)
    q.attach_consumer(c)
    fill(q, n)
    grant(q, c, n)
    return c
