"""One Raft group (the metadata store, or one quorum queue) over pysyncobj.

A `RaftGroup` replicates records (raft/records.py) into a `Machine`:

    group = RaftGroup(self_node, peers, make_conf(group_dir, log.journal(name)),
                      machine, transport=transport)
    group.propose(DeclareQueue(...), callback=lambda result, error: ...)

How a command travels: `propose` encodes the record and hands the bytes to
pysyncobj as a plain command (`SyncObj._applyCommand`, type REGULAR), so the
log entry is `b"\\x00" + encode(record)`. When the entry is committed,
pysyncobj calls its private `__doApplyCommand`; this class overrides it to
decode the record and call `machine.apply(record, index)` (the leader applies
a record with its own binary layout from the object it proposed, kept by the
identity of the entry's bytes, which the journal hands back as they were); the return value
reaches the proposer's `callback(result, ProposalOutcome.SUCCESS)`. pysyncobj's
`@replicated` methods are not used at all: they number methods by sorting
(version, name) and pickle the arguments, so adding a method renumbers the
others and a restart from a snapshot reverts `ver=` dispatch to version 0
(issue [4/7] part 8 (e), (f)). Nothing in a Warren log is pickled except
pysyncobj's own membership-change entries.

Snapshots: pysyncobj's custom serializer hooks write `machine.snapshot()`
with the log tail and the member list in Warren's snapshot file
(raft/snapshot.py) and restore it with `machine.restore(bytes)`, instead of
pickling the SyncObj's attributes. A snapshot that cannot be read stops the
group (`SnapshotError` from doTick) rather than starting it empty, which
pysyncobj would do after logging the error.

The rest of Warren sees a group only through this class's own API: `is_leader`,
`leader_id`, `term`, `peers`, `status()` (raft/status.py's `GroupStatus`),
`propose`, `add_member`, `remove_member`, `transfer_leadership` (to a chosen
member or the most caught-up one; their callbacks receive a `ProposalOutcome`,
never pysyncobj's FAIL_REASON ints), `campaign_within`, `election_timeouts`/`set_election_timeouts`,
`tick()`, `next_tick_due()` (on the clock `monotonic` exported here),
`leader_alive`/`member_alive` and `destroy()`. Nothing outside raft/ imports
pysyncobj (tests/test_layout.py checks it).

The machine runs on the loop thread inside doTick. It must be deterministic
(the same records in the same order give the same state and results on every
member) and should report a bad command as a result, not an exception: an
exception escapes doTick and the entry is retried at the next tick.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Protocol

from pysyncobj import FAIL_REASON, SyncObj
from pysyncobj.monotonic import monotonic
from pysyncobj.node import Node
from pysyncobj.syncobj import _COMMAND_TYPE, _RAFT_STATE

from raft import records
from raft.config import RaftConfigError
from raft.patches import SafeSyncObj
from raft.snapshot import read_snapshot, write_snapshot
from raft.status import GroupStatus, ProposalOutcome, Role

__all__ = ["GroupStatus", "Machine", "ProposalOutcome", "RaftGroup", "Role", "monotonic"]

_REGULAR_TYPE = _COMMAND_TYPE.REGULAR
_REGULAR = bytes([_REGULAR_TYPE])
# pysyncobj's ints to raft/status.py's names (a KeyError here means pysyncobj renamed one)
_ROLES = {getattr(_RAFT_STATE, r.name): r for r in Role}
_OUTCOMES = {getattr(FAIL_REASON, o.name): o for o in ProposalOutcome}

Callback = Callable[[Any, ProposalOutcome], None]
_TIMED_GIVE_UP = 30.0  # seconds after which a timed proposal's lost outcome frees the timer
_PROPOSED_MAX = 4096  # records held for their own apply on the leader (records.applies_as_proposed)


def _translated(callback: Callback | None) -> Callable[[Any, int], None] | None:
    """`callback` as pysyncobj calls it: with a FAIL_REASON int, handed on as a ProposalOutcome."""
    if callback is None:
        return None
    return lambda result, error: callback(result, _OUTCOMES[error])


class Machine(Protocol):
    """The replicated state machine behind a group."""

    def apply(self, record: Any, index: int) -> Any:
        """Apply one committed record; `index` is its Raft log index."""

    def snapshot(self) -> bytes:
        """The whole state, as bytes `restore` accepts."""

    def restore(self, data: bytes) -> None:
        """Replace the whole state with a snapshot's."""


