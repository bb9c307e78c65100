"""How messages move in the quorum queue's state: to consumers in service,
back to the queue, out of it (dead-lettered or dropped). The handlers of
machine.py are built from these; like them, they update the state in place
and append effects to the `Ctx` of the command being applied.
"""

from __future__ import annotations

from bisect import insort
from collections import deque
from heapq import heappop, heappush
from typing import Any

from amqp import serial

from . import commands as c
from .effects import REASON_EXPIRED, REASON_MAXLEN, Deliver, DeliveredMessage
from .state import M_ANN, M_ID, M_SIZE, ConsumerState, QuorumState

__all__ = [
    "NO_FRESH",
    "Ctx",
    "activate",
    "compact_live_order",
    "deactivate",
    "dispatch",
    "eligible",
    "enforce_drop_head",
    "forget",
    "head",
    "kill",
    "pop_head",
    "remove_consumer",
    "requeue",
]

_MASK = serial.MASK
_tnew = tuple.__new__
NO_FRESH = 1 << 80  # above every message id


class Ctx:
    """What one apply produces: effects in order, dead letters by reason, credit replies."""

    __slots__ = ("out", "dead", "dropped", "replies")

    def __init__(self) -> None:
        self.out: list = []
        self.dead: dict[str, list[tuple]] | None = None
        self.dropped: dict[str, int] | None = None  # reason -> messages gone with no dead-letter exchange
        self.replies: list | None = None



# ---------------------------------------------------------------- message moves


def forget(st: QuorumState, mid: int) -> None:
    """A message left the state for good: release its raft index."""
    idx = mid >> c.POS_BITS
    live = st.live
    n = live[idx] - 1
    if n:
        live[idx] = n
        return
    del live[idx]
    order = st.live_order
    if order[0] == idx:
        order.popleft()
        while order and order[0] not in live:
            order.popleft()
    elif len(order) > 2 * len(live) + 64:
        compact_live_order(st)


def compact_live_order(st: QuorumState) -> None:
    """Drops the stale entries behind the head (one message stuck at the
    head must not let the deque grow by one entry per Enqueue forever)."""
    live = st.live
    st.live_order = deque(i for i in st.live_order if i in live)


def kill(st: QuorumState, msg: tuple, reason: str, ctx: Ctx) -> None:
    """A message that is neither ready nor checked out any more (the caller
    took it out and fixed the counts) leaves other than by acceptance."""
    counters = st.counters
    if reason is REASON_EXPIRED:
        counters.expired += 1
    cfg = st.config
    if cfg.dead_letter:
        if cfg.at_least_once:
            st.dlx[msg[M_ID]] = (msg, reason)
            st.dlx_bytes += msg[M_SIZE]
        else:
            counters.dead_lettered += 1
            forget(st, msg[M_ID])
        dead = ctx.dead
        if dead is None:
            dead = ctx.dead = {}
        lst = dead.get(reason)
        if lst is None:
            dead[reason] = [msg]
        else:
            lst.append(msg)
    else:
        counters.dropped += 1
        forget(st, msg[M_ID])
        dropped = ctx.dropped
        if dropped is None:
            dropped = ctx.dropped = {}
        dropped[reason] = dropped.get(reason, 0) + 1


def pop_head(st: QuorumState) -> tuple:
    msg = heappop(st.returned) if st.returned else st.ready.popleft()
    st.ready_bytes -= msg[M_SIZE]
    return msg


def head(st: QuorumState) -> tuple | None:
    if st.returned:
        return st.returned[0]
    if st.ready:
        return st.ready[0]
    return None


def requeue(st: QuorumState, msg: tuple, failed: int, annotations: Any) -> None:
    mid, size, expiry, dc, acq, _ = msg
    heappush(st.returned, (mid, size, expiry, dc + failed, acq + 1, annotations))
    st.ready_bytes += size


def enforce_drop_head(st: QuorumState, ctx: Ctx) -> None:
    cfg = st.config
    if cfg.overflow != "drop-head" or not cfg.limited:
        return
    max_len, max_bytes = cfg.max_length, cfg.max_length_bytes
    while st.returned or st.ready:
        held = len(st.dlx)
        if not (
            (max_len is not None and len(st.returned) + len(st.ready) + held > max_len)
            or (max_bytes is not None and st.ready_bytes + st.dlx_bytes > max_bytes)
        ):
            return
        kill(st, pop_head(st), REASON_MAXLEN, ctx)


