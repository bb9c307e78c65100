"""The reference model's bookkeeping behind test_model.py's QuorumModel: where
each message is, what the machine's effects must match, and what vanished."""

from __future__ import annotations

from qq_helpers import conservation_holds

from amqp import serial
from queues.quorum import (
    Confirm,
    CreditReply,
    DeadLetter,
    Deliver,
    Dropped,
    Enqueue,
    Purge,
    Purged,
    apply,
    consumer_link,
    release_cursor,
    split_msg_id,
)

DLX = {"x-dead-letter-exchange": "dlx"}
CONFIGS = [
    {},
    DLX,
    {**DLX, "x-delivery-limit": 1, "x-message-ttl": 100},
    {**DLX, "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish", "x-max-length": 6},
    {**DLX, "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish",
     "x-max-length-bytes": 60, "x-delivery-limit": 0, "x-message-ttl": 150},
    {"x-max-length": 4, "x-delivery-limit": 2},
    {**DLX, "x-max-length-bytes": 50, "x-message-ttl": 80},
    {"x-overflow": "reject-publish", "x-max-length": 3, "x-max-length-bytes": 40},
    {"x-single-active-consumer": True, "x-delivery-limit": 1},
    {**DLX, "x-single-active-consumer": True, "x-max-length": 5, "x-message-ttl": 200},
]  # fmt: skip
CONSUMERS = ["a", "b", "c", ("d", 1)]
NODES = ["n1", "n2"]
MASK = serial.MASK


class M:
    __slots__ = ("size", "expiry", "failed", "acq", "ann", "status", "holder")

    def __init__(self, size: int, expiry: int | None) -> None:
        self.size = size
        self.expiry = expiry
        self.failed = 0
        self.acq = 0
        self.ann: dict | None = None
        self.status = "ready"  # ready | out | limbo | dlx | acked | dead | dropped
        self.holder = None


class C:
    __slots__ = ("prio", "dc", "credit", "settled", "node")

    def __init__(self, prio: int, dc: int, settled: bool, node: str) -> None:
        self.prio = prio
        self.dc = dc
        self.credit = 0
        self.settled = settled
        self.node = node


