"""The quorum queue's state: configuration, counters, consumers and message refs.

Message bodies are not here; the host keeps them under the message id's
(raft index, position) pair. Per message the state keeps one tuple

    (msg_id, size, expiry, delivery_count, acquired, annotations)
     M_ID    M_SIZE M_EXPIRY M_DC         M_ACQ     M_ANN

    expiry          absolute ms (x-message-ttl / header ttl), or None
    delivery_count  failed deliveries (Modify delivery-failed): the AMQP header
                    delivery-count, what x-delivery-limit is compared with
    acquired        how many times the message was handed out and came back
                    (returned, detached, modified): 0 means the next delivery
                    is to the first acquirer; > 0 means it is redelivered
    annotations     what Modify merged into the message, or None

Tuples are never mutated: a message that changes (returned, modified) is
replaced by a new tuple.

Where a message is (each live message is in exactly one place):

    returned      heap of message tuples (ordered by msg_id): messages that went
                  back to the queue; they are delivered before `ready`
    ready         ReadyList (ready.py): the messages never handed out, in
                  msg_id order, as columns (~4 B each), not tuples: the
                  part of the state that grows with a backlog
    consumers[c].checked
                  dict msg_id -> tuple: handed to consumer c, not settled
                  (consumers[c].since: when, for the consumer timeout)
    dlx           dict msg_id -> (tuple, reason): at-least-once dead letters
                  waiting for DeadLetterSettled

A message is only ever taken from the head of the queue (the smallest id), so
every id in `returned` is below every id in `ready`.

`publishers` remembers, per publisher, the Publish batches applied (see
PublisherState), so that a batch proposed twice is applied once.

`live` (LiveIndexes, live.py) counts live messages per raft index, in index
order; its first index is the release cursor (`queries.release_cursor`).

The state is mutable: `machine.apply` updates it in place and returns it.
The Raft group owns the only copy; take a snapshot (`snapshot_bytes`) when a
copy is needed. Equality (`==`) compares everything that can influence
future results, including the round-robin position of consumers.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, fields
from typing import Any

from queues.base import QueueArgumentError, consumer_timeout_of

from .live import LiveIndexes
from .ready import ReadyList

__all__ = [
    "AT_LEAST_ONCE",
    "AT_MOST_ONCE",
    "DEFAULT_DELIVERY_LIMIT",
    "DROP_HEAD",
    "M_ACQ",
    "M_ANN",
    "M_DC",
    "M_EXPIRY",
    "M_ID",
    "M_SIZE",
    "MACHINE_VERSION",
    "REJECT_PUBLISH",
    "REMEMBERED_BATCHES",
    "ConsumerState",
    "Counters",
    "QueueArgumentError",
    "QuorumConfig",
    "consumer_timeout_of",
    "expires_of",
    "QuorumState",
    "PublisherState",
    "new_state",
]

M_ID, M_SIZE, M_EXPIRY, M_DC, M_ACQ, M_ANN = range(6)

# The machine's version: what `apply` does with each command. Snapshots carry it,
# and a member refuses a snapshot from a newer machine instead of guessing at it.
# A change to what any command does (its state or its effects) is a new version.
# (A new command version, such as quorum.tick 2, leaves the others as they were:
# proposed only once every member knows it, it needs no new machine version.)
MACHINE_VERSION = 1
REMEMBERED_BATCHES = 64  # per publisher: outcomes kept for batches that may be proposed again

DEFAULT_DELIVERY_LIMIT = 20  # RabbitMQ 4.0's default x-delivery-limit for quorum queues
DROP_HEAD = "drop-head"
REJECT_PUBLISH = "reject-publish"
REJECT_PUBLISH_DLX = "reject-publish-dlx"
AT_MOST_ONCE = "at-most-once"
AT_LEAST_ONCE = "at-least-once"


def _int_arg(arguments: dict, name: str, minimum: int = 0) -> int | None:
    value = arguments.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise QueueArgumentError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def expires_of(arguments: dict) -> int | None:
    """x-expires (ms) from a queue's effective arguments; raises QueueArgumentError."""
    return _int_arg(arguments, "x-expires", minimum=1)