# ---------------------------------------------------------------- consumers in service


def activate(st: QuorumState, cs: ConsumerState) -> None:
    level = st.service.get(cs.priority)
    if level is None:
        level = st.service[cs.priority] = deque()
        prios = st.prios
        prios.reverse()
        insort(prios, cs.priority)
        prios.reverse()
    level.append(cs)
    cs.in_service = True


def deactivate(st: QuorumState, cs: ConsumerState) -> None:
    if not cs.in_service:
        return
    level = st.service[cs.priority]
    level.remove(cs)
    cs.in_service = False
    if not level:
        del st.service[cs.priority]
        st.prios.remove(cs.priority)


def eligible(st: QuorumState, cs: ConsumerState) -> bool:
    return not st.config.single_active_consumer or st.sac_active == cs.consumer_id


def dispatch(st: QuorumState, ctx: Ctx, fresh_from: int = NO_FRESH) -> None:
    """Hands ready messages to consumers in service until one side runs out.
    Messages with id >= fresh_from (the Enqueue being applied) are not
    expired here.

    Round robin is per message among consumers of the same priority; a
    consumer alone at the top priority takes a run of messages at once."""
    prios = st.prios
    returned, ready = st.returned, st.ready
    service = st.service
    clock = st.clock
    batches: dict[Any, list] = {}
    ready_bytes = st.ready_bytes
    delivered = redelivered = acked = 0
    popleft = ready.popleft
    while prios and (returned or ready):
        prio = prios[0]
        level = service[prio]
        cs = level[0]
        # one message each in turn among equals; a consumer alone takes a run
        want = cs.credit if len(level) == 1 else 1
        cid = cs.consumer_id
        batch = batches.get(cid)
        if batch is None:
            batch = batches[cid] = []
        append = batch.append
        checked = None if cs.settled else cs.checked
        got = 0
        size_out = 0
        while got < want:
            if returned:
                msg = heappop(returned)
            elif ready:
                msg = popleft()
            else:
                break
            mid, size, expiry, dc, acq, ann = msg
            ready_bytes -= size
            if expiry is not None and expiry <= clock and mid < fresh_from:
                kill(st, msg, REASON_EXPIRED, ctx)
                continue
            got += 1
            size_out += size
            if acq:
                redelivered += 1
            append(_tnew(DeliveredMessage, (mid, dc, not acq, ann)))
            if checked is None:
                forget(st, mid)
            else:
                checked[mid] = msg
        if not got:
            if not batch:
                del batches[cid]
            break
        delivered += got
        if checked is None:
            acked += got
        else:
            st.checked_count += got
            st.checked_bytes += size_out
        credit = cs.credit - got
        cs.credit = credit
        cs.delivery_count = (cs.delivery_count + got) & _MASK
        if credit == 0:
            level.popleft()
            cs.in_service = False
            if not level:
                del service[prio]
                prios.pop(0)
        elif len(level) > 1:
            level.rotate(-1)
    st.ready_bytes = ready_bytes
    counters = st.counters
    counters.delivered += delivered
    counters.redelivered += redelivered
    counters.acknowledged += acked
    out = ctx.out
    for cid, batch in batches.items():
        out.append(Deliver(cid, tuple(batch)))


def remove_consumer(st: QuorumState, cs: ConsumerState) -> None:
    """Detach: unsettled messages go back (not a failed delivery)."""
    del st.consumers[cs.consumer_id]
    deactivate(st, cs)
    checked = cs.checked
    if checked:
        size = 0
        for msg in checked.values():
            requeue(st, msg, 0, msg[M_ANN])
            size += msg[M_SIZE]
        st.checked_count -= len(checked)
        st.checked_bytes -= size
        st.counters.returned += len(checked)
        cs.checked = {}
    if st.sac_active == cs.consumer_id:
        st.sac_active = None
        if st.consumers:
            nxt = max(st.consumers.values(), key=_priority)  # first of the highest priority, in attach order
            st.sac_active = nxt.consumer_id
            if nxt.credit > 0:
                activate(st, nxt)


def _priority(cs: ConsumerState) -> int:
    return cs.priority
