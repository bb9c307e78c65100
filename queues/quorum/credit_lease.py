"""A consumer's credit lease: the replica of a consumer's node holds a few
messages ahead of the client's credit, so that a FLOW is answered at once.

Every grant of credit is a `Credit` command through the queue's log. On a
follower that is a round trip behind the publish stream (forward to the
leader, append, both fsyncs, commit, apply back here): 18-45 ms under load
(docs/benchmarks.md, "the follower consumer's credit"). A client that tops
its credit up by ~500 at a time then receives ~500 messages per round trip,
and ready messages pile up on its replica.

So the replica proposes the client's credit plus a lease of up to as much
again (`lease`, `quorum_consumer_lease`): the machine checks out up to
`delivery-count + credit + lease` messages to the consumer, and this gate
sends the client only what its own credit allows, holding the rest in
delivery order. The client's next FLOW is served from what is held at once,
while its Credit goes through the log. The machine stays what it was (pure,
the same on every replica: the lease is part of the Credit command's
credit), so no feature flag is needed.

What a held message is, to the rest of the queue: checked out to that
consumer, not yet sent. It counts as unacknowledged, is not purged and does
not expire, and goes back to the queue when the consumer detaches (as
unsettled messages do, so it is then marked redelivered). A strict client
is never sent more than it granted: the gate counts every transfer
(`sent`, the link's delivery-count) against the client's limit
(its delivery-count + link credit). A drain leases nothing: the machine
drains to the client's own limit, and the gate reports the client's
delivery-count in the credit reply, not the machine's. Pre-settled
consumers lease nothing either (a held message would be lost with the
link). Until the first lease a gate passes everything through, as before.
"""

from __future__ import annotations

from collections import deque

from amqp import serial

__all__ = ["CreditGate"]


class CreditGate:
    """One consumer link's side of the lease, on the replica of its node."""

    __slots__ = ("sent", "limit", "held")

    def __init__(self) -> None:
        self.sent = 0  # transfers handed to the link: its delivery-count (the Attach says 0)
        self.limit: int | None = None  # the client's delivery-count + credit; None: no lease yet, pass all
        self.held: deque[tuple] = deque()  # deliveries the machine decided beyond the client's credit

    def admit(self, deliveries: list[tuple]) -> list[tuple]:
        """Of the machine's deliveries (in its order), those the client's credit
        allows now; the others are held, behind those held already."""
        limit = self.limit
        if limit is None:
            self.sent = serial.add(self.sent, len(deliveries))
            return deliveries
        held = self.held
        if held:
            held.extend(deliveries)
            return []
        room = serial.diff(limit, self.sent)
        if room >= len(deliveries):
            self.sent = serial.add(self.sent, len(deliveries))
            return deliveries
        room = max(0, room)
        held.extend(deliveries[room:])
        self.sent = serial.add(self.sent, room)
        return deliveries[:room]

    def grant(self, delivery_count: int | None, credit: int, lease: int) -> list[tuple]:
        """The client's FLOW: its new limit; returns the held deliveries it lets
        through now. `lease` > 0 starts holding (pass-through ends for good)."""
        if self.limit is None and lease <= 0:
            return []
        base = self.sent if delivery_count is None else delivery_count
        self.limit = serial.add(base, credit)
        return self._release()

    def _release(self) -> list[tuple]:
        held = self.held
        room = serial.diff(self.limit, self.sent) if self.limit is not None else len(held)
        if room <= 0 or not held:
            return []
        out = [held.popleft() for _ in range(min(room, len(held)))]
        self.sent = serial.add(self.sent, len(out))
        return out

    def reply(self, delivery_count: int, credit: int, available: int, drain: bool) -> tuple[int, int, int]:
        """The machine's credit reply as the client must see it: the link's own
        delivery-count and credit (the machine's include what is held here)."""
        if self.limit is None:
            return delivery_count, credit, available
        room = serial.diff(self.limit, self.sent)
        if drain and room > 0 and not self.held:
            # the machine drained: no message was left for the client's credit
            self.sent = self.limit
            room = 0
        return self.sent, max(0, room), available + len(self.held)

    def clear(self) -> list[tuple]:
        """Forget what is held (a snapshot replaced the state); returns it."""
        held = list(self.held)
        self.held.clear()
        return held