@dataclass(frozen=True, slots=True)
class QuorumConfig:
    """The queue arguments the machine acts on, validated; immutable."""

    delivery_limit: int | None = DEFAULT_DELIVERY_LIMIT  # None: unlimited (x-delivery-limit -1)
    dead_letter: bool = False  # x-dead-letter-exchange is set ("" is the default exchange)
    dead_letter_strategy: str = AT_MOST_ONCE  # as declared; see at_least_once
    message_ttl: int | None = None  # x-message-ttl, ms
    max_length: int | None = None  # x-max-length: ready (+ dlx holding) messages
    max_length_bytes: int | None = None  # x-max-length-bytes: their body bytes
    overflow: str = DROP_HEAD  # x-overflow
    single_active_consumer: bool = False  # x-single-active-consumer

    @property
    def at_least_once(self) -> bool:
        """At-least-once dead-lettering is in force. As in RabbitMQ it needs
        x-overflow reject-publish; with drop-head it falls back to at-most-once
        (dropping the head would have to bypass the holding area)."""
        return self.dead_letter and self.dead_letter_strategy == AT_LEAST_ONCE and self.overflow == REJECT_PUBLISH

    @property
    def limited(self) -> bool:
        return self.max_length is not None or self.max_length_bytes is not None

    @classmethod
    def from_arguments(cls, arguments: dict) -> QuorumConfig:
        """Validates a quorum queue's x-arguments (those it does not act on are
        ignored here)."""
        overflow = arguments.get("x-overflow", DROP_HEAD)
        if overflow == REJECT_PUBLISH_DLX:
            raise QueueArgumentError("x-overflow reject-publish-dlx is not supported by quorum queues")
        if overflow not in (DROP_HEAD, REJECT_PUBLISH):
            raise QueueArgumentError(f"x-overflow must be drop-head or reject-publish, got {overflow!r}")
        dlx = arguments.get("x-dead-letter-exchange")
        if dlx is not None and not isinstance(dlx, str):
            raise QueueArgumentError(f"x-dead-letter-exchange must be a string, got {dlx!r}")
        strategy = arguments.get("x-dead-letter-strategy", AT_MOST_ONCE)
        if strategy not in (AT_MOST_ONCE, AT_LEAST_ONCE):
            raise QueueArgumentError(f"x-dead-letter-strategy must be at-most-once or at-least-once, got {strategy!r}")
        limit = arguments.get("x-delivery-limit", DEFAULT_DELIVERY_LIMIT)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < -1:
            raise QueueArgumentError(f"x-delivery-limit must be an integer >= -1, got {limit!r}")
        sac = arguments.get("x-single-active-consumer", False)
        if not isinstance(sac, bool):
            raise QueueArgumentError(f"x-single-active-consumer must be a boolean, got {sac!r}")
        expires_of(arguments)  # checked here; the replica acts on it, not the machine (expiry.py)
        consumer_timeout_of(arguments)  # checked here; the leader's ticks carry it, not the config (ticks.py)
        return cls(
            delivery_limit=None if limit == -1 else int(limit),
            dead_letter=dlx is not None,
            dead_letter_strategy=str(strategy),
            message_ttl=_int_arg(arguments, "x-message-ttl"),
            max_length=_int_arg(arguments, "x-max-length"),
            max_length_bytes=_int_arg(arguments, "x-max-length-bytes"),
            overflow=str(overflow),
            single_active_consumer=sac,
        )

    def as_list(self) -> list:
        return [getattr(self, f.name) for f in fields(self)]


