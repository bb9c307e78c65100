"""Message priority in a quorum queue, as RabbitMQ 4 has it: two levels.

A message whose header priority is above 4 is high priority; any other
(0..4, or none) is normal. Returned messages go first whatever their
priority (as RabbitMQ's returns do); then, while both levels hold ready
messages, the queue hands out two high ones for each normal one, so normal
messages are never starved. The state keeps the high messages in their own
ready list (`ready_high`) and the count of high deliveries in a row
(`prio_turn`), both in the snapshot.

Only the version-2 Publish record (commands.PublishPrioritised) reads
priorities, so members agree on them whatever build each runs.

The fast dispatch (dispatch.py) serves runs of normal messages; while high
messages wait, this one serves one message at a time.
"""

from __future__ import annotations

from heapq import heappop
from typing import Any

from queues.priority import header_priority

from . import dispatch as moves
from .effects import REASON_EXPIRED, Deliver, DeliveredMessage
from .state import QuorumState

__all__ = ["HIGH_ABOVE", "HIGH_RUN", "dispatch_prioritised", "is_high"]

HIGH_ABOVE = 4  # priorities above this are high
HIGH_RUN = 2  # high messages handed out for each normal one while both wait


def is_high(payload: bytes) -> bool:
    p = header_priority(payload)
    return p is not None and p > HIGH_ABOVE


def dispatch_prioritised(st: QuorumState, ctx: Any, fresh_from: int) -> None:
    """Hands messages to consumers in service while high-priority ones wait."""
    prios, service, clock = st.prios, st.service, st.clock
    returned, high, normal = st.returned, st.ready_high, st.ready
    batches: dict[Any, list] = {}
    delivered = redelivered = acked = 0
    while prios and high:
        if returned:
            msg = heappop(returned)
        elif normal and st.prio_turn >= HIGH_RUN:
            msg = normal.popleft()
            st.prio_turn = 0
        else:
            msg = high.popleft()
            st.prio_turn = st.prio_turn + 1 if normal else 0
        mid, size, expiry, dc, acq, ann = msg
        st.ready_bytes -= size
        if expiry is not None and expiry <= clock and mid < fresh_from:
            moves.kill(st, msg, REASON_EXPIRED, ctx)
            continue
        prio = prios[0]
        level = service[prio]
        cs = level[0]
        batch = batches.get(cs.consumer_id)
        if batch is None:
            batch = batches[cs.consumer_id] = []
        batch.append(DeliveredMessage(mid, dc, not acq, ann))
        if acq:
            redelivered += 1
        if cs.settled:
            moves.forget(st, mid)
            acked += 1
        else:
            cs.checked[mid] = msg
            st.checked_count += 1
            st.checked_bytes += size
            st.unstamped = True
        delivered += 1
        moves.spend_credit(service, prios, prio, level, cs, 1)
    counters = st.counters
    counters.delivered += delivered
    counters.redelivered += redelivered
    counters.acknowledged += acked
    for cid, batch in batches.items():
        ctx.out.append(Deliver(cid, tuple(batch)))
