"""What a Raft group tells the rest of Warren, as types that do not come from pysyncobj.

`Role` and `GroupStatus` describe a group as this node sees it
(`RaftGroup.status()`); `ProposalOutcome` is what a proposal's callback
receives (`RaftGroup.propose`, `add_member`, ...). raft/group.py maps
pysyncobj's state and FAIL_REASON ints to these, so nothing outside raft/
needs to know pysyncobj's numbering. This module imports nothing from
pysyncobj: queue and metadata code may use it without loading Raft.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["GroupStatus", "ProposalOutcome", "Role"]


class Role(enum.Enum):
    FOLLOWER = "follower"
    CANDIDATE = "candidate"
    LEADER = "leader"


class ProposalOutcome(enum.Enum):
    """How a proposal (a command, a membership change, a leadership transfer) ended.

    The value is the name reported in errors and logs."""

    SUCCESS = "success"  # committed, and applied on this node
    QUEUE_FULL = "queue_full"  # the group's command queue was full: not appended
    MISSING_LEADER = "missing_leader"  # no leader known (an election, no connection): not appended
    DISCARDED = "discarded"  # a new leader's entry replaced it: not committed
    NOT_LEADER = "not_leader"  # the leader changed before it committed the command
    LEADER_CHANGED = "leader_changed"  # the leader changed while it was in flight: may have committed
    REQUEST_DENIED = "request_denied"  # refused (a membership change while another is pending)
    UNKNOWN_OUTCOME = "unknown_outcome"  # an older entry was applied instead: may have committed


@dataclass(frozen=True)
class GroupStatus:
    """One node's view of one Raft group."""

    role: Role
    term: int
    leader: str | None  # the node id of the leader this node knows, if any
    commit_index: int
    last_applied: int
    log_entries: int  # entries held in the log (after the last compaction)
    peers: tuple[str, ...]  # the other members' node ids
    # On the leader: the highest log index known to be stored on each peer.
    match_index: Mapping[str, int] = field(default_factory=dict)
    last_index: int = 0  # the index of the newest entry in this node's log (written, maybe not committed)
    snapshot_index: int = 0  # the index the newest snapshot covers: the log starts there (0: no snapshot yet)
    # seconds from the append to the commit of the last proposal timed on the leader (0.0: none yet)
    commit_latency: float = 0.0
