"""Publish batches applied once, whatever the number of times they are proposed.

A host proposes each Publish batch until the group takes it; after a leader
change it cannot know whether its first proposal was committed, so the same
batch may reach the log twice. Each batch carries (publisher, seq), seqs
counting up from 1 per publisher; the state remembers which seqs it applied
(a low watermark and the seqs above it, since a later batch may commit
before an earlier one's retry) and the confirms of the most recent
REMEMBERED_BATCHES, which a duplicate gets again. This is state like any
other: snapshotted and identical on every member.
"""

from __future__ import annotations

from .effects import Confirm, Outcome
from .state import REMEMBERED_BATCHES, PublisherState, QuorumState

__all__ = ["remember", "seen"]


def seen(st: QuorumState, publisher: str, seq: int) -> list[Confirm] | None:
    """The confirms of a batch applied before, or None for a new one."""
    if not publisher:
        return None
    ps = st.publishers.get(publisher)
    if ps is None or (seq > ps.low and seq not in ps.above):
        return None
    confirms = ps.outcomes.get(seq)
    if confirms is None:  # too old to be remembered: the proposer gave up on it long ago
        return []
    return [Confirm(corrs, Outcome(outcome)) for outcome, corrs in confirms]


def remember(st: QuorumState, publisher: str, seq: int, effects: list) -> None:
    """Batch (publisher, seq) was applied with these effects."""
    if not publisher:
        return
    ps = st.publishers.get(publisher)
    if ps is None:
        ps = st.publishers[publisher] = PublisherState()
    above = ps.above
    above.add(seq)
    while ps.low + 1 in above:
        ps.low += 1
        above.discard(ps.low)
    outcomes = ps.outcomes
    outcomes[seq] = tuple((e.outcome.value, e.correlations) for e in effects if isinstance(e, Confirm))
    for old in [s for s in outcomes if s <= seq - REMEMBERED_BATCHES]:
        del outcomes[old]
