"""The quorum queue's state machine, in the style of RabbitMQ's rabbit_fifo.

    apply(command, state, index) -> (state, effects)

Pure: no I/O, no clock (time comes in commands as `now_ms`), no randomness;
the same commands applied in the same order to equal states give equal
states and equal effects on every member. For speed `apply` UPDATES `state`
IN PLACE and returns it: the queue's Raft group owns the only copy (take a
snapshot, `snapshot_bytes`, for another). `index` is the command's Raft log
index; indexes must increase (message ids are built from them).

Semantics (RabbitMQ 4 quorum queues, as Warren re-creates them):

- Publish: the host's batch with its bodies (the bodies stay with the
  host, told by StoreBodies to keep them): enqueued as Enqueue does, once
  per (publisher, seq) however often it is proposed (dedup.py).
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
  without TTL at the head shields the ones behind it, as in RabbitMQ);
  TickTimeouts also stamps the checked-out messages, returns those held past
  the consumer timeout and times their consumers out (timeouts.py).
- The clock: the largest time any command carried, until the first TickClock;
  from then on the time of the last Tick, the leader's (`_advance`).
- Credit (API v2): credit = receiver's delivery-count + link credit - ours
  (RFC 1982), clamped at 0; deliveries follow; drain then spends the credit
  left by advancing delivery-count; echo or drain gets a CreditReply.

Cost: O(1) per message for enqueue, delivery and settle; O(log n) to
return a message; O(consumers at one priority) to change a consumer's credit
between zero and non-zero.
"""

from __future__ import annotations

from dataclasses import fields
from heapq import heappush
from typing import Any

from amqp import serial

from . import commands as c
from . import dedup
from .dispatch import (
    Ctx,
    activate,
    deactivate,
    dispatch,
    eligible,
    enforce_drop_head,
    forget,
    head,
    kill,
    pop_head,
    release_run,
    remove_consumer,
    requeue,
)
from .effects import (
    REASON_DELIVERY_LIMIT,
    REASON_EXPIRED,
    REASON_REJECTED,
    Confirm,
    CreditReply,
    DeadLetter,
    Dropped,
    Outcome,
    Purged,
    StoreBodies,
)
from .priority import is_high
from .queries import checked_out, consumer_link, dead_letter_pending, next_expiry, overview, release_cursor
from .state import M_ANN, M_ID, M_SIZE, ConsumerState, QuorumConfig, QuorumState, new_state
from .timeouts import stamp, time_out