class RaftGroup(SafeSyncObj):
    """A SafeSyncObj that replicates records into a Machine."""

    def __init__(
        self,
        self_node: Node | str,
        other_nodes,
        conf,
        machine: Machine,
        *,
        transport=None,
        node_class: type[Node] = Node,
        **kwargs: Any,
    ) -> None:
        if conf is None or conf.fullDumpFile is None:
            raise RaftConfigError("a RaftGroup needs a snapshot file: build its conf with make_conf(data_dir, ...)")
        conf.serializer = self._w_write_snapshot
        conf.deserializer = self._w_read_snapshot
        # Before SyncObj.__init__: keeps them out of SyncObj's own state.
        self.machine = machine
        self._w_proposed: dict[int, tuple[bytes, Any]] = {}  # id(command) -> (command, record) proposed here
        self._w_snapshot_error: BaseException | None = None
        # One proposal at a time is timed from its append to its commit, on the leader:
        # when it was proposed (None: none is timed now), and the last one's latency.
        self._w_timed_since: float | None = None
        self._w_commit_latency = 0.0
        super().__init__(self_node, other_nodes, conf, transport=transport, nodeClass=node_class, **kwargs)
        if not self.otherNodes:  # a group of one has no leader to hear from: it elects itself at once
            self.campaign_within(0.0)

    # -- what the rest of Warren uses ------------------------------------------------

    @property
    def is_leader(self) -> bool:
        """This node leads the group (another node may still think it does too, until it hears)."""
        return self._isLeader()

    @property
    def leader_id(self) -> str | None:
        """The node id of the last leader this node heard of, or None."""
        leader = self._getLeader()
        return None if leader is None else leader.id

    @property
    def term(self) -> int:
        return self.raftCurrentTerm

    @property
    def peers(self) -> tuple[str, ...]:
        """The other members' node ids, as this node knows the membership."""
        return tuple(node.id for node in self.otherNodes)

    def status(self) -> GroupStatus:
        st = self.getStatus()
        since = self._w_timed_since
        if since is not None and monotonic() - since > _TIMED_GIVE_UP:
            self._w_timed_since = None  # its outcome never came: time another
        log = self._SyncObj__raftLog  # entries as (command, index, term); getStatus gives only its length
        leader = st["leader"]
        prefix = "match_idx_server_"
        return GroupStatus(
            role=_ROLES[st["state"]],
            term=st["raft_term"],
            leader=None if leader is None else leader.id,
            commit_index=st["commit_idx"],
            last_applied=st["last_applied"],
            log_entries=st["log_len"],
            peers=self.peers,
            match_index={k[len(prefix):]: v for k, v in st.items() if k.startswith(prefix)},
            last_index=log[-1][1] if len(log) else 0,
            # a fresh log starts with a no-op at index 1; after a compaction or a
            # snapshot's installation it starts at the snapshot's index
            snapshot_index=log[0][1] if len(log) and log[0][1] > 1 else 0,
            commit_latency=self._w_commit_latency,
        )

    def propose(self, record: Any, callback: Callback | None = None) -> None:
        """Replicate `record`; `callback(result, outcome)` runs on commit or failure.

        `result` is what the machine returned (on ProposalOutcome.SUCCESS).
        Without a callback the outcome is not reported.
        """
        command = records.encode(record, prefix=_REGULAR)
        if records.applies_as_proposed(record) and self._isLeader():
            # The journal keeps this very bytes object in its tail, and pysyncobj
            # hands it back to __doApplyCommand: apply `record` then, not a decode.
            proposed = self._w_proposed
            if len(proposed) >= _PROPOSED_MAX:
                proposed.clear()  # entries that were never applied here (a lost leadership): decode them
            proposed[id(command)] = (command, record)
        translated = _translated(callback)
        if translated is not None and self._w_timed_since is None and self._isLeader():
            translated = self._w_timed(translated)
        self._applyCommand(command, translated)  # no type: the command has its prefix

    def _w_timed(self, callback: Callable[[Any, int], None]) -> Callable[[Any, int], None]:
        """`callback`, timing its proposal's commit (Ra's commit latency, sampled:
        one proposal at a time, so the others pay one attribute read)."""
        since = self._w_timed_since = monotonic()

        def timed(result: Any, error: int) -> None:
            self._w_timed_since = None
            if error == FAIL_REASON.SUCCESS:
                self._w_commit_latency = monotonic() - since
            callback(result, error)

        return timed

    def add_member(self, node_id: str, callback: Callback | None = None) -> None:
        """On the leader: add `node_id` to the group (one change at a time, as a log entry)."""
        self.addNodeToCluster(node_id, callback=_translated(callback))

    def remove_member(self, node_id: str, callback: Callback | None = None) -> None:
        """On the leader: remove `node_id` from the group."""
        self.removeNodeFromCluster(node_id, callback=_translated(callback))

    def transfer_leadership(self, callback: Callback | None = None, to: str | None = None) -> None:
        """On the leader: hand leadership to `to` (a member's node id), or by default to the
        most caught-up connected follower (Raft's TimeoutNow). REQUEST_DENIED when the target
        is not a member or has not stored the leader's whole log yet (ask again later);
        SUCCESS only means the target was told to call an election: watch `leader_id`."""
        self.transferLeadership(to, callback=_translated(callback))

    def campaign_within(self, seconds: float) -> None:
        """Call an election within `seconds` unless a leader is heard of first: a new group's
        chosen first leader campaigns before the other members' usual timeouts run out.
        No effect once this node knows a leader (or leads)."""
        if self._getLeader() is None:
            deadline = monotonic() + seconds
            if deadline < self._SyncObj__raftElectionDeadline:
                self._SyncObj__raftElectionDeadline = deadline

    @property
    def election_timeouts(self) -> tuple[float, float]:
        """The (low, high) bounds of the election timeout in force (`set_election_timeouts`)."""
        return self.conf.raftMinTimeout, self.conf.raftMaxTimeout

    def tick(self) -> None:
        """Do the group's pending work now (append, commit, apply, send, elect); never waits."""
        self.doTick(0)

    def set_election_timeouts(self, low: float, high: float) -> None:
        """Election timeouts from the next election on (pysyncobj reads them at each one)."""
        self.conf.raftMinTimeout, self.conf.raftMaxTimeout = low, high

    # -- pysyncobj hooks -------------------------------------------------------

    def _SyncObj__doApplyCommand(self, command):  # noqa: N802
        if command[:1] == _REGULAR:
            proposed = self._w_proposed.pop(id(command), None) if self._w_proposed else None
            if proposed is not None and proposed[0] is command:
                record = proposed[1]
            else:
                record = records.decode(command, 1)
            # pysyncobj increments raftLastApplied after the apply returns.
            return self.machine.apply(record, self.raftLastApplied + 1)
        return SyncObj._SyncObj__doApplyCommand(self, command)

    def _w_write_snapshot(self, path: str, data) -> None:
        last, prev, cluster = data
        write_snapshot(path, last, prev, sorted(n.id for n in cluster), self.machine.snapshot())

    def _w_read_snapshot(self, path: str):
        try:
            snap = read_snapshot(path)
            self.machine.restore(snap.machine)
        except BaseException as e:
            self._w_snapshot_error = e
            raise
        node_class = self._SyncObj__nodeClass
        return snap.last, snap.prev, {node_class(i) for i in snap.cluster}

    def _w_snapshot_tail(self):
        path = self.conf.fullDumpFile
        if not os.path.isfile(path):
            return None
        snap = read_snapshot(path)
        return snap.last, snap.prev

    def _onTick(self, timeToWait=0.0):  # noqa: N802, N803
        super()._onTick(timeToWait)
        if self._w_snapshot_error is not None:
            raise self._w_snapshot_error
