"""A follower keeps its log when a leader sends it a snapshot it has passed
(Raft §7), for pysyncobj 0.3.17, as a mixin of `SafeSyncObj` (patch 12 of
raft/patches.py).

Stock pysyncobj installs every snapshot a leader sends: it clears the journal
down to the snapshot's last two entries, sets the last applied index there
and clamps the commit index to it ("raftCommitIndex exceeds journal end after
loading dump ... clamping"). A follower that had gone past the snapshot so
forgets entries it had acknowledged, which the leader may have counted to
commit them. Leaders send such snapshots: each "reset" answer lowers the
leader's next index for the follower to what the follower had when it
answered, and a member added to a busy group answers every entry sent before
its snapshot arrived with one, so the leader sends the snapshot again for each
late answer (the chaos suite's replica-remove nemesis saw a re-added member
install it dozens of times in three seconds).

Raft §7: when the log already has the snapshot's last entry (same index and
term), the entries after it are kept and the snapshot is dropped; and one at
or below what this member compacted itself covers only committed entries it
has. The last part of a transmission is empty (pysyncobj ends one so), so the
received file is whole when it arrives: its header names the snapshot's last
entry (raft/snapshot.py). When the log has passed it, the file is removed
before pysyncobj would rename it over this member's own snapshot, stock does
the term/leader bookkeeping of the message, and the snapshot's end is acked,
as patch 3 acks entries the log had already.
"""

from __future__ import annotations

import logging
import os

from pysyncobj import SyncObj

from raft.journal import RaftJournal
from raft.snapshot import SnapshotError, read_snapshot_end

__all__ = ["SnapshotGuard"]

logger = logging.getLogger("raft.patches")


def _term_at(log, index: int) -> int:
    if isinstance(log, RaftJournal):
        return log.term_at(index)
    return log[index - log[0][1]][2]


class SnapshotGuard:
    """The SyncObj side of patch 12; `SafeSyncObj.__onMessageReceived` calls it."""

    def _w_unless_snapshot_passed(self, node, message):
        """The message, or None when it completes a snapshot this log already has (handled here)."""
        data, _first, last_part = message["serialized"]
        serializer = self._SyncObj__serializer
        incoming = serializer._Serializer__incomingTransmissionFile
        path = serializer._Serializer__fileName
        if not last_part or data or incoming is None or path is None:
            return message  # a part stock writes to the incoming file, or nothing stock would install
        tmp = path + ".1.tmp"  # where pysyncobj's Serializer writes what it receives
        try:
            incoming.flush()
            end = read_snapshot_end(tmp)
        except (OSError, SnapshotError):
            return message  # stock's pickled format, or a file stock will report
        index, term = end[1], end[2]
        log = self._SyncObj__raftLog
        first, last = log[0][1], log[-1][1]
        if not (index < first or (index <= last and _term_at(log, index) == term)):
            return message  # the snapshot is news to this log: stock installs it
        incoming.close()
        serializer._Serializer__incomingTransmissionFile = None
        os.remove(tmp)
        logger.info("ignored a snapshot up to index %d: the log has it already (last index %d)", index, last)
        verified = max(index, first)  # the log matches the leader's up to here
        leader_commit = message["commit_index"]
        bookkeeping = {"type": "append_entries", "term": message["term"], "commit_index": min(leader_commit, verified)}
        SyncObj._SyncObj__onMessageReceived(self, node, bookkeeping)
        if self._SyncObj__raftLeader == node:  # stock accepted the leader
            self._SyncObj__leaderCommitIndex = leader_commit
            self._SyncObj__sendNextNodeIdx(node, nextNodeIdx=verified + 1, success=True)
        return None
