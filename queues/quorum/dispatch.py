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
    "deactivate",
    "dispatch",
    "eligible",
    "enforce_drop_head",
    "forget",
    "head",
    "kill",
    "pop_head",
    "release_run",
    "remove_consumer",
    "requeue",
    "spend_credit",
]

_MASK = serial.MASK
_POS_BITS = c.POS_BITS
_tnew = tuple.__new__
NO_FRESH = 1 << 80  # above every message id
_STRETCH = 4096  # ready messages read at once by dispatch


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
    st.live.release(mid >> _POS_BITS)


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
    """The next message out (returned first, then high priority, then normal)."""
    if st.returned:
        msg = heappop(st.returned)
    else:
        msg = (st.ready_high or st.ready).popleft()
    st.ready_bytes -= msg[M_SIZE]
    return msg


def head(st: QuorumState) -> tuple | None:
    if st.returned:
        return st.returned[0]
    return (st.ready_high or st.ready).head()


def requeue(st: QuorumState, msg: tuple, failed: int, annotations: Any) -> None:
    mid, size, expiry, dc, acq, _ = msg
    heappush(st.returned, (mid, size, expiry, dc + failed, acq + 1, annotations))
    st.ready_bytes += size


def enforce_drop_head(st: QuorumState, ctx: Ctx) -> None:
    cfg = st.config
    if cfg.overflow != "drop-head" or not cfg.limited:
        return
    max_len, max_bytes = cfg.max_length, cfg.max_length_bytes
    while st.returned or st.ready or st.ready_high:
        held = len(st.dlx)
        if not (
            (max_len is not None and st.ready_count + held > max_len)
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
    if cs.timed_out:
        return False  # held a message past the consumer timeout (timeouts.py): nothing more
    return not st.config.single_active_consumer or st.sac_active == cs.consumer_id


def dispatch(st: QuorumState, ctx: Ctx, fresh_from: int = NO_FRESH) -> None:
    """Hands ready messages to consumers in service until one side runs out.
    Messages with id >= fresh_from (the Enqueue being applied) are not
    expired here.

    Round robin is per message among consumers of the same priority; a
    consumer alone at the top priority takes a run of messages at once."""
    if st.ready_high:  # high-priority messages: one at a time, 2:1 with normal ones (priority.py)
        from .priority import dispatch_prioritised  # it uses this module's moves

        dispatch_prioritised(st, ctx, fresh_from)
        if st.ready_high:
            return  # out of consumers
    prios = st.prios
    returned, ready = st.returned, st.ready
    service = st.service
    clock = st.clock
    batches: dict[Any, list] = {}
    ready_bytes = st.ready_bytes
    delivered = redelivered = acked = 0
    release = st.live.release
    # The ready list is read a stretch at a time (consecutive ids of its head
    # run, one expiry): ids s_mid .. s_end - 1, their sizes from s_sizes[s_i].
    # What is handed out of it is dropped from the list when the stretch is
    # done (`pending`), so that round robin costs no call per message.
    ready_n = len(ready)  # ready messages not handed out yet
    s_mid = s_end = s_i = pending = 0
    s_exp: int | None = None
    s_sizes: Any = ()
    while prios and (returned or ready_n):
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
                continue
            if not ready_n:
                break
            if s_mid == s_end:  # the next stretch
                if pending:
                    ready.drop(pending)
                    pending = 0
                s_mid, n, s_exp, s_sizes = ready.peek(_STRETCH, fresh_from)
                s_end = s_mid + n
                s_i = 0
                if s_exp is not None and s_exp <= clock and s_mid < fresh_from:
                    ready.drop(n)
                    ready_n -= n
                    for size in s_sizes:
                        ready_bytes -= size
                        kill(st, (s_mid, size, s_exp, 0, 0, None), REASON_EXPIRED, ctx)
                        s_mid += 1
                    continue
            k = s_end - s_mid
            if k > want - got:
                k = want - got
            got += k
            ready_n -= k
            pending += k
            mid = s_mid
            s_mid += k
            if k == 1:
                size = s_sizes[s_i]
                s_i += 1
                ready_bytes -= size
                size_out += size
                append(_tnew(DeliveredMessage, (mid, 0, True, None)))
                if checked is None:
                    release(mid >> _POS_BITS)
                else:
                    checked[mid] = (mid, size, s_exp, 0, 0, None)
                continue
            sizes = s_sizes[s_i : s_i + k]
            s_i += k
            total = sum(sizes)
            ready_bytes -= total
            size_out += total
            if checked is None:
                for _ in sizes:
                    append(_tnew(DeliveredMessage, (mid, 0, True, None)))
                    mid += 1
                _release_run(release, mid - k, k)
            else:
                for size in sizes:
                    append(_tnew(DeliveredMessage, (mid, 0, True, None)))
                    checked[mid] = (mid, size, s_exp, 0, 0, None)
                    mid += 1
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
            st.unstamped = True  # the next Tick stamps them (timeouts.py)
        spend_credit(service, prios, prio, level, cs, got)
    if pending:
        ready.drop(pending)
    st.ready_bytes = ready_bytes
    counters = st.counters
    counters.delivered += delivered
    counters.redelivered += redelivered
    counters.acknowledged += acked
    out = ctx.out
    for cid, batch in batches.items():
        out.append(Deliver(cid, tuple(batch)))


def _release_run(release: Any, first: int, n: int) -> None:
    """Releases messages first .. first + n - 1 (consecutive ids) from the live counts."""
    idx = first >> _POS_BITS
    last = (first + n - 1) >> _POS_BITS
    if idx == last:
        release(idx, n)
        return
    while idx <= last:  # a run across full batches
        start = max(first, idx << _POS_BITS)
        end = min(first + n, (idx + 1) << _POS_BITS)
        release(idx, end - start)
        idx += 1


def release_run(st: QuorumState, first: int, n: int) -> None:
    """Messages first .. first + n - 1 left the state for good."""
    _release_run(st.live.release, first, n)


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
        cs.since = {}
    if st.sac_active == cs.consumer_id:
        st.sac_active = None
        if st.consumers:
            nxt = max(st.consumers.values(), key=_priority)  # first of the highest priority, in attach order
            st.sac_active = nxt.consumer_id
            if nxt.credit > 0 and not nxt.timed_out:
                activate(st, nxt)


def _priority(cs: ConsumerState) -> int:
    return cs.priority


def spend_credit(service: dict, prios: list, prio: int, level: deque, cs: ConsumerState, n: int) -> None:
    """`cs`, first in its priority `level`, was handed `n` messages: out of
    service once its credit is spent, else to the back of its level (round
    robin among consumers of one priority)."""
    cs.credit -= n
    cs.delivery_count = (cs.delivery_count + n) & _MASK
    if cs.credit == 0:
        level.popleft()
        cs.in_service = False
        if not level:
            del service[prio]
            prios.pop(0)
    elif len(level) > 1:
        level.rotate(-1)
