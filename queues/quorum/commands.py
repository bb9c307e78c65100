"""The quorum queue's commands: frozen, versioned records (raft/records.py).

Each command is a frozen dataclass registered under a kind ("quorum.*") and a
version; it travels through the queue's Raft log as the AMQP encoding of
`[kind, version, field, ...]`. Fields hold plain values only (None, bool, int,
float, str, bytes, tuples and dicts of these), so a command decoded from the
log compares equal to the one proposed. A record's layout never changes under
the same (kind, version): a new layout is a new version registered beside the
old one, and the machine accepts both.

Time never comes from a clock: commands that need it carry `now_ms`, stamped
by the proposer before the command enters the log, so every member sees the
same time. The machine's clock (QuorumState.clock), which judges expiry during
deliveries, is the largest `now_ms` it has seen, until a TickClock: from then
on it is the time of the last Tick, which only the leader proposes.

Consumer ids are plain values chosen by the host (a str, an int or a tuple of
these); they must be unique among the consumers attached to one queue.

Message ids are ints: `msg_id(raft_index, position)`, the Raft index of the
Enqueue command that brought the message and its position in that batch;
`split_msg_id` gives them back. The host stores bodies under that pair.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from raft.records import command

from .message_format import PublishBatchCodec, pack_message

__all__ = [
    "COMMANDS",
    "POS_BITS",
    "Attach",
    "Credit",
    "DeadLetterSettled",
    "Detach",
    "Discard",
    "DownConsumersOnNode",
    "Enqueue",
    "Modify",
    "MsgIn",
    "Publish",
    "PublishBatch",
    "PublishPrioritised",
    "Purge",
    "Return",
    "SetConfig",
    "Settle",
    "Tick",
    "TickClock",
    "TickTimeouts",
    "msg_id",
    "split_msg_id",
]

POS_BITS = 20  # positions in one Enqueue batch: < 2**20
_POS_MASK = (1 << POS_BITS) - 1
MAX_BATCH = 1 << POS_BITS


def msg_id(raft_index: int, position: int) -> int:
    """The message id of the `position`-th message of the Enqueue at `raft_index`."""
    return (raft_index << POS_BITS) | position


def split_msg_id(mid: int) -> tuple[int, int]:
    """(raft_index, position) of a message id."""
    return mid >> POS_BITS, mid & _POS_MASK


class MsgIn(NamedTuple):
    """One message of an Enqueue batch, as the state machine sees it (the body
    stays with the host). A plain tuple `(size, ttl, correlation)` is accepted
    in its place, which is what a decoded record holds.

    size         body size in bytes (x-max-length-bytes counts these)
    ttl          the message's own TTL in ms (AMQP header ttl), or None;
                 the queue's x-message-ttl applies too, the smaller wins
    correlation  the publisher's token for the Confirm effect, or None when
                 the publisher settled already (no confirm is owed)
    """

    size: int
    ttl: int | None = None
    correlation: Any = None


@command("quorum.enqueue", version=1)
@dataclass(frozen=True, slots=True)
class Enqueue:
    """A batch of messages, in publish order. Effects: Confirm (accepted and
    rejected correlations), deliveries, drop-head dead letters."""

    messages: tuple[MsgIn, ...]
    now_ms: int


@command("quorum.publish", version=1)
@dataclass(frozen=True, slots=True)
class Publish:
    """A batch of publishes with their bodies, as the host proposes it. Each
    message is [payload, durable, ttl, exchange, routing_keys, correlation,
    annotations]: the machine enqueues (len(payload), ttl, correlation), as
    Enqueue does, and leaves the rest to the host, which keeps it with the body.

    (`publisher`, `seq`) identify the batch: a batch proposed again after a
    leader change (its first outcome unknown) is applied once. Effects, for a
    new batch: StoreBodies, then those of an Enqueue; for one applied before:
    its Confirms again (none once it is too old to be remembered). An empty
    `publisher` opts out of deduplication."""

    messages: tuple
    now_ms: int
    publisher: str = ""
    seq: int = 0


P_PAYLOAD, P_TTL, P_CORRELATION = 0, 2, 5  # fields of a Publish message the machine reads


@command("quorum.publish", version=2)
@dataclass(frozen=True, slots=True)
class PublishPrioritised(Publish):
    """Publish, and the machine reads each message's header priority: above
    4 it is high priority, served 2:1 with the others (RabbitMQ 4's quorum
    queue priorities). Proposed once every member knows it (feature flag
    quorum_queue_priorities); a member that does not would apply it as
    version 1, all normal."""


_PUBLISH_BATCH_CODEC = PublishBatchCodec()


@command("quorum.publish", version=3, binary=_PUBLISH_BATCH_CODEC)
@dataclass(frozen=True, slots=True)
class PublishBatch(PublishPrioritised):
    """Publish, version 3: version 2's batch (priorities read), in its own binary layout
    (message_format.py) instead of an AMQP list. `stored` holds each message
    as the body store keeps it, the publisher's bytes inside as received: the
    entry carries those runs of bytes and every replica stores them as they
    are. `messages` are the same messages as tuples, for the machine (the
    leader's own, or unpacked from `stored` on decode)."""

    stored: tuple[bytes, ...] = ()

    @classmethod
    def of(cls, messages: list[tuple], now_ms: int, publisher: str, seq: int) -> PublishBatch:
        """The batch of `messages`, each (payload, durable, ttl, exchange,
        routing_keys, correlation, annotations), routing_keys a tuple."""
        return cls(tuple(messages), now_ms, publisher, seq, tuple(pack_message(*m) for m in messages))


_PUBLISH_BATCH_CODEC.cls = PublishBatch


@command("quorum.attach", version=1)
@dataclass(frozen=True, slots=True)
class Attach:
    """A consumer link attaches. It starts without credit; `delivery_count` is
    the initial delivery-count the broker sent in its ATTACH [2.7.4].
    `settled`: the consumer is at-most-once (pre-settled), a delivered message
    is acknowledged at once. `node` is where the consumer lives, for
    DownConsumersOnNode. Attaching an id already attached changes nothing."""

    consumer_id: Any
    priority: int = 0
    now_ms: int = 0
    node: str = ""
    delivery_count: int = 0
    settled: bool = False


@command("quorum.detach", version=1)
@dataclass(frozen=True, slots=True)
class Detach:
    """The consumer is gone: its unsettled messages return to the queue,
    marked redelivered, not counting as failed deliveries."""

    consumer_id: Any


@command("quorum.credit", version=1)
@dataclass(frozen=True, slots=True)
class Credit:
    """The receiver's FLOW (credit API v2): its view of the delivery-count
    (None: not known yet), the new link credit, drain and echo [2.6.7]."""

    consumer_id: Any
    delivery_count: int | None
    credit: int
    drain: bool = False
    echo: bool = False


@command("quorum.settle", version=1)
@dataclass(frozen=True, slots=True)
class Settle:
    """Accepted: the messages leave the queue."""

    consumer_id: Any
    msg_ids: tuple[int, ...]


@command("quorum.return", version=1)
@dataclass(frozen=True, slots=True)
class Return:
    """Released: back to the queue, not a failed delivery [3.4.4]."""

    consumer_id: Any
    msg_ids: tuple[int, ...]


@command("quorum.discard", version=1)
@dataclass(frozen=True, slots=True)
class Discard:
    """Rejected: dead-lettered (reason "rejected"), or dropped without a DLX."""

    consumer_id: Any
    msg_ids: tuple[int, ...]


@command("quorum.modify", version=1)
@dataclass(frozen=True, slots=True)
class Modify:
    """Modified [3.4.5]: `delivery_failed` counts a failed delivery (and may
    cross x-delivery-limit), `undeliverable_here` dead-letters (reason
    "rejected"), `annotations` are merged into the message's annotations."""

    consumer_id: Any
    msg_ids: tuple[int, ...]
    delivery_failed: bool = False
    undeliverable_here: bool = False
    annotations: dict | None = None


@command("quorum.tick", version=1)
@dataclass(frozen=True, slots=True)
class Tick:
    """Time passes: messages at the head whose TTL ran out expire."""

    now_ms: int


@command("quorum.tick", version=2)
@dataclass(frozen=True, slots=True)
class TickTimeouts(Tick):
    """Tick, and the consumer timeout (timeouts.py): the messages checked out
    since the last TickTimeouts are stamped with `now_ms`, and those a consumer
    has held since one at least `consumer_timeout` ms before this one go back
    to the queue, the consumer timed out (effects.ConsumerTimedOut); 0: no timeout. The leader stamps its
    effective timeout (x-consumer-timeout, a policy's, else its node setting
    consumer_timeout), so every member applies the same. Proposed once every
    member knows it (feature flag quorum_consumer_timeout): a member that does
    not cannot read it (raft.records refuses an unknown version)."""

    consumer_timeout: int = 0


@command("quorum.tick", version=3)
@dataclass(frozen=True, slots=True)
class TickClock(TickTimeouts):
    """TickTimeouts, and from it on the machine's clock is the time of the last tick (the
    leader's), no longer the largest time any command carried: one node's clock once ahead
    (stepped, restored from a stale VM) then ahead no more stops judging expiry and the
    consumer timeout as soon as a leader with the true time ticks, as with RabbitMQ, whose
    machine takes the leader's time of each command. Proposed once every member knows it
    (feature flag quorum_tick_clock)."""


@command("quorum.purge", version=1)
@dataclass(frozen=True, slots=True)
class Purge:
    """Drops the ready messages (not the checked-out ones, nor those waiting in
    the at-least-once dead-letter area). Effect: Purged(count)."""


@command("quorum.down_node", version=1)
@dataclass(frozen=True, slots=True)
class DownConsumersOnNode:
    """Every consumer attached from `node` is detached (see Detach)."""

    node: str


@command("quorum.dlx_settled", version=1)
@dataclass(frozen=True, slots=True)
class DeadLetterSettled:
    """At-least-once dead-lettering: these messages reached every target of the
    dead-letter exchange and may leave the holding area."""

    msg_ids: tuple[int, ...]


@command("quorum.set_config", version=1)
@dataclass(frozen=True, slots=True)
class SetConfig:
    """A policy changed what the queue acts on: `config` holds QuorumConfig's
    fields in declaration order (its `as_list()`). New limits apply at once to
    the messages already in the queue (drop-head makes room)."""

    config: tuple


COMMANDS: tuple[type, ...] = (
    Enqueue,
    Publish,
    PublishPrioritised,
    PublishBatch,
    Attach,
    Detach,
    Credit,
    Settle,
    Return,
    Discard,
    Modify,
    Tick,
    TickTimeouts,
    TickClock,
    Purge,
    DownConsumersOnNode,
    DeadLetterSettled,
    SetConfig,
)
