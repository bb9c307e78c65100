"""The queue-type interface: what a session may ask of any queue.

Every queue type implements `Queue`: classic (queues/classic.py), quorum
(queues/quorum/queue.py), and on a node that does not host the queue, the
proxy that forwards to the node that does (node/vhosts/remote_queue.py).
Calls never block; results come back through the small callbacks a session
hands over (`Consumer`, the publish confirm), which the session turns into
frames. This mirrors rabbit_queue_type: the session does not know which
queue type it talks to.

Flow control is credit API v2: the queue, not the session, owns each
consumer link's delivery-count, credit, drain and available, and answers a
FLOW that asked for it (echo or drain) with `Consumer.credit_reply`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol


class Outcome(Enum):
    """The publish outcome a queue reports for one message."""

    ACCEPTED = "accepted"  # stored as promised (durable: fsynced)
    REJECTED = "rejected"  # refused, e.g. x-overflow reject-publish
    # Refused because the node's disk is full (its store write failed with ENOSPC). The message
    # stays in the queue and is written once space comes back, so it may still be delivered.
    NO_SPACE = "no-space"
    RELEASED = "released"  # not taken, try again later
    UNKNOWN = "unknown"  # lost in flight with the queue's node: it may or may not be stored


@dataclass(slots=True, frozen=True)
class Settlement:
    """A consumer's verdict on a delivery [3.4]."""

    kind: str  # "accepted" | "rejected" | "released" | "modified"
    delivery_failed: bool = False  # modified: counts as a failed delivery
    undeliverable_here: bool = False  # modified: dead-letter (or drop) instead of requeue
    annotations: dict | None = None  # modified: merged into the message


ACCEPT = Settlement("accepted")
REJECT = Settlement("rejected")
RELEASE = Settlement("released")


@dataclass(slots=True)
class QueueMessage:
    """A message held by a queue. `payload` is the message as published
    (header .. footer); deliveries re-encode only the header and annotations."""

    seq: int
    payload: bytes
    durable: bool = False
    expires_at: int | None = None  # wall-clock ms, from x-message-ttl or the header's ttl
    delivery_count: int = 0  # failed deliveries so far (header delivery-count)
    acquired: bool = False  # delivered at least once: first-acquirer is false on redelivery
    exchange: str = ""
    routing_keys: list[str] = field(default_factory=list)
    annotations: dict | None = None  # merged by modified outcomes and dead-lettering

    @property
    def size(self) -> int:
        return len(self.payload)


class Consumer(Protocol):
    """The session side of a consumer link, as the queue sees it."""

    presettled: bool  # at-most-once: the message is gone once sent

    def deliver(self, queue: Queue, message: QueueMessage) -> None:
        """Send one transfer; the queue has already spent one credit."""

    def credit_reply(self, delivery_count: int, credit: int, available: int, drain: bool) -> None:
        """Send a FLOW carrying the link's state as the queue holds it."""

    def queue_deleted(self) -> None:
        """The queue is gone (deleted by an operator): end the link."""

    def timed_out(self, description: str) -> None:
        """The consumer held a message unsettled past the consumer timeout: the
        queue took back those messages and sends it nothing more; end the link
        (amqp:resource-limit-exceeded, `description` saying why)."""


ConfirmCallback = Callable[[Outcome], None]


class QueueArgumentError(ValueError):
    """A queue argument (x-...) has a value the queue's type refuses at declare
    (where RabbitMQ would refuse it too)."""


def consumer_timeout_of(arguments: dict) -> int | None:
    """x-consumer-timeout (ms) from a queue's effective arguments (the smaller of the queue's
    own and a policy's: routing/policies.py), or None; raises QueueArgumentError."""
    value = arguments.get("x-consumer-timeout")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise QueueArgumentError(f"x-consumer-timeout must be a positive integer (milliseconds), got {value!r}")
    return None if value is None else int(value)


