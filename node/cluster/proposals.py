"""Commands through the metadata group, with retries (part of Cluster, node/cluster/cluster.py).

`await propose(record, timeout)` hands the record to the group on this node;
Raft forwards it to the leader when this node follows, and the proposer's
callback runs when this node has applied the entry, so a successful propose
is committed by a majority and visible in this node's machine
(read-your-writes). Failures that certainly did not commit (no leader yet, a
follower that lost its leader, an entry replaced by a new leader's) are
retried until the timeout; when the leader changed while the command was in
flight the outcome is unknown, and it is retried only for idempotent records
(`idempotency_key`, or `idempotent=True`), else reported as OutcomeUnknown.
Past the timeout: NoQuorum when this node does not reach a majority of the
members, CommitTimeout otherwise. `await fence()` commits a no-op through
the leader: once it returns, every change committed before it is applied
here (Khepri's consistent read).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from node.cluster.errors import ClusterError, ClusterUnavailable, CommitTimeout, NoQuorum, OutcomeUnknown
from raft.records import command
from raft.status import ProposalOutcome

if TYPE_CHECKING:
    from node.cluster.cluster import Cluster
    from raft.group import RaftGroup

__all__ = ["Noop", "Proposer"]

# Certainly not appended, or certainly not committed: safe to propose again.
RETRY = frozenset({ProposalOutcome.MISSING_LEADER, ProposalOutcome.NOT_LEADER, ProposalOutcome.DISCARDED,
                   ProposalOutcome.QUEUE_FULL})  # fmt: skip
# The leader changed while the command was in flight: it may have committed.
AMBIGUOUS = frozenset({ProposalOutcome.LEADER_CHANGED, ProposalOutcome.UNKNOWN_OUTCOME})
RETRY_MIN, RETRY_MAX = 0.02, 0.25
ATTEMPT_TIMEOUT = 1.5  # seconds an idempotent proposal waits for its answer before it is made again


@command("cluster.noop", version=1)
@dataclass(frozen=True)
class Noop:
    """Committed by `fence()`; applies to nothing."""


class Proposer:
    """Proposals and their retries; part of the Cluster (its loop, groups, reachability)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._pending: set[asyncio.Future] = set()

    async def propose(self, record: Any, timeout: float | None = None, *, idempotent: bool | None = None) -> Any:
        """Commit `record` through the leader and return what this node's machine returned for it."""
        loop = self.cluster.loop
        timeout = self.cluster.command_timeout if timeout is None else timeout
        if idempotent is None:
            idempotent = type(record) is Noop or bool(getattr(record, "idempotency_key", None))
        deadline = loop.time() + timeout
        delay = RETRY_MIN
        in_doubt = False  # an attempt went unanswered or was cut short: it may yet commit
        while True:
            # An idempotent record is proposed again when no answer comes within
            # ATTEMPT_TIMEOUT: a forward lost with its stream gets no answer at all.
            attempt = min(deadline, loop.time() + ATTEMPT_TIMEOUT) if idempotent else deadline
            may_land = self._may_land()
            try:
                result, outcome = await self.submit(lambda cb: self.live_group().propose(record, callback=cb),
                                                    attempt, timeout)  # fmt: skip
            except ClusterUnavailable:
                in_doubt = in_doubt or may_land
                if attempt >= deadline:
                    raise self.unavailable(timeout, in_doubt) from None
                continue
            if outcome is ProposalOutcome.SUCCESS:
                return result
            if outcome in AMBIGUOUS and not idempotent:
                raise OutcomeUnknown(f"the leader changed while the command was in flight ({outcome.value});"
                                     " it may or may not have been committed")  # fmt: skip
            if outcome not in RETRY and outcome not in AMBIGUOUS:
                raise ClusterError(f"command refused: {outcome.value}")
            in_doubt = in_doubt or outcome in AMBIGUOUS
            delay = await self.backoff(delay, deadline, timeout, in_doubt)

    async def fence(self, timeout: float | None = None) -> None:
        """Commit a no-op through the leader: afterwards this node has applied every earlier change."""
        await self.propose(Noop(), timeout, idempotent=True)

    async def submit(self, send: Callable[[Callable], None], deadline: float, timeout: float,
                     group: str | None = None) -> tuple[Any, ProposalOutcome]:  # fmt: skip
        """`send(callback)` hands one proposal to a group (the metadata one unless `group`
        names another); its (result, outcome), or ClusterUnavailable past `deadline`."""
        loop = self.cluster.loop
        fut = loop.create_future()

        def done(result: Any, outcome: ProposalOutcome) -> None:
            if not fut.done():
                fut.set_result((result, outcome))

        self._pending.add(fut)
        try:
            send(done)
            if group is None:
                self.cluster.host.kick()  # the metadata group
            else:
                self.cluster.host.kick(group)
            # asyncio.timeout_at, not wait_for: on Python 3.11 wait_for returns the
            # answer when a cancellation comes in the turn it arrived, and the
            # cancelled caller runs on (a proposing loop then never ends)
            try:
                async with asyncio.timeout_at(deadline):
                    return await fut
            except TimeoutError:
                raise self.unavailable(timeout) from None
        finally:
            self._pending.discard(fut)

    def fail_pending(self, e: ClusterError) -> None:
        """Every proposal waiting for its answer fails with `e`."""
        for fut in list(self._pending):
            if not fut.done():
                fut.set_exception(e)

    async def backoff(self, delay: float, deadline: float, timeout: float, in_doubt: bool = False) -> float:
        """Sleep `delay` and return the next one, or raise if the deadline comes first."""
        loop = self.cluster.loop
        if loop.time() + delay >= deadline:
            raise self.unavailable(timeout, in_doubt)
        await asyncio.sleep(delay)
        return min(delay * 2, RETRY_MAX)

    def live_group(self) -> RaftGroup:
        """The metadata group, if this node's cluster part runs."""
        c = self.cluster
        if c.failed is not None:
            raise ClusterError(f"the cluster part of this node stopped: {c.failed}")
        if c.group is None or not c.running:
            raise ClusterError("the cluster part of this node is not running")
        return c.group

    def unavailable(self, timeout: float, in_doubt: bool = False) -> ClusterUnavailable:
        """Why nothing committed in time. NoQuorum and CommitTimeout promise the
        command was not applied; `in_doubt` (an attempt may still commit, e.g.
        appended by a leader cut off right after) gives OutcomeUnknown instead."""
        c = self.cluster
        reachable, total = c.reachability()
        if in_doubt:
            return OutcomeUnknown(f"not committed within {timeout:g}s ({reachable} of {total} members reachable);"
                                  " the command was in flight and may still be applied")  # fmt: skip
        if reachable * 2 <= total:
            return NoQuorum(reachable, total)
        leader = c.group.leader_id if c.group is not None else None
        return CommitTimeout(f"not committed within {timeout:g}s ({reachable} of {total} members reachable,"
                             f" leader {leader or 'unknown'})")  # fmt: skip

    def _may_land(self) -> bool:
        """Whether a proposal made now can reach a leader's log: this node leads, or
        the leader it knows is reachable (else the forward is dropped at once)."""
        group = self.cluster.group
        if group is None:
            return False
        leader = group.leader_id
        return group.is_leader or (leader is not None and self.cluster.is_reachable(leader))