class Counters:
    """Monotonic counters. Conservation (checked by the audit):

        enqueued == acknowledged + ready + checked_out + dlx_holding
                    + dead_lettered + dropped

    `expired` and `purged` are informational: an expired message is also
    counted as dead_lettered or dropped, a purged one as dropped."""

    __slots__ = (
        "enqueued",  # accepted messages
        "rejected",  # refused by x-overflow reject-publish
        "confirmed",  # accepted messages whose publisher was owed a confirm
        "delivered",  # handed to consumers (redeliveries included)
        "redelivered",  # ... of messages that had been handed out before
        "acknowledged",  # settled accepted (or delivered to a pre-settled consumer)
        "returned",  # went back to the queue: released, modified, consumer gone
        "dead_lettered",  # left for the dead-letter exchange (at-least-once: once settled)
        "dropped",  # left without a dead-letter exchange (any reason, purge included)
        "expired",  # TTL ran out (also in dead_lettered or dropped)
        "purged",  # dropped by Purge (also in dropped)
    )

    def __init__(self, *values: int) -> None:
        if not values:
            values = (0,) * len(self.__slots__)
        for name, value in zip(self.__slots__, values, strict=True):
            setattr(self, name, value)

    def as_list(self) -> list[int]:
        return [getattr(self, name) for name in self.__slots__]

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Counters) and self.as_list() == other.as_list()

    def __repr__(self) -> str:
        return f"Counters({self.as_dict()})"


class ConsumerState:
    """One attached consumer link, as the queue holds it (credit API v2)."""

    __slots__ = ("consumer_id", "priority", "node", "delivery_count", "credit", "settled", "checked", "in_service",
                 "since", "timed_out")  # fmt: skip

    def __init__(self, consumer_id: Any, priority: int, node: str, delivery_count: int, credit: int, settled: bool,
                 checked: dict | None = None, in_service: bool = False, since: dict | None = None,
                 timed_out: bool = False) -> None:  # fmt: skip
        self.consumer_id = consumer_id
        self.priority = priority
        self.node = node
        self.delivery_count = delivery_count  # serial number (RFC 1982), advanced per delivery
        self.credit = credit
        self.settled = settled  # pre-settled (at-most-once) consumer
        self.checked: dict[int, tuple] = {} if checked is None else checked  # msg_id -> message tuple
        self.in_service = in_service  # in QuorumState.service: has credit and may receive
        # msg_id -> the first TickTimeouts time that saw it checked out (timeouts.py): the
        # checked-out messages one stamped, in checkout order; those after them await the next
        self.since: dict[int, int] = {} if since is None else since
        self.timed_out = timed_out  # held a message past the consumer timeout: never in service again

    def key(self) -> tuple:
        return (self.consumer_id, self.priority, self.node, self.delivery_count, self.credit, self.settled,
                list(self.checked.items()), self.in_service, list(self.since.items()), self.timed_out)  # fmt: skip

    def __repr__(self) -> str:
        return (f"ConsumerState({self.consumer_id!r}, prio={self.priority}, dc={self.delivery_count}, "
                f"credit={self.credit}, checked={len(self.checked)})")  # fmt: skip


class PublisherState:
    """The Publish batches applied for one publisher (a queue object on one node
    incarnation, which numbers its batches 1, 2, ...): every seq <= `low` and
    the seqs in `above`; and the confirms of the last REMEMBERED_BATCHES of
    them, seq -> ((outcome value, correlations), ...), answered again when one
    is proposed twice (a leader change hid whether the first one committed)."""

    __slots__ = ("low", "above", "outcomes")

    def __init__(self, low: int = 0, above: set[int] | None = None, outcomes: dict | None = None) -> None:
        self.low = low
        self.above: set[int] = set() if above is None else above
        self.outcomes: dict[int, tuple[tuple[str, tuple], ...]] = {} if outcomes is None else outcomes

    def key(self) -> tuple:
        return (self.low, sorted(self.above), sorted(self.outcomes.items()))

    def __repr__(self) -> str:
        return f"PublisherState(low={self.low}, above={sorted(self.above)}, remembered={len(self.outcomes)})"


