"""What Warren changes in pysyncobj 0.3.17, all in one place, each change narrow.

pysyncobj has no hook for these, so they are made here and only here, against
the pinned version (pyproject.toml). Each fix has a test in tests/raft/ that
runs the stock behaviour beside it and shows the bug there.

Importing this module changes nothing in pysyncobj: it only checks the pinned
version and that every private pysyncobj member raft/ relies on exists
(`PRIVATE_MEMBERS`, covering raft/group.py and raft/grpc_group.py too; a
test in tests/raft keeps that list complete), so that an upgrade of
pysyncobj fails at import instead of running unpatched.

Module-level patches, installed by `install()` (idempotent). `SafeSyncObj`
calls it before pysyncobj's constructor, so every `RaftGroup` has them;
code that runs a stock SyncObj on Warren's journal (tests) calls it itself.
They are harmless to a SyncObj that does not use Warren's pieces:

1. `pysyncobj.syncobj.createJournal`: SyncObjConf has no journal factory, and
   SyncObj.__init__ calls the module-global `createJournal(conf.journalFile)`.
   The patched function returns `conf.journalFile` itself when it is a
   `raft.journal.RaftJournal` (so `raft.config.make_conf` puts the journal
   object there), and defers to the stock function otherwise.
2. `pysyncobj.serializer.atomicReplace`: the stock one is a bare os.rename of
   a file that was never fsynced, for the snapshot written at compaction and
   for the one received from a leader. `durable_replace` fsyncs the file,
   renames it, then fsyncs the directory, so after a crash the snapshot is
   either the old one or the complete new one; pysyncobj deletes the journal
   entries the snapshot covers only after this returns.

`SafeSyncObj`, a SyncObj subclass, overrides two private methods (they are
name-mangled, so a subclass defines `_SyncObj__<name>`) and `_onTick`, and adds what the node's loop needs:

3. `__onMessageReceived`, for 'append_entries' only: stock deletes every entry
   after prevLogIdx whenever the follower has any, then appends the message's
   entries, so a late duplicate AppendEntries (or a heartbeat with an old
   prevLogIdx) shrinks a log the follower already acknowledged. Raft §5.3
   deletes only on a conflict (same index, different term). The override
   skips the entries the log already has with the same term; what is left
   starts at a conflict or past the log's end, where the stock truncation is
   exactly §5.3. If nothing is left and the log is longer, the override acks
   prevLogIdx + len(entries) itself and caps the commit index there (Figure
   2: min(leaderCommit, index of last new entry)), letting stock do only the
   term/leader bookkeeping.
4. `__applyLogEntries`, which `_onTick` calls right after the leader's commit
   computation: stock counts the leader itself for every entry in its log,
   written to disk or not. With a `RaftJournal`, the override recomputes the
   commit index counting the leader only up to `journal.durable_index()`
   (persist before confirm) before anything is applied or announced.
5. `_onTick`, once, before the first load of the snapshot file: stock's
   `__loadDumpFile` keeps the journal only if its first two entries are the
   two the snapshot ends with, and otherwise clears it down to them. After a
   crash between the snapshot's rename and the journal's compaction the
   journal still starts earlier, so stock would drop every entry after the
   snapshot, acknowledged ones included. The override compacts the journal up
   to the snapshot first when the journal holds those two entries.

6. I/O and timing belong to the node's event loop (raft/transport.py,
   node/cluster/hosting.py): stock polls its own poller at the end of every tick (a
   system call per tick of every group) and, for groups that send each entry
   at once (appendEntriesUseBatch=False, the quorum queues), writes to a pipe
   per proposal to wake a thread Warren does not run. Both are replaced by
   no-ops and the pipe is closed. `next_tick_due()` tells the loop when the
   group's own timers (heartbeat, election, leader fallback) next need a tick,
   so idle groups are not ticked at all in between.

7. Liveness per node rather than per group (node/cluster/liveness.py): a
   node that says it leads a group in the current term counts, for a
   follower, as that leader's heartbeat (`leader_alive` resets the election
   timer), and a member's node that is heard from counts, for a leader, as
   that member's answer (`member_alive`, for the leader's fallback check). So
   hundreds of idle groups can heartbeat rarely without their followers
   electing. Only timers move: what a term, a vote or a commit needs is
   untouched. The rarer heartbeat (`raft.config.make_conf(heartbeat_period=)`)
   is set after each tick that sent AppendEntries: appendEntriesPeriod itself
   stays short, as stock also uses it as the time a tick may spend appending
   proposals or sending entries, which must not hold the loop.

8. Compaction by size as well as by count: stock compacts every
   logCompactionMinEntries entries, and a quorum queue's entries carry its
   message bodies, so the log tail held in memory (and replayed at a restart,
   and sent to a lagging follower) could reach gigabytes. With
   `make_conf(compaction_bytes=)` a tick forces a compaction once the
   journal holds more command bytes than that, and once a compaction freed
   that much, glibc is asked to hand the memory back (`malloc_trim`: it
   otherwise keeps the freed log, measured at 590 MB held for 82 MB in use).

9. Reads of the log go through the journal's own range read: `__getEntries`
   (every read of entries pysyncobj makes: AppendEntries, apply, commit,
   compaction) becomes `RaftJournal.entries`, which sizes a batch from the
   lengths it holds and reads only what it returns (stock slices the whole
   tail, then trims it), since a `RaftJournal` keeps the commands of only its
   newest entries in memory and reads the others from RocksDB. The overrides
   here, `__getPrevLogIndexTerm` included, read terms with `term_at`, never a
   command.

10. Apply in bounded steps: stock applies every committed entry in one tick,
   which at a restart is the whole local log (a quorum queue's: its bodies,
   each written again), in one turn of the node's loop. With a `RaftJournal`
   a tick applies entries up to `make_conf(apply_bytes=)` of commands (at
   least one entry); `apply_pending()` tells the node to tick again in the
   next loop turn, so that the loop serves everything else in between.

11. Pre-vote (Raft thesis §9.6), in raft/prevote.py: an election starts
   only after a majority said it would vote for this member, so a member
   returning with a stale log does not raise the term and depose a healthy
   leader. `_onTick` runs the pre-vote round where stock would start an
   election; `__onMessageReceived` answers and counts the two pre-vote
   messages; `__connectedToAnyone`, which stock's election check asks after
   its own read of the clock, says yes only in a tick the pre-vote step let
   the election through (else a deadline between the two clock reads
   elected without a round). A member answers an AppendEntries of a term
   older than its own with `newer_term`, which makes a stale leader step
   down (stock ignores such a message in silence, and pre-vote keeps the
   member from deposing the leader itself).

12. A snapshot the log has passed already is not installed (Raft §7), in
   raft/snapshot_guard.py: `__onMessageReceived` hands it the last part of
   each snapshot a leader sends.

`SafeSyncObj` also refuses a journal without a snapshot file
(`raft.config.check_conf`): stock then compacts into memory only, and after a restart the journal starts
past index 2 with lastApplied = 1, so it never applies a command again.
"""