__all__ = [
    "MAX_CREDIT",
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
_ACCEPTED = Outcome.ACCEPTED
_REJECTED = Outcome.REJECTED


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
    ctx = Ctx()
    handler(state, command, index, ctx)
    out = ctx.out
    if ctx.dead:
        for reason, msgs in ctx.dead.items():
            anns = tuple(m[M_ANN] for m in msgs)
            if anns.count(None) == len(anns):
                anns = ()
            out.append(DeadLetter(tuple(m[M_ID] for m in msgs), reason, state.config.at_least_once, anns))
    if ctx.dropped:
        out.extend(Dropped(reason, n) for reason, n in ctx.dropped.items())
    if ctx.replies:
        out.extend(ctx.replies)
    return state, out


# ---------------------------------------------------------------- handlers


def _enqueue(st: QuorumState, cmd: c.Enqueue, index: int, ctx: Ctx) -> None:
    _enqueue_batch(st, cmd.messages, cmd.now_ms, index, ctx)


def _publish(st: QuorumState, cmd: c.Publish, index: int, ctx: Ctx) -> None:
    again = dedup.seen(st, cmd.publisher, cmd.seq)
    if again is not None:  # proposed twice (a leader change): applied the first time
        ctx.out.extend(again)
        return
    msgs = cmd.messages
    ctx.out.append(StoreBodies(index, len(msgs)))
    if isinstance(cmd, c.PublishPrioritised):  # version 2 or 3
        batch = [(len(m[c.P_PAYLOAD]), m[c.P_TTL], m[c.P_CORRELATION], is_high(m[c.P_PAYLOAD])) for m in msgs]
    else:
        batch = [(len(m[c.P_PAYLOAD]), m[c.P_TTL], m[c.P_CORRELATION]) for m in msgs]
    _enqueue_batch(st, batch, cmd.now_ms, index, ctx)
    dedup.remember(st, cmd.publisher, cmd.seq, ctx.out)


def _enqueue_batch(st: QuorumState, msgs: Any, now: int, index: int, ctx: Ctx) -> None:
    """`msgs`: (size, ttl, correlation[, high priority]) each, in publish order."""
    _advance(st, now)
    if len(msgs) > c.MAX_BATCH:
        raise ValueError(f"an Enqueue holds at most {c.MAX_BATCH} messages")
    cfg = st.config
    qttl = cfg.message_ttl
    base = index << c.POS_BITS
    ready = st.ready
    add_run = ready.add_run
    accepted: list = []
    rejected: list = []
    reject = cfg.overflow == "reject-publish" and cfg.limited
    max_len, max_bytes = cfg.max_length, cfg.max_length_bytes
    held = st.ready_count + len(st.dlx)  # what x-max-length counts, before this batch
    n = 0
    total = 0
    pos = -1
    # accepted messages go to the ready list a run at a time: consecutive
    # positions with the same expiry (the whole batch, unless some are
    # rejected or carry their own TTL)
    run_start = 0
    run_expiry: int | None = None
    run_sizes: list[int] = []
    run_high = high = False
    for msg in msgs:
        size, ttl, corr = msg[0], msg[1], msg[2]
        high = len(msg) > 3 and msg[3]
        pos += 1
        if reject and (
            (max_len is not None and held + n + 1 > max_len)
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
        if expiry != run_expiry or run_start + len(run_sizes) != pos or high != run_high:
            if run_sizes:
                (st.ready_high.add_run if run_high else add_run)(base | run_start, run_sizes, run_expiry)
            run_start, run_expiry, run_sizes, run_high = pos, expiry, [], high
        run_sizes.append(size)
        total += size
        n += 1
        if corr is not None:
            accepted.append(corr)
    if run_sizes:
        (st.ready_high.add_run if run_high else add_run)(base | run_start, run_sizes, run_expiry)
    if n:
        st.ready_bytes += total
        st.live.add(index, n)
        counters = st.counters
        counters.enqueued += n
        counters.confirmed += len(accepted)
    if accepted:
        ctx.out.append(Confirm(tuple(accepted), _ACCEPTED))
    if rejected:
        ctx.out.append(Confirm(tuple(rejected), _REJECTED))
    if st.prios:
        dispatch(st, ctx, base)
    if cfg.limited and cfg.overflow == "drop-head":
        enforce_drop_head(st, ctx)


def _advance(st: QuorumState, now: int) -> None:
    """A publishing or attaching node's time: the clock's, unless ticks keep it."""
    if now > st.clock and not st.tick_clock:
        st.clock = now


def _attach(st: QuorumState, cmd: c.Attach, index: int, ctx: Ctx) -> None:
    _advance(st, cmd.now_ms)
    cid = cmd.consumer_id
    if cid in st.consumers:
        return
    st.consumers[cid] = ConsumerState(cid, cmd.priority, cmd.node, cmd.delivery_count & _MASK, 0, bool(cmd.settled))
    if st.config.single_active_consumer and st.sac_active is None:
        st.sac_active = cid


def _detach(st: QuorumState, cmd: c.Detach, index: int, ctx: Ctx) -> None:
    cs = st.consumers.get(cmd.consumer_id)
    if cs is None:
        return
    remove_consumer(st, cs)
    dispatch(st, ctx)
    enforce_drop_head(st, ctx)


def _down(st: QuorumState, cmd: c.DownConsumersOnNode, index: int, ctx: Ctx) -> None:
    gone = [cs for cs in st.consumers.values() if cs.node == cmd.node]
    if not gone:
        return
    for cs in gone:
        remove_consumer(st, cs)
    dispatch(st, ctx)
    enforce_drop_head(st, ctx)


def _credit(st: QuorumState, cmd: c.Credit, index: int, ctx: Ctx) -> None:
    cs = st.consumers.get(cmd.consumer_id)
    if cs is None:
        return
    # [2.6.7] The receiver may send this FLOW before it has seen our latest
    # transfers: they count against the credit it grants now.
    lag = 0 if cmd.delivery_count is None else serial.diff(cs.delivery_count, cmd.delivery_count & _MASK)
    credit = cmd.credit - lag
    cs.credit = 0 if credit <= 0 else min(credit, MAX_CREDIT)
    if cs.credit > 0:
        if not cs.in_service and eligible(st, cs):
            activate(st, cs)
            dispatch(st, ctx)
    elif cs.in_service:
        deactivate(st, cs)
    if cmd.drain and cs.credit > 0:
        cs.delivery_count = (cs.delivery_count + cs.credit) & _MASK
        cs.credit = 0
        deactivate(st, cs)
    if cmd.drain or cmd.echo:
        reply = CreditReply(cs.consumer_id, cs.delivery_count, cs.credit, st.ready_count, bool(cmd.drain))
        if ctx.replies is None:
            ctx.replies = [reply]
        else:
            ctx.replies.append(reply)


def _settle(st: QuorumState, cmd: c.Settle, index: int, ctx: Ctx) -> None:
    cs = st.consumers.get(cmd.consumer_id)
    if cs is None:
        return
    pop = cs.checked.pop
    unstamp = cs.since.pop
    release = st.live.release
    n = size = 0
    run_idx = -1  # settlements come in runs of one raft index: released a run at a time
    run = 0
    for mid in cmd.msg_ids:
        msg = pop(mid, None)
        if msg is None:
            continue
        unstamp(mid, None)
        n += 1
        size += msg[1]
        idx = mid >> c.POS_BITS
        if idx == run_idx:
            run += 1
            continue
        if run:
            release(run_idx, run)
        run_idx, run = idx, 1
    if run:
        release(run_idx, run)
    st.checked_count -= n
    st.checked_bytes -= size
    st.counters.acknowledged += n


def _return(st: QuorumState, cmd: c.Return, index: int, ctx: Ctx) -> None:
    cs = st.consumers.get(cmd.consumer_id)
    if cs is None:
        return
    pop = cs.checked.pop
    n = size = 0
    for mid in cmd.msg_ids:
        msg = pop(mid, None)
        if msg is None:
            continue
        cs.since.pop(mid, None)
        n += 1
        size += msg[M_SIZE]
        requeue(st, msg, 0, msg[M_ANN])
    if n:
        st.checked_count -= n
        st.checked_bytes -= size
        st.counters.returned += n
        dispatch(st, ctx)
        enforce_drop_head(st, ctx)


def _discard(st: QuorumState, cmd: c.Discard, index: int, ctx: Ctx) -> None:
    cs = st.consumers.get(cmd.consumer_id)
    if cs is None:
        return
    pop = cs.checked.pop
    for mid in cmd.msg_ids:
        msg = pop(mid, None)
        if msg is None:
            continue
        cs.since.pop(mid, None)
        st.checked_count -= 1
        st.checked_bytes -= msg[M_SIZE]
        kill(st, msg, REASON_REJECTED, ctx)


def _modify(st: QuorumState, cmd: c.Modify, index: int, ctx: Ctx) -> None:
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
        cs.since.pop(mid, None)
        st.checked_count -= 1
        st.checked_bytes -= msg[M_SIZE]
        ann = msg[M_ANN]
        if extra:
            ann = {**ann, **extra} if ann else dict(extra)
        mid, size, expiry, dc, acq, _ = msg
        dc += failed
        if cmd.undeliverable_here:
            kill(st, (mid, size, expiry, dc, acq + 1, ann), REASON_REJECTED, ctx)
        elif limit is not None and dc > limit:
            kill(st, (mid, size, expiry, dc, acq + 1, ann), REASON_DELIVERY_LIMIT, ctx)
        else:
            heappush(st.returned, (mid, size, expiry, dc, acq + 1, ann))
            st.ready_bytes += size
            returned += 1
    if returned:
        st.counters.returned += returned
        dispatch(st, ctx)
        enforce_drop_head(st, ctx)


def _tick(st: QuorumState, cmd: c.Tick, index: int, ctx: Ctx) -> None:
    now = cmd.now_ms
    if isinstance(cmd, c.TickClock):
        st.tick_clock = True
    if now > st.clock or st.tick_clock:  # the leader's time, even behind a clock once ahead
        st.clock = now
    now = st.clock
    if isinstance(cmd, c.TickTimeouts):  # version 1 stamps nothing: its state stays a 0.2 machine's
        stamp(st, now)
        if cmd.consumer_timeout > 0:
            time_out(st, now, cmd.consumer_timeout, ctx)
    while True:
        first = head(st)
        if first is None or first[2] is None or first[2] > now:
            return
        kill(st, pop_head(st), REASON_EXPIRED, ctx)


def _purge(st: QuorumState, cmd: c.Purge, index: int, ctx: Ctx) -> None:
    count = st.ready_count
    for msg in st.returned:
        forget(st, msg[M_ID])
    for ready in (st.ready, st.ready_high):
        for first, n, _ in ready.runs():
            release_run(st, first, n)
        ready.clear()
    st.returned = []
    st.prio_turn = 0
    st.ready_bytes = 0
    st.counters.dropped += count
    st.counters.purged += count
    ctx.out.append(Purged(count))


def _dlx_settled(st: QuorumState, cmd: c.DeadLetterSettled, index: int, ctx: Ctx) -> None:
    dlx = st.dlx
    n = 0
    for mid in cmd.msg_ids:
        entry = dlx.pop(mid, None)
        if entry is None:
            continue
        n += 1
        st.dlx_bytes -= entry[0][M_SIZE]
        forget(st, mid)
    st.counters.dead_lettered += n


_CONFIG_FIELDS = fields(QuorumConfig)


def _set_config(st: QuorumState, cmd: c.SetConfig, index: int, ctx: Ctx) -> None:
    if len(cmd.config) != len(_CONFIG_FIELDS):
        return  # a layout this machine does not know: no change (a newer one would be a new version)
    st.config = QuorumConfig(*cmd.config)
    enforce_drop_head(st, ctx)


_HANDLERS = {
    c.Enqueue: _enqueue,
    c.Publish: _publish,
    c.PublishPrioritised: _publish,
    c.PublishBatch: _publish,
    c.Attach: _attach,
    c.Detach: _detach,
    c.Credit: _credit,
    c.Settle: _settle,
    c.Return: _return,
    c.Discard: _discard,
    c.Modify: _modify,
    c.Tick: _tick,
    c.TickTimeouts: _tick,
    c.TickClock: _tick,
    c.Purge: _purge,
    c.DownConsumersOnNode: _down,
    c.DeadLetterSettled: _dlx_settled,
    c.SetConfig: _set_config,
}
