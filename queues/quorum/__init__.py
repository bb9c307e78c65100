"""Quorum queues: the replicated state machine (rabbit_fifo's role) and the
queue that runs it on each replica.

The machine, pure (no I/O, no clock, no randomness):

    commands.py  the versioned command records (Publish, Enqueue, Attach, ...)
    message_format.py  the binary layouts of a message and of a publish batch
    effects.py   what applying them asks of the host (StoreBodies, Confirm, Deliver, ...)
    state.py     QuorumConfig (the x-arguments), QuorumState, Counters, MACHINE_VERSION
    ready.py     ReadyList: the ready messages as runs of ids and a column of sizes
    live.py      LiveIndexes: live messages per raft index (the release cursor)
    machine.py   apply(command, state, index) -> (state, effects)
    dispatch.py  how messages move: to consumers, back, out (machine.py's parts)
    priority.py  two-level message priority: high served 2:1 with normal
    timeouts.py  the consumer timeout: Ticks stamp checked-out messages, return late ones
    dedup.py     Publish batches applied once per (publisher, seq)
    queries.py   release_cursor, overview, ... (read-only)
    snapshot.py  snapshot_bytes(state) / restore(bytes), versioned

Bodies are not in the state; the host stores them under each message id's
(raft index, position). The replica's side (queue.py and its parts) is not
imported here: see queue.py.
"""

from .commands import (
    COMMANDS,
    Attach,
    Credit,
    DeadLetterSettled,
    Detach,
    Discard,
    DownConsumersOnNode,
    Enqueue,
    Modify,
    MsgIn,
    Publish,
    PublishBatch,
    PublishPrioritised,
    Purge,
    Return,
    SetConfig,
    Settle,
    Tick,
    TickClock,
    TickTimeouts,
    msg_id,
    split_msg_id,
)
from .effects import (
    Confirm,
    ConsumerTimedOut,
    CreditReply,
    DeadLetter,
    Deliver,
    DeliveredMessage,
    Dropped,
    Outcome,
    Purged,
    StoreBodies,
)
from .machine import apply
from .queries import (
    checked_out,
    consumer_link,
    dead_letter_pending,
    next_expiry,
    overview,
    publish_outcome,
    release_cursor,
)
from .snapshot import SnapshotFormatError, restore, snapshot_bytes
from .state import MACHINE_VERSION, QueueArgumentError, QuorumConfig, QuorumState, new_state
from .timeouts import next_timeout

__all__ = [
    "COMMANDS",
    "MACHINE_VERSION",
    "Attach",
    "Confirm",
    "ConsumerTimedOut",
    "Credit",
    "CreditReply",
    "DeadLetter",
    "Dropped",
    "DeadLetterSettled",
    "Deliver",
    "DeliveredMessage",
    "Detach",
    "Discard",
    "DownConsumersOnNode",
    "Enqueue",
    "Modify",
    "MsgIn",
    "Outcome",
    "Publish",
    "PublishPrioritised",
    "PublishBatch",
    "Purge",
    "Purged",
    "QueueArgumentError",
    "QuorumConfig",
    "QuorumState",
    "Return",
    "SetConfig",
    "Settle",
    "SnapshotFormatError",
    "StoreBodies",
    "Tick",
    "TickClock",
    "TickTimeouts",
    "apply",
    "checked_out",
    "consumer_link",
    "dead_letter_pending",
    "msg_id",
    "new_state",
    "next_expiry",
    "next_timeout",
    "overview",
    "publish_outcome",
    "release_cursor",
    "restore",
    "snapshot_bytes",
    "split_msg_id",
]
