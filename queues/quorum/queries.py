"""Questions the host asks of the quorum queue's state; none changes it."""

from __future__ import annotations

from typing import Any

from . import dedup
from .effects import Confirm
from .state import QuorumState

__all__ = [
    "checked_out",
    "consumer_link",
    "dead_letter_pending",
    "next_expiry",
    "overview",
    "publish_outcome",
    "release_cursor",
]


def release_cursor(state: QuorumState) -> int:
    """The smallest raft index still referenced by a live message (ready,
    checked out or in dead-letter holding): log entries and bodies below it
    may be compacted. With no live message: the last applied index + 1."""
    first = state.live.first()
    return state.last_index + 1 if first is None else first


def next_expiry(state: QuorumState) -> int | None:
    """When the head message expires (ms), for the host's Tick timer; None
    when the head has no TTL or the queue has no ready message."""
    if state.returned:
        return state.returned[0][2]
    if state.ready_high:
        return state.ready_high.head_expiry()
    return state.ready.head_expiry()


def dead_letter_pending(state: QuorumState) -> list[tuple[int, str]]:
    """At-least-once: (msg_id, reason) of every message in the holding area,
    oldest first (a new leader re-sends these)."""
    return [(mid, reason) for mid, (_, reason) in state.dlx.items()]


def checked_out(state: QuorumState, consumer_id: Any) -> list[int]:
    """Ids of the messages the consumer holds unsettled, in delivery order."""
    cs = state.consumers.get(consumer_id)
    return [] if cs is None else list(cs.checked)


def consumer_link(state: QuorumState, consumer_id: Any) -> tuple[int, int] | None:
    """(delivery_count, credit) of a consumer, or None if not attached."""
    cs = state.consumers.get(consumer_id)
    return None if cs is None else (cs.delivery_count, cs.credit)


def overview(state: QuorumState) -> dict:
    """Depth, ready, checked_out, consumers and the counters."""
    ready = state.ready_count
    dlx = len(state.dlx)
    return {
        "depth": ready + state.checked_count + dlx,
        "ready": ready,
        "checked_out": state.checked_count,
        "dlx_holding": dlx,
        "ready_bytes": state.ready_bytes,
        "checked_out_bytes": state.checked_bytes,
        "dlx_bytes": state.dlx_bytes,
        "consumers": len(state.consumers),
        "active_consumer": state.sac_active,
        "release_cursor": release_cursor(state),
        "last_index": state.last_index,
        "counters": state.counters.as_dict(),
    }


def publish_outcome(state: QuorumState, publisher: str, seq: int) -> list[Confirm] | None:
    """The Confirms of the Publish batch (publisher, seq) if it was applied
    (empty once it is too old to be remembered), None if it was not."""
    return dedup.seen(state, publisher, seq)
