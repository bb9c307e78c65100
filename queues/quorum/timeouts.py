"""The consumer timeout, inside the machine (RabbitMQ 4.3's "message locks").

Time comes only from TickTimeouts commands (quorum.tick version 2), which
the leader proposes: each stamps the messages checked out since the previous
one with its `now_ms` (ConsumerState.since), so a message's stamp is the first
tick that saw it held, at or after its checkout; and it returns every message
stamped at least `consumer_timeout` ms before it: back to the queue like a
release (acquired again, not a failed delivery), and its consumer is timed
out: out of service for good, told by a ConsumerTimedOut effect, until its
Detach. Measuring from the Tick and not from the command that delivered
(Credit, Return and Detach carry no time; the clock the machine keeps may be
old) makes a timeout late by at most the leader's stamping interval, never
early. Every member applies the same Ticks, so all agree on which messages
went back and when.
"""

from __future__ import annotations

from typing import Any

from .dispatch import Ctx, deactivate, dispatch, enforce_drop_head, requeue
from .effects import ConsumerTimedOut
from .state import M_ANN, M_SIZE, QuorumState

__all__ = ["next_timeout", "stamp", "time_out"]


def stamp(st: QuorumState, now: int) -> None:
    """Messages checked out since the last TickTimeouts are held from `now` on."""
    if not st.unstamped:
        return
    st.unstamped = False
    for cs in st.consumers.values():
        checked, since = cs.checked, cs.since
        if len(checked) == len(since):
            continue
        new: list[int] = []  # the unstamped ones are the newest: a suffix of checked
        for mid in reversed(checked):
            if mid in since:
                break
            new.append(mid)
        for mid in reversed(new):
            since[mid] = now


def time_out(st: QuorumState, now: int, timeout: int, ctx: Ctx) -> None:
    """Returns the messages held since `now - timeout` or before; their consumers are timed out."""
    limit = now - timeout
    returned = 0
    for cs in st.consumers.values():
        since = cs.since
        late: list[int] = []
        for mid, held_from in since.items():  # oldest first
            if held_from > limit:
                break
            late.append(mid)
        if not late:
            continue
        size = 0
        checked = cs.checked
        for mid in late:
            del since[mid]
            msg = checked.pop(mid)
            size += msg[M_SIZE]
            requeue(st, msg, 0, msg[M_ANN])
        st.checked_count -= len(late)
        st.checked_bytes -= size
        returned += len(late)
        cs.timed_out = True
        deactivate(st, cs)
        ctx.out.append(ConsumerTimedOut(cs.consumer_id, timeout, len(late)))
    if returned:
        st.counters.returned += returned
        dispatch(st, ctx)
        enforce_drop_head(st, ctx)


def next_timeout(st: QuorumState, timeout: int) -> Any:
    """When (ms) the oldest stamped message is held `timeout` ms, for the leader's
    Tick timer; None when no consumer holds a stamped message."""
    due = None
    for cs in st.consumers.values():
        for held_from in cs.since.values():
            if due is None or held_from < due:
                due = held_from
            break
    return None if due is None else due + timeout
