"""Pre-vote (Raft thesis §9.6) for pysyncobj 0.3.17, as a mixin of `SafeSyncObj`.

Stock pysyncobj starts an election as soon as a follower's election timer
runs out: it increments its term and asks for votes. A member cut off from
the others (a partition, a paused process) does that again and again, and
when it comes back its RequestVote carries a term higher than the leader's:
every member that receives it adopts the term and the leader steps down,
although the returning member's log is stale and it cannot win. The group
has no leader until a new election, for nothing.

With pre-vote, a member whose timer runs out first asks the others whether
they *would* vote for it in the next term (`pre_vote`, carrying term + 1 and
its last log index and term), changing nothing, its own term included. A
member grants the pre-vote when

- the candidate's log is at least as up to date as its own (the vote rule of
  §5.4.1), and
- it has not heard from a leader within its election timeout (it is not the
  leader, and not a follower whose leader is alive: patch 7's per-node
  liveness counts as hearing from it).

Only with a majority of grants (itself included) does the member run the
real election, by letting stock's election start at the next tick. The
candidate's term is not compared: a member behind in term may well hold the
most complete log, and its real elections then raise its term until it is
heard.

Stock decides to elect by reading the clock itself, later in the same tick
than the pre-vote round does: a deadline that falls between the two reads
looked alive to the pre-vote check and expired to stock's, and stock elected
without a round (a cut-off member sent RequestVotes, about one run in seven of
tests/raft/test_prevote.py). So the pre-vote tick alone decides: stock's
election check also asks `__connectedToAnyone`, which is answered False
unless this tick's pre-vote step let the election through.

Left to stock: an election that a leader's TimeoutNow (leadership transfer)
started skips the pre-vote, as the thesis says (§3.10), and so does a group of
one. A RequestVote itself is handled as stock handles it: the thesis also
has a member that heard from a leader within the minimum election timeout
refuse a vote, but a transfer's RequestVote must pass that check, and the
wire format (raft/grpc_codec.py) has no field to say which one it is. The
pre-vote rule covers the disruption it is for: an election follows only a
round that a majority without a live leader granted.

A term that ran ahead: a member can hold a higher term than the leader's
with a log too stale to win, when it won a pre-vote round and raised its term
but its RequestVotes never arrived (killed before they left, or cut off right
then) while the others elected without it. Stock ignores an AppendEntries of
a lower term without an answer, so the leader never learns the newer term,
and pre-vote keeps the member from deposing it: the member would never take
another entry (found reading the code while chasing a crash-test stall that
turned out to be the test's; tests/raft/test_prevote.py builds it). As
Raft answers every RPC with the receiver's term, such a member answers a
stale leader's AppendEntries with `newer_term` (its term); the leader takes
the term and steps down, the up-to-date members elect at a term past it, and
the member follows. Only a term raised by an election a majority pre-voted
can do this, so a member returning from a partition still deposes no one.

Rolling upgrades: a node without pre-vote drops the new messages
(raft/grpc_codec.py refuses an unknown tag and the group transport logs it),
so a pre-voting node elects only once a majority of the group pre-votes. The
members that do not yet pre-vote still elect as before, so a group is never
left without a way to elect while it is upgraded node by node.
"""

from __future__ import annotations

from pysyncobj.monotonic import monotonic as _monotonic
from pysyncobj.syncobj import _RAFT_STATE

__all__ = ["NEWER_TERM", "PRE_VOTE", "PRE_VOTE_RESPONSE", "PreVote"]

PRE_VOTE = "pre_vote"
PRE_VOTE_RESPONSE = "pre_vote_response"
NEWER_TERM = "newer_term"

_LEADER = _RAFT_STATE.LEADER
_FOLLOWER = _RAFT_STATE.FOLLOWER


