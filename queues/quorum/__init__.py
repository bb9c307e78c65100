"""Quorum queues: the replicated state machine (rabbit_fifo's role).

    commands.py  the versioned command records (Enqueue, Attach, Credit, ...)
    effects.py   what applying them asks of the host (Confirm, Deliver, ...)
    state.py     QuorumConfig (the x-arguments), QuorumState, Counters
    machine.py   apply(command, state, index) -> (state, effects), queries
    snapshot.py  snapshot_bytes(state) / restore(bytes)

Pure: no I/O, no clock, no randomness. Bodies are not in the state; the host
stores them under each message id's (raft index, position).
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
    Purge,
    Return,
    Settle,
    Tick,
    msg_id,
    split_msg_id,
)
from .effects import Confirm, CreditReply, DeadLetter, Deliver, DeliveredMessage, Outcome, Purged
from .machine import (
    QuorumMachine,
    apply,
    checked_out,
    consumer_link,
    dead_letter_pending,
    next_expiry,
    overview,
    release_cursor,
)
from .snapshot import SnapshotFormatError, restore, snapshot_bytes
from .state import QueueArgumentError, QuorumConfig, QuorumState, new_state

__all__ = [
    "COMMANDS",
    "Attach",
    "Confirm",
    "Credit",
    "CreditReply",
    "DeadLetter",
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
    "Purge",
    "Purged",
    "QueueArgumentError",
    "QuorumConfig",
    "QuorumMachine",
    "QuorumState",
    "Return",
    "Settle",
    "SnapshotFormatError",
    "Tick",
    "apply",
    "checked_out",
    "consumer_link",
    "dead_letter_pending",
    "msg_id",
    "new_state",
    "next_expiry",
    "overview",
    "release_cursor",
    "restore",
    "snapshot_bytes",
    "split_msg_id",
]
