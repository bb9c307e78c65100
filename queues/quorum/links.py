"""The consumer links attached to a quorum queue through this replica's node.

Every replica applies every command, and each sends the deliveries the
machine decides for the links attached on its own node, from its own copy of
the bodies (no hop through the leader). A consumer id carries the node's
incarnation, so the consumers of an earlier life of this node, and of a node
seen down, are recognisable and detached. Each link's deliveries pass its
CreditGate (credit_lease.py), which holds those beyond the client's credit
when the replica leased it more.
"""

from __future__ import annotations

import itertools
from typing import Any

from queues.base import Consumer, consumer_timeout_text

from .bodies import BodyStore
from .commands import Detach
from .credit_lease import CreditGate
from .host import QuorumHost
from .proposals import Proposer

__all__ = ["LocalLinks"]

# Consumer ids are numbered across every replica of this node's life, as publisher ids are
# (publishing.py): a member taken off a queue and added back starts a new replica in the same
# life, and the group may still hold the earlier replica's consumers (the leader detaches them
# soon after). An Attach of an id the machine knows is ignored, so a new link under an old id
# would inherit what the old one held and never received.
_CONSUMER_IDS = itertools.count(1)


class LocalLinks:
    def __init__(self, queue: Any, bodies: BodyStore, proposer: Proposer, qh: QuorumHost) -> None:
        self._queue = queue  # the QuorumQueue: what links are handed, and its machine's state
        self._bodies = bodies
        self._proposer = proposer
        self._qh = qh  # its incarnation names this node's consumers
        self.consumers: dict[str, Consumer] = {}  # consumer id -> local link
        self._ids: dict[Any, str] = {}  # local link -> consumer id
        self._sent: dict[str, set[int]] = {}  # consumer id -> ids handed to its link, not yet settled
        self.gates: dict[str, CreditGate] = {}  # consumer id -> what its client's credit lets through

    def add(self, consumer: Consumer) -> str:
        cid = f"{self._qh.incarnation}/{next(_CONSUMER_IDS)}"
        self.consumers[cid] = consumer
        self._ids[consumer] = cid
        self.gates[cid] = CreditGate()
        return cid

    def remove(self, consumer: Consumer) -> str | None:
        cid = self._ids.pop(consumer, None)
        if cid is not None:
            self.consumers.pop(cid, None)
            self.gates.pop(cid, None)  # what it held goes back with the Detach
        return cid

    def id_of(self, consumer: Consumer) -> str | None:
        return self._ids.get(consumer)

    def timed_out(self, cid: str, timeout: int) -> None:
        """The machine took back what the consumer held past the timeout: its link ends
        (its Detach returns the rest)."""
        consumer = self.consumers.get(cid)
        if consumer is not None:
            consumer.timed_out(consumer_timeout_text(self._queue, timeout))

    def close(self) -> None:
        """The queue was deleted: every link hears it."""
        for consumer in list(self.consumers.values()):
            consumer.queue_deleted()
        self.consumers.clear()
        self._ids.clear()
        self.gates.clear()

    def send(self, cid: str, deliveries: list[tuple]) -> None:
        """The machine delivers (msg_id, delivery_count, redelivered, annotations) to the
        local link `cid`: what its client's credit allows goes now, the rest is held."""
        gate = self.gates.get(cid)
        if gate is not None:
            deliveries = gate.admit(deliveries)
        if deliveries:
            self._transmit(cid, deliveries)

    def grant(self, cid: str, delivery_count: int | None, credit: int, lease: int) -> None:
        """The client of link `cid` granted credit: what was held for it goes now."""
        gate = self.gates.get(cid)
        if gate is not None:
            released = gate.grant(delivery_count, credit, lease)
            if released:
                self._transmit(cid, released)

    def credit_reply(self, cid: str, delivery_count: int, credit: int, available: int, drain: bool) -> None:
        """The machine's credit reply to link `cid`, in the client's terms (what is held here
        counts in the machine's delivery-count and credit, not in the link's)."""
        consumer = self.consumers.get(cid)
        if consumer is None:
            return
        gate = self.gates.get(cid)
        if gate is not None:
            delivery_count, credit, available = gate.reply(delivery_count, credit, available, drain)
        consumer.credit_reply(delivery_count, credit, available, drain)

    def _transmit(self, cid: str, deliveries: list[tuple]) -> None:
        """Hand the deliveries to the link. A body this replica lacks (it installed a
        snapshot instead of the log that carried it) is fetched from another member first."""
        consumer = self.consumers.get(cid)
        if consumer is None:
            return
        sent = self._sent.setdefault(cid, set())
        for mid, delivery_count, redelivered, merged in deliveries:
            message = self._bodies.message(mid, delivery_count, redelivered, merged)
            if message is None:
                self._bodies.await_body(mid, (cid, delivery_count, redelivered, merged))
            else:
                consumer.deliver(self._queue, message)
                sent.add(mid)

    def body_arrived(self, mid: int, delivery: tuple) -> None:
        cid, delivery_count, redelivered, merged = delivery
        cs = self._queue.state.consumers.get(cid)
        if cs is not None and mid in cs.checked:  # still its to deliver (its credit was counted)
            self._transmit(cid, [(mid, delivery_count, redelivered, merged)])

    def forget_settled(self, record: Any) -> None:
        sent = self._sent.get(getattr(record, "consumer_id", None))
        if sent is not None:
            if isinstance(record, Detach):
                self._sent.pop(record.consumer_id, None)
                self.gates.pop(record.consumer_id, None)
            else:
                sent.difference_update(getattr(record, "msg_ids", ()))

    def resync(self) -> None:
        """After a snapshot replaced the state: the log entries it stood for were never
        applied here, so their deliveries to this node's links never happened. Send what
        the state says each local link holds and it was not sent (marked redelivered:
        the link may have had it before); end the links the state no longer knows."""
        state = self._queue.state
        for cid in list(self.consumers):
            cs = state.consumers.get(cid)
            if cs is None:
                continue
            sent = self._sent.setdefault(cid, set())
            sent.intersection_update(cs.checked)
            gate = self.gates.get(cid)
            if gate is not None:
                gate.clear()  # what it held is among the checked-out messages not sent: admitted again
            self.send(cid, [(mid, m[3], True, m[5]) for mid, m in cs.checked.items() if mid not in sent])
        self.end_unknown()

    def end_unknown(self) -> None:
        """Consumers the state no longer has (their node was declared down) end their links."""
        state = self._queue.state
        for cid in [c for c in self.consumers if c not in state.consumers]:
            consumer = self.consumers.pop(cid)
            self._ids.pop(consumer, None)
            self.gates.pop(cid, None)
            # the last word of its pipeline: an Attach or Credit still being retried must not revive it
            self._proposer.for_consumer(cid, Detach(cid))
            end = getattr(consumer, "queue_unavailable", None)
            if end is not None:
                end(f"quorum queue '{self._queue.name}' cancelled this consumer (its node was seen down)")

    def forget_ghosts(self) -> None:
        """Consumers of this node's incarnation the state has but no link here
        (an Attach retried after its link ended): detach them."""
        me = self._qh.incarnation
        for cid, cs in list(self._queue.state.consumers.items()):
            if cs.node != me or cid in self.consumers:
                continue  # a link is in `consumers` from before its Attach is proposed: this one is gone
            if not self._proposer.detaching(cid):
                self._proposer.for_consumer(cid, Detach(cid))
