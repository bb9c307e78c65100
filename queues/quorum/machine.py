"""The quorum queue's state machine, in the style of RabbitMQ's rabbit_fifo.

    apply(command, state, index) -> (state, effects)

Pure: no I/O, no clock (time comes in commands as `now_ms`), no randomness;
the same commands applied in the same order to equal states give equal
states and equal effects on every member. For speed `apply` UPDATES `state`
IN PLACE and returns it: the queue's Raft group owns the only copy (take a
snapshot, `snapshot_bytes`, for another). `index` is the command's Raft log
index; indexes must increase (message ids are built from them).

Semantics (RabbitMQ 4 quorum queues, as Warren re-creates them):

- Enqueue: each message is accepted, or rejected when x-overflow is
  reject-publish and it would take the ready (+ dead-letter holding) count
  past x-max-length or their bytes past x-max-length-bytes. Accepted
  messages get the smaller of their own TTL and x-message-ttl. After
  deliveries, drop-head removes the oldest ready messages while over a limit
  (dead-lettered with reason "maxlen", or dropped).
- Deliveries: from the head (returned messages first, by id, then the rest in
  order) to consumers with credit, highest priority first, round robin among
  equals, one message at a time. With x-single-active-consumer only the
  active consumer (the first attached; when it goes, the remaining one with
  the highest priority, earliest attached first) receives. A message whose
  expiry has passed by the machine's clock is expired instead of delivered,
  except the messages of the Enqueue being applied (TTL 0 still reaches a
  waiting consumer, as in RabbitMQ).
- Settle (accepted) removes; Return (released) requeues without counting a
  failed delivery; Discard (rejected) dead-letters with "rejected"; Modify
  may count a failed delivery (crossing x-delivery-limit dead-letters with
  "delivery_limit"), dead-letter ("undeliverable_here": "rejected") and merge
  annotations. Settlements for ids the consumer does not hold are ignored.
- Dead-lettering without x-dead-letter-exchange drops; at-most-once emits
  DeadLetter and forgets the message; at-least-once (only with x-overflow
  reject-publish, as in RabbitMQ) moves it into the holding area until
  DeadLetterSettled.
- Tick expires messages at the head whose expiry is <= now (a message
  without TTL at the head shields the ones behind it, as in RabbitMQ).
- Credit (API v2): credit = receiver's delivery-count + link credit - ours
  (RFC 1982), clamped at 0; deliveries follow; drain then spends the credit
  left by advancing delivery-count; echo or drain gets a CreditReply.

Cost: O(1) per message for enqueue, delivery and settle; O(log n) to
return a message; O(consumers at one priority) to change a consumer's credit
between zero and non-zero.
"""

from __future__ import annotations

from bisect import insort
from collections import deque
from heapq import heappop, heappush
from typing import Any

from amqp import serial

from . import commands as c
from .effects import (
    REASON_DELIVERY_LIMIT,
    REASON_EXPIRED,
    REASON_MAXLEN,
    REASON_REJECTED,
    Confirm,
    CreditReply,
    DeadLetter,
    Deliver,
    DeliveredMessage,
    Outcome,
    Purged,
)
from .state import M_ANN, M_ID, M_SIZE, ConsumerState, QuorumConfig, QuorumState, new_state

__all__ = [
    "MAX_CREDIT",
    "QuorumMachine",
    "apply",
    "checked_out",
    "consumer_link",
    "dead_letter_pending",
    "new_state",
    "next_expiry",
    "overview",
    "release_cursor",
]

MAX_CREDIT = serial.HALF - 1  # keeps delivery_count + credit a meaningful serial number [2.6.7]
_MASK = serial.MASK
_tnew = tuple.__new__
_NO_FRESH = 1 << 80  # above every message id
_ACCEPTED = Outcome.ACCEPTED
_REJECTED = Outcome.REJECTED


class _Ctx:
    """What one apply produces: effects in order, dead letters by reason, credit replies."""

    __slots__ = ("out", "dead", "replies")

    def __init__(self) -> None:
        self.out: list = []
        self.dead: dict[str, list[tuple]] | None = None
        self.replies: list | None = None


def apply(command: Any, state: QuorumState, index: int | None = None) -> tuple[QuorumState, list]:
    """Apply one command (mutating `state`); returns (state, effects).
    `index` None means `state.last_index + 1` (tests)."""
    if index is None:
        index = state.last_index + 1
    elif index <= state.last_index:
        raise ValueError(f"raft index {index} is not after the last applied one ({state.last_index})")
    handler = _HANDLERS.get(type(command))
    if handler is None:
        raise TypeError(f"not a quorum queue command: {type(command).__name__}")
    state.last_index = index
    ctx = _Ctx()
    handler(state, command, index, ctx)
    out = ctx.out
    if ctx.dead:
        for reason, msgs in ctx.dead.items():
            anns = tuple(m[M_ANN] for m in msgs)
            if anns.count(None) == len(anns):
                anns = ()
            out.append(DeadLetter(tuple(m[M_ID] for m in msgs), reason, state.config.at_least_once, anns))
    if ctx.replies:
        out.extend(ctx.replies)
    return state, out