class PreVote:
    """Runs a pre-vote round before each election pysyncobj would start.

    Mixed into a SyncObj subclass: `_w_pre_vote_tick()` goes at the start of
    its `_onTick`, `_w_pre_vote_message(node, message)` at the start of its
    `__onMessageReceived` (it returns True for the messages it consumed).
    It comes before SyncObj among the bases: it overrides `__connectedToAnyone`.
    """

    def _w_pre_vote_init(self) -> None:
        """Call before SyncObj.__init__, which leaves the attributes that exist
        then out of its pickled snapshots."""
        self._w_pre_vote: tuple[int, set[str]] | None = None  # (the term asked for, who granted it)
        self._w_pre_vote_won = False
        self._w_may_elect = False  # this tick's pre-vote step lets stock elect

    def _SyncObj__connectedToAnyone(self) -> bool:  # noqa: N802
        """Stock's election check in `_onTick` is the only caller: it elects
        only when this also says yes, and that is the pre-vote step's call."""
        return self._w_may_elect and super()._SyncObj__connectedToAnyone()

    def _w_pre_vote_tick(self) -> None:
        """If stock would start an election in this tick, run a pre-vote round instead,
        unless a round has just been won or a leadership transfer asks for the election.
        Stock elects in this tick only if this says so (`_w_may_elect`)."""
        self._w_may_elect = False
        if self._SyncObj__raftState == _LEADER or self._SyncObj__selfNode is None:
            return
        now = _monotonic()
        if self._SyncObj__raftElectionDeadline >= now:
            self._w_pre_vote_won = False  # a leader was heard since the round was won
            return
        if self._w_pre_vote_won or self._SyncObj__transferInProgress or not self._SyncObj__otherNodes:
            self._w_pre_vote_won = False
            self._w_may_elect = True
            return  # stock elects in this tick
        if not super()._SyncObj__connectedToAnyone():
            return  # stock does nothing either
        # Stock sees a deadline in the future and starts no election now.
        self._SyncObj__raftElectionDeadline = now + self._SyncObj__generateRaftTimeout()
        # It no longer follows a leader it cannot hear, so that it grants the
        # others' pre-votes too (else two members whose timers ran out at
        # different times refuse each other forever); stock does the same when
        # it elects, and the leader's next AppendEntries names it again.
        if self._SyncObj__raftLeader is not None:
            self._SyncObj__raftLeader = None
            self._SyncObj__onLeaderChanged()
        term = self._SyncObj__raftCurrentTerm + 1
        self._w_pre_vote = (term, {self._SyncObj__selfNode.id})
        message = {
            "type": PRE_VOTE,
            "term": term,
            "last_log_index": self._SyncObj__getCurrentLogIndex(),
            "last_log_term": self._SyncObj__getCurrentLogTerm(),
        }
        for node in self._SyncObj__otherNodes:
            self._SyncObj__transport.send(node, message)

    def _w_pre_vote_message(self, node, message) -> bool:
        kind = message.get("type")
        if kind == PRE_VOTE:
            if self._SyncObj__selfNode is not None:
                self._SyncObj__transport.send(
                    node, {"type": PRE_VOTE_RESPONSE, "term": message["term"], "granted": self._w_grants(message)}
                )
            return True
        if kind == PRE_VOTE_RESPONSE:
            if message["granted"]:
                self._w_count_grant(node, message["term"])
            return True
        if kind == NEWER_TERM:
            self._w_take_newer_term(message["term"])
            return True
        if kind == "append_entries" and self._SyncObj__selfNode is not None:
            term = self._SyncObj__raftCurrentTerm
            if message["term"] < term:  # stock ignores it without a word: tell the stale leader
                self._SyncObj__transport.send(node, {"type": NEWER_TERM, "term": term})
        return False

    def _w_take_newer_term(self, term: int) -> None:
        """A member's answer to this node's AppendEntries names a newer term: as stock takes a
        RequestVote's, the term is taken, and a leader steps down."""
        if term <= self._SyncObj__raftCurrentTerm:
            return
        self._SyncObj__setCurrentTerm(term, None)
        self._SyncObj__setState(_FOLLOWER)
        if self._SyncObj__raftLeader is not None:
            self._SyncObj__raftLeader = None
            self._SyncObj__onLeaderChanged()

    def _w_grants(self, message) -> bool:
        state = self._SyncObj__raftState
        if state == _LEADER:
            return False
        if (
            state == _FOLLOWER
            and self._SyncObj__raftLeader is not None
            and self._SyncObj__raftElectionDeadline > _monotonic()
        ):
            return False  # its leader is alive
        last_term = self._SyncObj__getCurrentLogTerm()
        if message["last_log_term"] != last_term:
            return message["last_log_term"] > last_term
        return message["last_log_index"] >= self._SyncObj__getCurrentLogIndex()

    def _w_count_grant(self, node, term: int) -> None:
        round_ = self._w_pre_vote
        if (
            round_ is None
            or round_[0] != term
            or term != self._SyncObj__raftCurrentTerm + 1  # the term moved on meanwhile
            or self._SyncObj__raftState == _LEADER
        ):
            return
        granted = round_[1]
        granted.add(node.id)
        if len(granted) > (len(self._SyncObj__otherNodes) + 1) / 2:
            self._w_pre_vote = None
            self._w_pre_vote_won = True
            self._SyncObj__raftElectionDeadline = 0  # elect at the next tick (next_tick_due says now)