class ModelBookkeeping:
    """Queries and checks on the model's state; the rules in test_model.py drive it."""

    def ids(self, status: str, holder=None) -> list[int]:
        return sorted(m for m, x in self.msgs.items() if x.status == status and (holder is None or x.holder == holder))

    def ready_bytes(self) -> int:
        return sum(x.size for x in self.msgs.values() if x.status == "ready")

    def dlx_bytes(self) -> int:
        return sum(x.size for x in self.msgs.values() if x.status == "dlx")

    def eligible(self, cid) -> bool:
        return not self.cfg.single_active_consumer or self.sac == cid

    def remove_consumer(self, cid) -> None:
        for mid in self.ids("out", cid):
            x = self.msgs[mid]
            x.status, x.holder, x.acq = "ready", None, x.acq + 1
        del self.cons[cid]
        if self.sac == cid:
            self.sac = None
            if self.cons:
                top = max(c.prio for c in self.cons.values())
                self.sac = next(k for k, c in self.cons.items() if c.prio == top)

    # ------------------------------------------------------------ running a command

    def run(self, cmd, fresh=(), post=None) -> list:
        self.index += 1
        self.state, fx = apply(cmd, self.state, self.index)
        self.twin, fx_twin = apply(cmd, self.twin, self.index)
        assert fx == fx_twin
        delivered: list[tuple] = []
        replies = []
        reported_drops = sum(e.count for e in fx if isinstance(e, Dropped))
        dropped_before = self.dropped
        for e in fx:
            if isinstance(e, Deliver):
                for d in e.messages:
                    self.on_deliver(e.consumer_id, d, fresh)
                    delivered.append((e.consumer_id, d.msg_id))
            elif isinstance(e, DeadLetter):
                self.on_dead_letter(e)
            elif isinstance(e, CreditReply):
                replies.append(e)
            elif isinstance(e, Purged):
                ready = self.ids("ready")
                assert e.count == len(ready) and isinstance(cmd, Purge)
                for mid in ready:
                    self.msgs[mid].status = "dropped"
                self.dropped += len(ready)
            elif isinstance(e, Dropped):
                assert not self.cfg.dead_letter
            else:
                assert isinstance(e, Confirm) and isinstance(cmd, Enqueue)
        purged = sum(e.count for e in fx if isinstance(e, Purged))
        if post is not None:
            post()
        self.account_for_silent_removals()
        # every drop but a purge's is reported, with its reason, for the metrics
        assert reported_drops == self.dropped - dropped_before - purged
        for r in replies:
            c = self.cons[r.consumer_id]
            assert (r.delivery_count, r.credit, r.available) == (c.dc, c.credit, len(self.ids("ready")))
        self.reconcile(delivered)
        return fx

    def on_deliver(self, cid, d, fresh) -> None:
        x = self.msgs[d.msg_id]
        assert x.status == "ready", (d, x.status)
        c = self.cons[cid]
        assert c.credit > 0, "credit exceeded"
        assert self.eligible(cid)
        c.credit -= 1
        c.dc = (c.dc + 1) & MASK
        assert d.first_acquirer == (x.acq == 0)
        assert d.redelivered == (x.acq > 0)
        assert d.delivery_count == x.failed and d.annotations == x.ann
        if x.expiry is not None and x.expiry <= self.clock:
            assert d.msg_id in fresh, "an expired message was delivered"
        if c.settled:
            x.status = "acked"
            self.acked += 1
        else:
            x.status, x.holder = "out", cid

    def on_dead_letter(self, e: DeadLetter) -> None:
        assert self.cfg.dead_letter and e.at_least_once == self.cfg.at_least_once
        anns = e.annotations or (None,) * len(e.msg_ids)
        for mid, ann in zip(e.msg_ids, anns, strict=True):
            x = self.msgs[mid]
            if x.status == "limbo":
                assert x.holder == e.reason, (x.holder, e.reason)
            else:
                assert x.status == "ready", x.status
                assert e.reason in ("expired", "maxlen")
                if e.reason == "expired":
                    assert x.expiry is not None and x.expiry <= self.clock
                else:
                    assert self.cfg.limited and self.cfg.overflow == "drop-head"
            assert ann == x.ann
            x.holder = None
            if e.at_least_once:
                x.status = "dlx"
            else:
                x.status = "dead"
                self.dead += 1

    def account_for_silent_removals(self) -> None:
        s = self.state
        # messages that had to leave and produced no dead letter were dropped
        for mid in self.ids("limbo"):
            assert not self.cfg.dead_letter
            self.msgs[mid].status = "dropped"
            self.dropped += 1
        # ready messages missing from the machine: dropped silently, if allowed
        mset = {m[0] for m in s.returned} | {m[0] for m in s.ready}
        for mid in self.ids("ready"):
            if mid not in mset:
                x = self.msgs[mid]
                assert not self.cfg.dead_letter, "dead-lettered without an effect"
                expired = x.expiry is not None and x.expiry <= self.clock
                assert expired or (self.cfg.limited and self.cfg.overflow == "drop-head"), "lost a message"
                x.status = "dropped"
                self.dropped += 1

    def reconcile(self, delivered) -> None:
        s = self.state
        machine_ready = [m[0] for m in sorted(s.returned)] + [m[0] for m in s.ready]
        assert machine_ready == sorted(machine_ready)
        # now every place must match exactly
        assert machine_ready == self.ids("ready")
        for m in (*s.returned, *s.ready):
            x = self.msgs[m[0]]
            assert (m[1], m[2], m[3], m[4], m[5]) == (x.size, x.expiry, x.failed, x.acq, x.ann)
        assert list(s.consumers) == list(self.cons)
        for cid, c in self.cons.items():
            assert sorted(s.consumers[cid].checked) == self.ids("out", cid)
            assert consumer_link(s, cid) == (c.dc, c.credit)
        assert sorted(s.dlx) == self.ids("dlx")
        assert s.sac_active == self.sac
        k = s.counters
        assert (k.enqueued, k.acknowledged, k.dead_lettered, k.dropped) == (
            self.accepted, self.acked, self.dead, self.dropped)  # fmt: skip
        assert conservation_holds(s)
        # FIFO: what was delivered came from the head
        if delivered and machine_ready:
            assert max(mid for _, mid in delivered) < machine_ready[0]
        # priorities: a consumer served means no eligible higher one has credit left
        if delivered:
            lowest = min(self.cons[cid].prio for cid, _ in delivered if cid in self.cons)
            for cid, c in self.cons.items():
                if c.prio > lowest and self.eligible(cid):
                    assert c.credit == 0, "a higher-priority consumer was skipped"
        # in service and ready are never both non-empty
        assert not (s.prios and machine_ready)
        # drop-head keeps the queue within its limits
        if self.cfg.overflow == "drop-head":
            if self.cfg.max_length is not None:
                assert len(machine_ready) + len(s.dlx) <= self.cfg.max_length
            if self.cfg.max_length_bytes is not None:
                assert s.ready_bytes + s.dlx_bytes <= self.cfg.max_length_bytes
        assert s.ready_bytes == self.ready_bytes() and s.dlx_bytes == self.dlx_bytes()
        # the release cursor: the oldest raft index a live message needs
        live = [m for m, x in self.msgs.items() if x.status in ("ready", "out", "dlx")]
        expected = split_msg_id(min(live))[0] if live else self.index + 1
        assert release_cursor(s) == expected

    # ------------------------------------------------------------ rules