# ---------------------------------------------------------------- queries


def release_cursor(state: QuorumState) -> int:
    """The smallest raft index still referenced by a live message (ready,
    checked out or in dead-letter holding): log entries and bodies below it
    may be compacted. With no live message: the last applied index + 1."""
    order = state.live_order
    return order[0] if order else state.last_index + 1


def next_expiry(state: QuorumState) -> int | None:
    """When the head message expires (ms), for the host's Tick timer; None
    when the head has no TTL or the queue has no ready message."""
    if state.returned:
        return state.returned[0][2]
    if state.ready:
        return state.ready[0][2]
    return None


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


# ---------------------------------------------------------------- message moves


def _forget(st: QuorumState, mid: int) -> None:
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
        _compact_live_order(st)


def _compact_live_order(st: QuorumState) -> None:
    """Drops the stale entries behind the head (one message stuck at the
    head must not let the deque grow by one entry per Enqueue forever)."""
    live = st.live
    st.live_order = deque(i for i in st.live_order if i in live)


def _kill(st: QuorumState, msg: tuple, reason: str, ctx: _Ctx) -> None:
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
            _forget(st, msg[M_ID])
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
        _forget(st, msg[M_ID])


def _pop_head(st: QuorumState) -> tuple:
    msg = heappop(st.returned) if st.returned else st.ready.popleft()
    st.ready_bytes -= msg[M_SIZE]
    return msg


def _head(st: QuorumState) -> tuple | None:
    if st.returned:
        return st.returned[0]
    if st.ready:
        return st.ready[0]
    return None


def _requeue(st: QuorumState, msg: tuple, failed: int, annotations: Any) -> None:
    mid, size, expiry, dc, acq, _ = msg
    heappush(st.returned, (mid, size, expiry, dc + failed, acq + 1, annotations))
    st.ready_bytes += size


def _enforce_drop_head(st: QuorumState, ctx: _Ctx) -> None:
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
        _kill(st, _pop_head(st), REASON_MAXLEN, ctx)


# ---------------------------------------------------------------- consumers in service


def _activate(st: QuorumState, cs: ConsumerState) -> None:
    level = st.service.get(cs.priority)
    if level is None:
        level = st.service[cs.priority] = deque()
        prios = st.prios
        prios.reverse()
        insort(prios, cs.priority)
        prios.reverse()
    level.append(cs)
    cs.in_service = True


def _deactivate(st: QuorumState, cs: ConsumerState) -> None:
    if not cs.in_service:
        return
    level = st.service[cs.priority]
    level.remove(cs)
    cs.in_service = False
    if not level:
        del st.service[cs.priority]
        st.prios.remove(cs.priority)


def _eligible(st: QuorumState, cs: ConsumerState) -> bool:
    return not st.config.single_active_consumer or st.sac_active == cs.consumer_id


def _dispatch(st: QuorumState, ctx: _Ctx, fresh_from: int = _NO_FRESH) -> None:
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
                _kill(st, msg, REASON_EXPIRED, ctx)
                continue
            got += 1
            size_out += size
            if acq:
                redelivered += 1
            append(_tnew(DeliveredMessage, (mid, dc, not acq, ann)))
            if checked is None:
                _forget(st, mid)
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


def _remove_consumer(st: QuorumState, cs: ConsumerState) -> None:
    """Detach: unsettled messages go back (not a failed delivery)."""
    del st.consumers[cs.consumer_id]
    _deactivate(st, cs)
    checked = cs.checked
    if checked:
        size = 0
        for msg in checked.values():
            _requeue(st, msg, 0, msg[M_ANN])
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
                _activate(st, nxt)


def _priority(cs: ConsumerState) -> int:
    return cs.priority


# ---------------------------------------------------------------- handlers