def stamp_interval_ms(timeout: int) -> int:
    """How often a queue looks for messages held past `timeout` ms, and so how late a
    timeout may come: a twentieth of it, at least 1 s (the tests' short timeouts) and at
    most a minute (30 minutes, the default, costs a quorum queue a log entry a minute)."""
    return min(60_000, max(1000, timeout // 20))


def consumer_timeout_text(queue: Any, timeout: int) -> str:
    """The DETACH description of a link that timed out (the same for every queue type)."""
    return (f"consumer timeout: a message of queue '{queue.name}' in vhost '{queue.vhost}' was held unsettled"
            f" for more than {timeout} ms (x-consumer-timeout, policy consumer-timeout or node setting"
            f" consumer_timeout); it was returned to the queue")


class Queue(ABC):
    """One queue of any type."""

    type_name: str = ""
    remote = False  # True for the proxy of a queue another node hosts (node/vhosts/remote_queue.py)
    policy_state: Any = None  # the policies in effect, set by node/vhosts/policies.py
    stats: Any = None  # publish/deliver/ack counters, for the types that keep them

    def __init__(self, vhost: str, name: str, durable: bool, exclusive_owner: Any, auto_delete: bool,
                 arguments: dict):  # fmt: skip
        self.vhost = vhost
        self.name = name
        self.durable = durable
        self.exclusive_owner = exclusive_owner  # the owning connection, or None
        self.auto_delete = auto_delete
        self.arguments = dict(arguments)
        self.effective_arguments = self.arguments  # with the keys of the policy that applies (apply_policy)
        self.deleted = False

    # publishing
    @abstractmethod
    def publish(self, message: QueueMessage, confirm: ConfirmCallback | None) -> None:
        """Takes a message; calls `confirm` once with the outcome (not at all
        when None: the publisher settled it already)."""

    # consuming
    @abstractmethod
    def attach_consumer(self, consumer: Consumer, priority: int = 0) -> None: ...

    @abstractmethod
    def detach_consumer(self, consumer: Consumer) -> None:
        """The consumer is gone: its unsettled messages return to the queue."""

    @abstractmethod
    def credit(self, consumer: Consumer, delivery_count: int, link_credit: int, drain: bool, echo: bool) -> None:
        """The receiver's FLOW: delivery-count as the receiver knows it, the new
        credit, drain and echo [2.6.7]."""

    @abstractmethod
    def settle(self, consumer: Consumer, seqs: list[int], settlement: Settlement) -> None:
        """Applies a settlement to delivered messages, in the given order."""

    # management
    @abstractmethod
    def purge(self) -> int | Awaitable[int]:
        """Drops the ready messages: their count, or (a replicated queue) an
        awaitable of the count once the drop is applied."""

    @abstractmethod
    def delete(self) -> int:
        """Deletes the queue and its messages; returns how many were dropped."""

    @property
    @abstractmethod
    def message_count(self) -> int: ...

    @property
    @abstractmethod
    def consumer_count(self) -> int: ...

    @property
    def unacked_count(self) -> int:
        """Messages delivered and not yet settled."""
        return 0

    @property
    def ready_bytes(self) -> int:
        """Payload bytes of the ready messages."""
        return 0

    def apply_policy(self, arguments: dict) -> None:
        """Acts from now on on `arguments`, the queue's own and a policy's.
        Here only records them: a type that acts on no policy key, or a
        proxy (the node hosting the queue applies them), needs no more."""
        self.effective_arguments = dict(arguments)

    @property
    def consumer_capacity(self) -> float | None:
        """RabbitMQ's consumer_capacity (and consumer_utilisation): whether the
        queue could hand a message to a consumer at once, 1.0 or 0.0 (0.0 with
        no consumers); None where this type does not know (not reported).
        RabbitMQ's is a moving average of that over time; Warren's is the
        present value, what a reader sampling it over time averages itself."""
        return None

    def consumer_activity(self, consumer: Consumer) -> str:
        """RabbitMQ's activity status of an attached consumer: "up", or for a
        single-active-consumer queue "single_active" / "waiting"."""
        return "up"

    def info(self) -> dict:
        return {
            "name": self.name,
            "vhost": self.vhost,
            "type": self.type_name,
            "durable": self.durable,
            "auto_delete": self.auto_delete,
            "exclusive": self.exclusive_owner is not None,
            "arguments": self.arguments,
            "message_count": self.message_count,
            "consumer_count": self.consumer_count,
        }


class QueueHost(Protocol):
    """What a queue may ask of the node that hosts it (injected: no I/O or
    clock inside the queue itself)."""

    def now_ms(self) -> int:
        """The wall clock (message TTLs, timestamps): NTP or an operator may step it."""

    def monotonic_ms(self) -> int:
        """A clock that only counts real time, as call_later's timers do: for durations (how
        long a message is held, how long a queue is idle), which a wall clock stepped back or
        forward would stretch or cut short."""

    def call_later(self, delay_s: float, fn: Callable[[], None]) -> Any:
        """Schedules fn; returns a handle with .cancel()."""

    def dead_letter(self, queue: Queue, message: QueueMessage, reason: str,
                    confirmed: Callable[[bool], None] | None = None) -> None:  # fmt: skip
        """Republishes a dead message per the queue's x-dead-letter-* arguments;
        `confirmed(ok)` (at-least-once) once every target took it, or not."""

    def count_dropped(self, queue: Queue, reason: str, n: int) -> None:
        """`n` messages left for `reason` with no dead-letter exchange (a metric)."""

    def queue_deleted(self, queue: Queue) -> None:
        """The queue removed itself (x-expires, auto-delete)."""

    def queue_expired(self, queue: Queue) -> None:
        """A replicated queue's x-expires ran out (its leader decides): delete it everywhere
        through the metadata, as a user's delete does."""