from __future__ import annotations

import ctypes
import dis
import importlib
import logging
import os
import types

import pysyncobj.serializer as _serializer
import pysyncobj.syncobj as _syncobj
import pysyncobj.version as _version
from pysyncobj import SyncObj
from pysyncobj import pickle as _pickle
from pysyncobj.journal import createJournal as _stock_create_journal
from pysyncobj.monotonic import monotonic as _monotonic

from raft.config import check_conf
from raft.journal import RaftJournal
from raft.prevote import PreVote
from raft.snapshot_guard import SnapshotGuard

__all__ = ["SafeSyncObj", "durable_replace", "install"]

logger = logging.getLogger(__name__)


def _create_journal(journalFile=None):  # noqa: N803 (pysyncobj's name)
    if isinstance(journalFile, RaftJournal):
        return journalFile
    return _stock_create_journal(journalFile)


def _fsync_dir(path: str) -> None:
    fd = os.open(path or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def durable_replace(tmp_path: str, path: str) -> None:
    """Rename `tmp_path` over `path` so that a crash leaves one of the two whole.

    fsync the file (its data must be on disk before the name points at it),
    rename, fsync the directory (so the rename itself survives).
    """
    fd = os.open(tmp_path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp_path, path)
    _fsync_dir(os.path.dirname(os.path.abspath(path)))


PATCHED_VERSION = "0.3.17"
# Every pysyncobj member raft/ uses that is not pysyncobj's public API, by
# owner (a class or a module): the private methods the overrides replace or
# call, the private state they read and write, and the module globals that
# `install` replaces. A class member is found either on the class or as an
# attribute its methods assign (instance state). Checked at import;
# tests/raft/test_private_members.py fails if raft/ uses one not listed here.
PRIVATE_MEMBERS: dict[str, tuple[str, ...]] = {
    "pysyncobj.syncobj.SyncObj": (
        # methods
        "_SyncObj__onMessageReceived",
        "_SyncObj__applyLogEntries",
        "_SyncObj__getEntries",
        "_SyncObj__getPrevLogIndexTerm",
        "_SyncObj__doApplyCommand",
        "_SyncObj__sendNextNodeIdx",
        "_SyncObj__setCurrentTerm",
        "_SyncObj__setState",
        "_SyncObj__loadDumpFile",
        "_SyncObj__generateRaftTimeout",
        "_SyncObj__connectedToAnyone",
        "_SyncObj__getCurrentLogIndex",
        "_SyncObj__getCurrentLogTerm",
        "_SyncObj__onLeaderChanged",
        "_onTick",
        "_applyCommand",
        "_isLeader",
        "_getLeader",
        # instance state
        "_SyncObj__raftState",
        "_SyncObj__raftElectionDeadline",
        "_SyncObj__newAppendEntriesTime",
        "_SyncObj__raftCommitIndex",
        "_SyncObj__raftLastApplied",
        "_SyncObj__leaderCommitIndex",
        "_SyncObj__needLoadDumpFile",
        "_SyncObj__commandsQueue",
        "_SyncObj__transport",
        "_SyncObj__conf",
        "_SyncObj__raftLeader",
        "_SyncObj__selfNode",
        "_SyncObj__raftCurrentTerm",
        "_SyncObj__otherNodes",
        "_SyncObj__lastResponseTime",
        "_SyncObj__transferInProgress",
        "_SyncObj__raftLog",
        "_SyncObj__raftMatchIndex",
        "_SyncObj__recvTransmission",
        "_SyncObj__serializer",
        "_SyncObj__nodeClass",
        "_SyncObj__pipeNotifier",
        "_poller",
    ),
    "pysyncobj.transport.Transport": (
        "_onMessageReceived",
        "_onNodeConnected",
        "_onNodeDisconnected",
        "_onNodeConnectedCallback",
    ),
    "pysyncobj.pipe_notifier.PipeNotifier": ("_PipeNotifier__pipeR", "_PipeNotifier__pipeW"),
    "pysyncobj.fast_queue.FastQueue": ("_FastQueue__queue",),
    "pysyncobj.serializer.Serializer": ("_Serializer__fileName", "_Serializer__incomingTransmissionFile"),
    "pysyncobj.syncobj": ("createJournal", "_COMMAND_TYPE", "_RAFT_STATE"),
    "pysyncobj.serializer": ("atomicReplace",),
}


def _assigned_attributes(cls: type) -> set[str]:
    """The attribute names the methods of `cls` assign (`self.x = ...`), nested code included."""
    names: set[str] = set()
    stack = [f.__code__ for f in vars(cls).values() if isinstance(f, types.FunctionType)]
    while stack:
        code = stack.pop()
        names.update(i.argval for i in dis.get_instructions(code) if i.opname == "STORE_ATTR")
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return names


def missing_members(required: dict[str, tuple[str, ...]]) -> list[str]:
    """Which of `required` (owner -> member names) pysyncobj lacks, as "owner.member"."""
    missing = []
    for owner, members in required.items():
        module_name, cls_name = _split_owner(owner)
        obj = importlib.import_module(module_name)
        assigned: set[str] = set()
        if cls_name:
            obj = getattr(obj, cls_name, None)
            assigned = _assigned_attributes(obj) if isinstance(obj, type) else set()
        missing += [f"{owner}.{m}" for m in members if obj is None or not (hasattr(obj, m) or m in assigned)]
    return missing


def _split_owner(owner: str) -> tuple[str, str]:
    """Split "pysyncobj.syncobj.SyncObj" into module and class; a module name has no class part."""
    head, _, last = owner.rpartition(".")
    return (head, last) if last[:1].isupper() else (owner, "")


def _check() -> None:
    if _version.VERSION != PATCHED_VERSION:
        raise ImportError(
            f"raft.patches is written against pysyncobj {PATCHED_VERSION}, found {_version.VERSION}:"
            " re-check every override in raft/patches.py before changing the pin"
        )
    missing = missing_members(PRIVATE_MEMBERS)
    if missing:
        raise ImportError(f"pysyncobj lacks what raft/ relies on: {', '.join(missing)}")


_check()
_installed = False


def install() -> None:
    """Install the module-level patches 1 and 2; calling it again changes nothing."""
    global _installed
    if _installed:
        return
    _syncobj.createJournal = _create_journal
    _serializer.atomicReplace = durable_replace
    _installed = True


_malloc_trim = getattr(ctypes.CDLL(None), "malloc_trim", lambda pad: 0)  # glibc only
_LEADER = _syncobj._RAFT_STATE.LEADER
_FOLLOWER = _syncobj._RAFT_STATE.FOLLOWER


def _term_reader(log):
    """idx -> term of the log: without reading commands for a RaftJournal."""
    if isinstance(log, RaftJournal):
        return log.term_at
    first = log[0][1]
    return lambda idx: log[idx - first][2]


class _NoPoller:
    """Stands in for pysyncobj's poller and pipe notifier (patch 6)."""

    def poll(self, timeout: float) -> None:
        pass

    def notify(self) -> None:
        pass

    def subscribe(self, *args) -> None:
        pass

    def unsubscribe(self, *args) -> None:
        pass


class SafeSyncObj(PreVote, SnapshotGuard, SyncObj):
    """SyncObj with Warren's fixes (see the module docstring); same constructor."""

    def __init__(self, selfNode, otherNodes, conf=None, *args, **kwargs):  # noqa: N803
        check_conf(conf)
        install()  # before SyncObj.__init__, which calls createJournal
        # Set before SyncObj.__init__ so that SyncObj counts these among its
        # own properties and leaves them out of its pickled snapshots.
        self._w_commit_before = 0
        self._w_snapshot_checked = False
        self._w_heartbeat_delay = 0.0
        self._w_compaction_bytes: int | None = None
        self._w_apply_bytes: int | None = None
        self._w_cut_short = False  # the last apply stopped at its bound, entries wait
        self._w_pre_vote_init()  # patch 11
        super().__init__(selfNode, otherNodes, conf, *args, **kwargs)
        self._w_quiet_io()
        self._w_compaction_bytes = getattr(conf, "warren_compaction_bytes", None)
        self._w_apply_bytes = getattr(conf, "warren_apply_bytes", None)
        heartbeat = getattr(conf, "warren_heartbeat_period", None)
        # patch 7: how much later than stock the next heartbeat goes out
        self._w_heartbeat_delay = 0.0 if heartbeat is None else max(0.0, heartbeat - conf.appendEntriesPeriod)

    # -- 6: the node's loop does the I/O and keeps the time

    def _w_quiet_io(self) -> None:
        self._poller = _NoPoller()
        notifier = getattr(self, "_SyncObj__pipeNotifier", None)
        if notifier is not None:
            for fd in (notifier._PipeNotifier__pipeR, notifier._PipeNotifier__pipeW):
                os.close(fd)
            self._SyncObj__pipeNotifier = _NoPoller()

    # -- 7: liveness heard per node

    def leader_alive(self, node_id: str, term: int) -> None:
        """`node_id` says it leads this group in `term`: for a follower of that
        leader in that term, as good as its heartbeat."""
        leader = self._SyncObj__raftLeader
        if (
            self._SyncObj__raftState == _FOLLOWER
            and term == self._SyncObj__raftCurrentTerm
            and leader is not None
            and leader.id == node_id
            and not self._SyncObj__transferInProgress  # a handover waits for its forced election
        ):
            self._SyncObj__raftElectionDeadline = _monotonic() + self._SyncObj__generateRaftTimeout()

    def member_alive(self, node_id: str) -> None:
        """`node_id`'s node was heard from: for a leader, as good as that member's answer."""
        if self._SyncObj__raftState == _LEADER:
            for node in self._SyncObj__otherNodes:
                if node.id == node_id:
                    self._SyncObj__lastResponseTime[node] = _monotonic()

    def next_tick_due(self) -> float:
        """The monotonic time by which this group needs its next tick if nothing
        arrives for it meanwhile (a message or a proposal kicks it at once):
        now when it has work pending, else its heartbeat (leader) or election
        (follower, candidate) deadline. The leader's fallback check runs at each
        heartbeat tick, so it is late by one heartbeat period at most."""
        if (
            self._SyncObj__needLoadDumpFile
            or not self._SyncObj__transport.ready
            or self._SyncObj__raftCommitIndex > self._SyncObj__raftLastApplied
            or self._SyncObj__commandsQueue._FastQueue__queue
        ):
            return 0.0
        if self._SyncObj__raftState == _LEADER:
            return self._SyncObj__newAppendEntriesTime
        return self._SyncObj__raftElectionDeadline

    # -- 5: keep acknowledged entries when the snapshot is newer than the compaction

    def _onTick(self, timeToWait=0.0):  # noqa: N802, N803
        if not self._w_snapshot_checked:
            self._w_snapshot_checked = True
            self._w_align_journal_to_snapshot()
        self._w_commit_before = self._SyncObj__raftCommitIndex
        limit = self._w_compaction_bytes
        if limit is not None:
            held = self._SyncObj__raftLog.command_bytes
            if held > limit:
                self.forceLogCompaction()  # patch 8
        sent_before = self._SyncObj__newAppendEntriesTime
        self._w_pre_vote_tick()  # patch 11
        super()._onTick(timeToWait)
        if limit is not None and held - self._SyncObj__raftLog.command_bytes > limit:
            _malloc_trim(0)
        if self._w_heartbeat_delay and self._SyncObj__newAppendEntriesTime != sent_before:
            self._SyncObj__newAppendEntriesTime += self._w_heartbeat_delay  # patch 7: AppendEntries went out

    def _w_snapshot_tail(self):
        """(last, prev) entries the snapshot file ends with, or None if there is none."""
        path = self.conf.fullDumpFile
        if path is None or not os.path.isfile(path):
            return None
        data = self._SyncObj__serializer.deserialize()
        return data[1], data[2]

    def _w_align_journal_to_snapshot(self) -> None:
        try:
            tail = self._w_snapshot_tail()
        except Exception:
            logger.exception("cannot read the snapshot to align the journal; pysyncobj will decide")
            return
        if tail is None:
            return
        last, prev = tail
        log = self._SyncObj__raftLog
        if len(log) < 2:
            return
        pos = prev[1] - log[0][1]
        if pos <= 0 or pos + 1 >= len(log):
            return  # already aligned, or the journal does not reach past the snapshot
        if tuple(log[pos]) == tuple(prev) and tuple(log[pos + 1]) == tuple(last):
            logger.info("compacting the journal up to the snapshot at index %d before loading it", last[1])
            log.deleteEntriesTo(pos)

    # -- 4: the leader counts itself only for entries on disk

    def _SyncObj__applyLogEntries(self):  # noqa: N802
        log = self._SyncObj__raftLog
        if not isinstance(log, RaftJournal):
            return SyncObj._SyncObj__applyLogEntries(self)
        if self._isLeader():
            self._w_recount_leader_commit(log)
        commit = self._SyncObj__raftCommitIndex
        applied = self._SyncObj__raftLastApplied
        limit = self._w_apply_bytes
        self._w_cut_short = False
        if limit is None or commit <= applied:
            return SyncObj._SyncObj__applyLogEntries(self)
        step_end = log.span_end(applied + 1, commit, limit)  # patch 10
        if step_end >= commit:
            return SyncObj._SyncObj__applyLogEntries(self)
        self._w_cut_short = True
        # stock applies up to the commit index: show it the step's end for this call
        self._SyncObj__raftCommitIndex = step_end
        try:
            return SyncObj._SyncObj__applyLogEntries(self)
        finally:
            self._SyncObj__raftCommitIndex = commit

    def apply_pending(self) -> bool:
        """The last tick applied a bounded step and committed entries wait
        (patch 10): tick again in the next loop turn."""
        return self._w_cut_short and self._SyncObj__raftCommitIndex > self._SyncObj__raftLastApplied

    # -- 9: read entries through the journal

    def _SyncObj__getEntries(self, fromIDx, count=None, maxSizeBytes=None):  # noqa: N802, N803
        log = self._SyncObj__raftLog
        if isinstance(log, RaftJournal):
            return log.entries(fromIDx, count, maxSizeBytes)
        return SyncObj._SyncObj__getEntries(self, fromIDx, count, maxSizeBytes)

    def _SyncObj__getPrevLogIndexTerm(self, nextNodeIndex):  # noqa: N802, N803
        # stock reads the whole entry for its term: from disk, for a follower far behind
        log = self._SyncObj__raftLog
        if not isinstance(log, RaftJournal):
            return SyncObj._SyncObj__getPrevLogIndexTerm(self, nextNodeIndex)
        prev = nextNodeIndex - 1
        if len(log) and log.first_index() <= prev <= log.last_index():
            return prev, log.term_at(prev)
        return None, None

    def _w_recount_leader_commit(self, log: RaftJournal) -> None:
        commit = self._SyncObj__raftCommitIndex
        durable = log.durable_index()
        if commit <= durable:
            return  # stock's count of the leader itself was true
        # Same rule as SyncObj._onTick, but the leader votes only for durable entries.
        others = self._SyncObj__otherNodes
        match = self._SyncObj__raftMatchIndex
        term = self._SyncObj__raftCurrentTerm
        majority = (len(others) + 1) / 2
        first = log.first_index()
        new = idx = min(self._w_commit_before, commit)
        last = log.last_index()
        while idx < last:
            idx += 1
            count = (1 if idx <= durable else 0) + sum(1 for n in others if match.get(n, 0) >= idx)
            if count <= majority:
                break
            if idx >= first and log.term_at(idx) == term:
                new = idx
        if new != commit:
            self._SyncObj__raftCommitIndex = new
            self._SyncObj__leaderCommitIndex = new
            log.setRaftCommitIndex(new)

    # -- 3: never truncate without a conflict (Raft §5.3)

    def _SyncObj__onMessageReceived(self, node, message):  # noqa: N802
        if self._w_pre_vote_message(node, message):  # patch 11
            return
        if message.get("type") == "append_entries" and message["term"] >= self._SyncObj__raftCurrentTerm:
            if "prevLogIdx" in message:
                message = self._w_without_known_entries(node, message)
            elif message.get("serialized"):
                message = self._w_unless_snapshot_passed(node, message)  # patch 12 (snapshot_guard.py)
            if message is None:
                return
        SyncObj._SyncObj__onMessageReceived(self, node, message)

    def _w_without_known_entries(self, node, message):
        """The message with the entries the log already has removed, or None if handled here."""
        transmission = message.get("transmission")
        if transmission is not None:
            if transmission != "finish":
                return message  # stock buffers the chunks
            # A large entry arrives in chunks; stock unpickles it on 'finish'.
            entry = _pickle.loads(self._SyncObj__recvTransmission + message["data"])
            self._SyncObj__recvTransmission = ""
            message = {k: v for k, v in message.items() if k not in ("transmission", "data")}
            message["entries"] = [entry]
        entries = message.get("entries") or []
        log = self._SyncObj__raftLog
        term_at = _term_reader(log)
        first, last = log[0][1], log[-1][1]
        prev = message["prevLogIdx"]
        if prev < first or prev > last or term_at(prev) != message["prevLogTerm"]:
            return message  # stock answers a mismatch
        known = 0
        for entry in entries:
            idx = entry[1]
            if idx != prev + known + 1:
                return message  # not contiguous: leave it to stock
            if idx > last or term_at(idx) != entry[2]:
                break  # past our end, or a conflict: stock's truncation is right from here
            known += 1
        verified = prev + known  # the log matches the leader's up to here
        if known < len(entries) or verified == last:
            if known == 0:
                return message
            trimmed = dict(message)
            trimmed["prevLogIdx"] = verified
            trimmed["prevLogTerm"] = term_at(verified)
            trimmed["entries"] = entries[known:]
            return trimmed
        # Everything in the message is already here and the log goes further:
        # stock would delete the rest. Let it do only the term/leader
        # bookkeeping (a message with neither prevLogIdx nor 'serialized'),
        # with the commit index capped at what this message verified, then
        # ack what it verified.
        leader_commit = message["commit_index"]
        bookkeeping = {
            "type": "append_entries",
            "term": message["term"],
            "commit_index": min(leader_commit, verified),
        }
        SyncObj._SyncObj__onMessageReceived(self, node, bookkeeping)
        if self._SyncObj__raftLeader == node:  # stock accepted the leader
            self._SyncObj__leaderCommitIndex = leader_commit
            self._SyncObj__sendNextNodeIdx(node, nextNodeIdx=verified + 1, success=True)
        return None