def _enqueue(st: QuorumState, cmd: c.Enqueue, index: int, ctx: _Ctx) -> None:
    now = cmd.now_ms
    if now > st.clock:
        st.clock = now
    msgs = cmd.messages
    if len(msgs) > c.MAX_BATCH:
        raise ValueError(f"an Enqueue holds at most {c.MAX_BATCH} messages")
    cfg = st.config
    qttl = cfg.message_ttl
    base = index << c.POS_BITS
    ready = st.ready
    append = ready.append
    accepted: list = []
    rejected: list = []
    reject = cfg.overflow == "reject-publish" and cfg.limited
    max_len, max_bytes = cfg.max_length, cfg.max_length_bytes
    n = 0
    total = 0
    pos = -1
    for size, ttl, corr in msgs:
        pos += 1
        if reject and (
            (max_len is not None and len(st.returned) + len(ready) + len(st.dlx) + 1 > max_len)
            or (max_bytes is not None and st.ready_bytes + total + st.dlx_bytes + size > max_bytes)
        ):
            if corr is not None:
                rejected.append(corr)
            st.counters.rejected += 1
            continue
        if ttl is None:
            expiry = None if qttl is None else now + qttl
        else:
            expiry = now + (ttl if qttl is None or ttl < qttl else qttl)
        append((base | pos, size, expiry, 0, 0, None))
        total += size
        n += 1
        if corr is not None:
            accepted.append(corr)
    if n:
        st.ready_bytes += total
        st.live[index] = n
        st.live_order.append(index)
        counters = st.counters
        counters.enqueued += n
        counters.confirmed += len(accepted)
    if accepted:
        ctx.out.append(Confirm(tuple(accepted), _ACCEPTED))
    if rejected:
        ctx.out.append(Confirm(tuple(rejected), _REJECTED))
    if st.prios:
        _dispatch(st, ctx, base)
    if cfg.limited and cfg.overflow == "drop-head":
        _enforce_drop_head(st, ctx)


def _attach(st: QuorumState, cmd: c.Attach, index: int, ctx: _Ctx) -> None:
    if cmd.now_ms > st.clock:
        st.clock = cmd.now_ms
    cid = cmd.consumer_id
    if cid in st.consumers:
        return
    st.consumers[cid] = ConsumerState(cid, cmd.priority, cmd.node, cmd.delivery_count & _MASK, 0, bool(cmd.settled))
    if st.config.single_active_consumer and st.sac_active is None:
        st.sac_active = cid


def _detach(st: QuorumState, cmd: c.Detach, index: int, ctx: _Ctx) -> None:
    cs = st.consumers.get(cmd.consumer_id)
    if cs is None:
        return
    _remove_consumer(st, cs)
    _dispatch(st, ctx)
    _enforce_drop_head(st, ctx)


def _down(st: QuorumState, cmd: c.DownConsumersOnNode, index: int, ctx: _Ctx) -> None:
    gone = [cs for cs in st.consumers.values() if cs.node == cmd.node]
    if not gone:
        return
    for cs in gone:
        _remove_consumer(st, cs)
    _dispatch(st, ctx)
    _enforce_drop_head(st, ctx)


def _credit(st: QuorumState, cmd: c.Credit, index: int, ctx: _Ctx) -> None:
    cs = st.consumers.get(cmd.consumer_id)
    if cs is None:
        return
    # [2.6.7] The receiver may send this FLOW before it has seen our latest
    # transfers: they count against the credit it grants now.
    lag = 0 if cmd.delivery_count is None else serial.diff(cs.delivery_count, cmd.delivery_count & _MASK)
    credit = cmd.credit - lag
    cs.credit = 0 if credit <= 0 else min(credit, MAX_CREDIT)
    if cs.credit > 0:
        if not cs.in_service and _eligible(st, cs):
            _activate(st, cs)
            _dispatch(st, ctx)
    elif cs.in_service:
        _deactivate(st, cs)
    if cmd.drain and cs.credit > 0:
        cs.delivery_count = (cs.delivery_count + cs.credit) & _MASK
        cs.credit = 0
        _deactivate(st, cs)
    if cmd.drain or cmd.echo:
        reply = CreditReply(cs.consumer_id, cs.delivery_count, cs.credit, st.ready_count, bool(cmd.drain))
        if ctx.replies is None:
            ctx.replies = [reply]
        else:
            ctx.replies.append(reply)


def _settle(st: QuorumState, cmd: c.Settle, index: int, ctx: _Ctx) -> None:
    cs = st.consumers.get(cmd.consumer_id)
    if cs is None:
        return
    pop = cs.checked.pop
    live = st.live
    n = size = 0
    for mid in cmd.msg_ids:
        msg = pop(mid, None)
        if msg is None:
            continue
        n += 1
        size += msg[1]
        idx = mid >> c.POS_BITS
        left = live[idx] - 1
        if left:
            live[idx] = left
        else:
            del live[idx]
            order = st.live_order
            if order[0] == idx:
                order.popleft()
                while order and order[0] not in live:
                    order.popleft()
            elif len(order) > 2 * len(live) + 64:
                _compact_live_order(st)
    st.checked_count -= n
    st.checked_bytes -= size
    st.counters.acknowledged += n