class QuorumState:
    """See the module docstring. Build one with `new_state(config)`."""

    __slots__ = (
        "config",
        "last_index",  # the last applied raft index
        "clock",  # the largest now_ms seen in a command; the last Tick's once tick_clock
        "tick_clock",  # a TickClock was applied: only ticks (the leader's time) set the clock
        "returned",  # heap of message tuples
        "ready",  # ReadyList: never handed out, as columns (normal priority)
        "ready_high",  # ReadyList: the same, of high priority (header priority > 4; Publish version 2)
        "prio_turn",  # high messages delivered in a row while normal ones waited (2:1, priority.py)
        "ready_bytes",  # body bytes of returned + ready + ready_high
        "consumers",  # consumer_id -> ConsumerState, in attach order
        "service",  # priority -> deque of ConsumerState with credit, round-robin order
        "prios",  # priorities present in service, highest first
        "sac_active",  # x-single-active-consumer: the active consumer's id, or None
        "checked_count",
        "checked_bytes",
        "dlx",  # msg_id -> (message tuple, reason)
        "dlx_bytes",
        "live",  # LiveIndexes: raft index -> live messages enqueued by it
        "counters",
        "publishers",  # publisher -> PublisherState: Publish batches applied once
        "machine_version",  # MACHINE_VERSION of the machine that wrote this state
        "unstamped",  # messages were checked out since the last TickTimeouts (a hint for the leader's ticks, not in key())
    )

    def __init__(self, config: QuorumConfig) -> None:
        self.config = config
        self.last_index = 0
        self.clock = 0
        self.tick_clock = False
        self.returned: list[tuple] = []
        self.ready = ReadyList()
        self.ready_high = ReadyList()
        self.prio_turn = 0
        self.ready_bytes = 0
        self.consumers: dict[Any, ConsumerState] = {}
        self.service: dict[int, deque[ConsumerState]] = {}
        self.prios: list[int] = []
        self.sac_active: Any = None
        self.checked_count = 0
        self.checked_bytes = 0
        self.dlx: dict[int, tuple[tuple, str]] = {}
        self.dlx_bytes = 0
        self.live = LiveIndexes()
        self.counters = Counters()
        self.publishers: dict[str, PublisherState] = {}
        self.machine_version = MACHINE_VERSION
        self.unstamped = False

    @property
    def ready_count(self) -> int:
        return len(self.returned) + len(self.ready) + len(self.ready_high)

    def key(self) -> tuple:
        """Everything that can influence future results, normalised (the heap
        sorted, consumers by id)."""
        parts = []
        for name in self.__slots__:
            if name == "unstamped":
                continue  # a hint for the host: no effect depends on it
            value = getattr(self, name)
            if name == "returned":
                value = sorted(value)
            elif name in ("ready", "ready_high", "live"):
                value = value.key()
            elif name == "consumers":
                value = [(cid, c.key()) for cid, c in value.items()]
            elif name == "service":
                value = [(prio, [c.consumer_id for c in value[prio]]) for prio in sorted(value)]
            elif name == "dlx":
                value = list(value.items())
            elif name == "counters":
                value = value.as_list()
            elif name == "publishers":
                value = sorted((p, ps.key()) for p, ps in value.items())
            parts.append((name, value))
        return tuple(parts)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, QuorumState) and self.key() == other.key()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return (f"QuorumState(index={self.last_index}, ready={self.ready_count}, checked={self.checked_count}, "
                f"dlx={len(self.dlx)}, consumers={len(self.consumers)})")  # fmt: skip


def new_state(config: QuorumConfig | dict | None = None) -> QuorumState:
    """An empty queue. `config` may be the queue's x-arguments."""
    if config is None:
        config = QuorumConfig()
    elif isinstance(config, dict):
        config = QuorumConfig.from_arguments(config)
    return QuorumState(config)