def _return(st: QuorumState, cmd: c.Return, index: int, ctx: _Ctx) -> None:
    cs = st.consumers.get(cmd.consumer_id)
    if cs is None:
        return
    pop = cs.checked.pop
    n = size = 0
    for mid in cmd.msg_ids:
        msg = pop(mid, None)
        if msg is None:
            continue
        n += 1
        size += msg[M_SIZE]
        _requeue(st, msg, 0, msg[M_ANN])
    if n:
        st.checked_count -= n
        st.checked_bytes -= size
        st.counters.returned += n
        _dispatch(st, ctx)
        _enforce_drop_head(st, ctx)


def _discard(st: QuorumState, cmd: c.Discard, index: int, ctx: _Ctx) -> None:
    cs = st.consumers.get(cmd.consumer_id)
    if cs is None:
        return
    pop = cs.checked.pop
    for mid in cmd.msg_ids:
        msg = pop(mid, None)
        if msg is None:
            continue
        st.checked_count -= 1
        st.checked_bytes -= msg[M_SIZE]
        _kill(st, msg, REASON_REJECTED, ctx)


def _modify(st: QuorumState, cmd: c.Modify, index: int, ctx: _Ctx) -> None:
    cs = st.consumers.get(cmd.consumer_id)
    if cs is None:
        return
    pop = cs.checked.pop
    failed = 1 if cmd.delivery_failed else 0
    limit = st.config.delivery_limit
    extra = cmd.annotations
    returned = 0
    for mid in cmd.msg_ids:
        msg = pop(mid, None)
        if msg is None:
            continue
        st.checked_count -= 1
        st.checked_bytes -= msg[M_SIZE]
        ann = msg[M_ANN]
        if extra:
            ann = {**ann, **extra} if ann else dict(extra)
        mid, size, expiry, dc, acq, _ = msg
        dc += failed
        if cmd.undeliverable_here:
            _kill(st, (mid, size, expiry, dc, acq + 1, ann), REASON_REJECTED, ctx)
        elif limit is not None and dc > limit:
            _kill(st, (mid, size, expiry, dc, acq + 1, ann), REASON_DELIVERY_LIMIT, ctx)
        else:
            heappush(st.returned, (mid, size, expiry, dc, acq + 1, ann))
            st.ready_bytes += size
            returned += 1
    if returned:
        st.counters.returned += returned
        _dispatch(st, ctx)
        _enforce_drop_head(st, ctx)


def _tick(st: QuorumState, cmd: c.Tick, index: int, ctx: _Ctx) -> None:
    now = cmd.now_ms
    if now > st.clock:
        st.clock = now
    now = st.clock
    while True:
        head = _head(st)
        if head is None or head[2] is None or head[2] > now:
            return
        _kill(st, _pop_head(st), REASON_EXPIRED, ctx)


def _purge(st: QuorumState, cmd: c.Purge, index: int, ctx: _Ctx) -> None:
    count = st.ready_count
    for msg in st.returned:
        _forget(st, msg[M_ID])
    for msg in st.ready:
        _forget(st, msg[M_ID])
    st.returned = []
    st.ready = deque()
    st.ready_bytes = 0
    st.counters.dropped += count
    st.counters.purged += count
    ctx.out.append(Purged(count))


def _dlx_settled(st: QuorumState, cmd: c.DeadLetterSettled, index: int, ctx: _Ctx) -> None:
    dlx = st.dlx
    n = 0
    for mid in cmd.msg_ids:
        entry = dlx.pop(mid, None)
        if entry is None:
            continue
        n += 1
        st.dlx_bytes -= entry[0][M_SIZE]
        _forget(st, mid)
    st.counters.dead_lettered += n


_HANDLERS = {
    c.Enqueue: _enqueue,
    c.Attach: _attach,
    c.Detach: _detach,
    c.Credit: _credit,
    c.Settle: _settle,
    c.Return: _return,
    c.Discard: _discard,
    c.Modify: _modify,
    c.Tick: _tick,
    c.Purge: _purge,
    c.DownConsumersOnNode: _down,
    c.DeadLetterSettled: _dlx_settled,
}


# ---------------------------------------------------------------- raft/group.py adapter


class QuorumMachine:
    """The raft/group.py Machine around `apply`: records in, effects out.
    `apply` returns the effects; the node's queue process acts on them
    (on the leader) after the call."""

    def __init__(self, config: QuorumConfig | dict | None = None) -> None:
        self.state = new_state(config)

    def apply(self, record: Any, index: int) -> list:
        self.state, effects = apply(record, self.state, index)
        return effects

    def snapshot(self) -> bytes:
        from .snapshot import snapshot_bytes

        return snapshot_bytes(self.state)

    def restore(self, data: bytes) -> None:
        from .snapshot import restore

        self.state = restore(data)
