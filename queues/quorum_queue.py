"""A quorum queue on one of its replicas: the queue interface (queues/base.py)
over its own Raft group, whose machine is queues/quorum's pure `apply`.

Every replica holds a `QuorumQueue`: it is both the group's machine (apply,
snapshot, restore) and the queue the node's links use. Commands from the
links (publish batches, attach, credit, settlements) are proposed to the
group from whichever replica the client is on; pysyncobj forwards them to the
leader. Every replica applies every committed command and acts on the
effects that concern it: a Deliver or CreditReply for a consumer attached on
this node is sent from here (deliveries need no hop through the leader,
since every replica has the bodies), a publish is confirmed by the proposer
once its batch is committed and applied here, and dead-lettering and TTL
ticks are the leader's job.

Where the data lives. Bodies travel once, in the publish record of the Raft
log; at apply each replica writes them to the node's Raft RocksDB under
(group, message id) (`DurableLog.put_blob`), synced by the same fsync as the
journal. The state (and so each snapshot) holds only message ids, sizes and
counters. When pysyncobj compacts the log (every `COMPACTION_ENTRIES`
entries or `COMPACTION_BYTES` of commands, whichever comes first) the
snapshot is taken after a flush, and bodies below the release cursor (the
oldest live message) are deleted with one range tombstone: memory holds the
uncompacted log tail and the message index, never every body.

Durability: a publish is accepted once its entry is committed, i.e. in the
fsynced journal of a majority (persist before confirm, raft/journal.py).
"""

from __future__ import annotations

import itertools
import logging
import struct
from dataclasses import dataclass
from typing import Any, Protocol

from amqp import codec
from queues import quorum as qq
from queues.base import ConfirmCallback, Consumer, Outcome, Queue, QueueMessage, Settlement
from raft.records import command
from raft.status import ProposalOutcome

log = logging.getLogger("warren.quorum")

COMPACTION_ENTRIES = 2000  # log entries between snapshots: bounds the in-memory log tail...
COMPACTION_BYTES = 32 << 20  # ...and so do its bytes: entries carry bodies (a loop turn's, up to ~1 MB)
SNAPSHOT_FORMAT = 1
RETRY_MIN, RETRY_MAX = 0.05, 1.0  # seconds between proposals of a command the group did not take
RESUBMIT_AFTER = 5.0  # seconds without an answer before a proposal is made again
REMEMBERED_BATCHES = 64  # per publisher: outcomes kept for batches that may be proposed again
_KEY = struct.Struct(">Q")
_QUEUE_OBJECTS = itertools.count(1)


@command("quorum.publish", version=1)
@dataclass(frozen=True, slots=True)
class Publish:
    """A batch of publishes with their bodies, as it goes through the log.
    Each message: [payload, durable, ttl, exchange, routing_keys, correlation, annotations].
    (`publisher`, `seq`) identify the batch: a batch proposed again after a
    leader change (its first outcome unknown) is applied once."""

    messages: tuple
    now_ms: int
    publisher: str = ""
    seq: int = 0


class QuorumHost(Protocol):
    """What a quorum queue needs of its node (node/vhosts/quorum_groups.py)."""

    node_id: str
    incarnation: str  # node_id#boot: consumers of an earlier life are recognisable

    def submit(self, group: str, record: Any, callback: Any = None) -> bool: ...

    def is_leader(self, group: str) -> bool: ...

    def leader_of(self, group: str) -> str | None: ...

    def put_blob(self, group: str, key: bytes, value: bytes) -> None: ...

    def get_blob(self, group: str, key: bytes) -> bytes | None: ...

    def delete_blobs(self, group: str, below: bytes | None = None) -> None: ...

    def sync(self) -> None: ...

    def after_durable(self, fn: Any) -> None: ...

    def call_soon(self, fn: Any) -> None: ...

    def fetch_bodies(self, group: str, mids: list[int], callback: Any) -> None:
        """Ask the other members for these stored messages; `callback(found, mids)`."""


class QuorumQueue(Queue):
    type_name = "quorum"

    def __init__(self, vhost: str, name: str, arguments: dict, members: tuple[str, ...], *, host: Any,
                 quorum_host: QuorumHost, group: str):  # fmt: skip
        super().__init__(vhost, name, True, None, False, arguments)
        self.config = qq.QuorumConfig.from_arguments(arguments)
        self.state = qq.new_state(self.config)
        self.members = tuple(members)
        self.group = group
        self._host = host  # the vhost: dead-lettering, timers, clock
        self._qh = quorum_host
        self._consumers: dict[str, Consumer] = {}  # consumer id -> local link
        self._ids: dict[Any, str] = {}  # local link -> consumer id
        self._next_id = itertools.count(1)
        self._batch: list[list] = []  # publishes of this loop turn
        self._confirms: list[ConfirmCallback | None] = []
        self._fresh: dict[int, bytes] = {}  # bodies written but not yet flushed (not readable from the store)
        self._tick_timer: Any = None
        self._tick_at: int | None = None
        # unique per queue object: one started again (a membership change) never reuses sequences
        self._publisher = f"{quorum_host.incarnation}/{next(_QUEUE_OBJECTS)}"
        self._pub_seq = itertools.count(1)
        # replicated with the state: per publisher, the batches applied (low watermark, seqs above it)
        # and the confirms of the recent ones, so a batch proposed twice is applied once
        self._pipelines: dict[str, _Pipeline] = {}
        self._sent: dict[str, set[int]] = {}  # local link -> ids handed to it, not yet settled
        self._missing: dict[int, list[tuple]] = {}  # bodies to fetch -> the deliveries waiting for them
        self._fetching: set[int] = set()  # consumer id -> its commands in flight
        self._downing: set[str] = set()
        self._applied_index = 0  # the last log index applied here (duplicate Publish batches included)  # DownConsumersOnNode proposed, not yet applied
        self._applied: dict[str, tuple[int, set[int]]] = {}
        self._outcomes: dict[str, dict[int, list]] = {}

    # -- the queue interface ------------------------------------------------------------

    @property
    def leader(self) -> str:
        return self._qh.leader_of(self.group) or self.members[0]

    @property
    def replicas(self) -> list[str]:
        return list(self.members)

    def publish(self, message: QueueMessage, confirm: ConfirmCallback | None) -> None:
        if not self._batch:
            self._qh.call_soon(self._flush_publishes)
        ttl = None if message.expires_at is None else max(0, message.expires_at - self._host.now_ms())
        corr = len(self._batch) if confirm is not None else None
        self._batch.append([message.payload, message.durable, ttl, message.exchange, list(message.routing_keys), corr,
                            message.annotations])  # fmt: skip
        self._confirms.append(confirm)

    def _flush_publishes(self) -> None:
        batch, confirms = self._batch, self._confirms
        self._batch, self._confirms = [], []
        if not batch:
            return

        def committed(effects: Any) -> None:
            done = set()
            for effect in effects or ():
                if isinstance(effect, qq.Confirm):
                    for corr in effect.correlations:
                        if corr is not None and confirms[corr] is not None and corr not in done:
                            done.add(corr)
                            confirms[corr](Outcome.ACCEPTED if effect.outcome is Outcome.ACCEPTED
                                           else Outcome.REJECTED)  # fmt: skip
            for corr, confirm in enumerate(confirms):
                if confirm is not None and corr not in done:
                    confirm(Outcome.RELEASED)  # the queue was deleted under it

        record = Publish(tuple(batch), self._host.now_ms(), self._publisher, next(self._pub_seq))
        self._submit(record, committed)

    def attach_consumer(self, consumer: Consumer, priority: int = 0) -> None:
        cid = f"{self._qh.incarnation}/{next(self._next_id)}"
        self._consumers[cid] = consumer
        self._ids[consumer] = cid
        self._pipelines[cid] = _Pipeline(self)
        self._for(cid, qq.Attach(cid, priority, self._host.now_ms(), self._qh.incarnation, 0, consumer.presettled))

    def detach_consumer(self, consumer: Consumer) -> None:
        cid = self._ids.pop(consumer, None)
        if cid is not None:
            self._consumers.pop(cid, None)
            self._for(cid, qq.Detach(cid))

    def credit(self, consumer: Consumer, delivery_count: int, link_credit: int, drain: bool, echo: bool) -> None:
        cid = self._ids.get(consumer)
        if cid is not None:
            self._for(cid, qq.Credit(cid, delivery_count, link_credit, drain, echo))

    def settle(self, consumer: Consumer, seqs: list[int], settlement: Settlement) -> None:
        cid = self._ids.get(consumer)
        if cid is None:
            return
        ids = tuple(seqs)
        if settlement.kind == "accepted":
            self._for(cid, qq.Settle(cid, ids))
        elif settlement.kind == "released":
            self._for(cid, qq.Return(cid, ids))
        elif settlement.kind == "rejected":
            self._for(cid, qq.Discard(cid, ids))
        else:
            self._for(cid, qq.Modify(cid, ids, settlement.delivery_failed, settlement.undeliverable_here,
                                   settlement.annotations))  # fmt: skip

    def purge(self) -> int:
        count = qq.overview(self.state)["ready"]
        self._submit(qq.Purge())
        return count

    def delete(self) -> int:
        self.deleted = True
        if self._tick_timer is not None:
            self._tick_timer.cancel()
        for consumer in list(self._consumers.values()):
            consumer.queue_deleted()
        self._consumers.clear()
        self._ids.clear()
        return qq.overview(self.state)["depth"]

    @property
    def message_count(self) -> int:
        return qq.overview(self.state)["ready"]

    @property
    def unacked_count(self) -> int:
        return qq.overview(self.state)["checked_out"]

    @property
    def consumer_count(self) -> int:
        return qq.overview(self.state)["consumers"]

    def info(self) -> dict:
        out = super().info()
        out.update(leader=self.leader, leader_elected=self._qh.leader_of(self.group) is not None,
                   members=list(self.members), messages_unacknowledged=self.unacked_count,
                   consumer_details=[{"id": cid, "node": cs.node, "credit": cs.credit, "checked_out": len(cs.checked),
                                      "linked_here": cid in self._consumers}
                                     for cid, cs in self.state.consumers.items()])  # fmt: skip
        return out

    def _submit(self, record: Any, on_applied: Any = None, delay: float = RETRY_MIN) -> None:
        """Propose `record` until the group takes it: publish batches are
        deduplicated and the machine's other commands are idempotent, so a
        leader change or a lost forward only delays it. `on_applied(effects)`
        runs once it is applied here."""

        def done(result: Any, outcome: ProposalOutcome | None) -> None:
            if outcome is ProposalOutcome.SUCCESS or self.deleted:
                if on_applied is not None:
                    on_applied(result if outcome is ProposalOutcome.SUCCESS and isinstance(result, list) else [])
            else:
                self._host.call_later(delay, lambda: self._submit(record, on_applied, min(delay * 2, RETRY_MAX)))

        self._propose(record, done)

    def _propose(self, record: Any, done: Any) -> None:
        """One proposal; `done(result, outcome)` once, a lost answer reported as outcome None."""
        answered = False

        def answer(result: Any, outcome: ProposalOutcome | None) -> None:
            nonlocal answered
            if not answered:  # else a late answer after the watchdog gave up on it
                answered = True
                watchdog.cancel()
                done(result, outcome)

        def no_answer() -> None:
            # a forward lost with its stream while the leader stayed the same gets no answer at all
            answer(None, None)

        watchdog = self._host.call_later(RESUBMIT_AFTER, no_answer)
        if not self._qh.submit(self.group, record, answer):
            answer(None, None)

    def _for(self, cid: str, record: Any) -> None:
        pipeline = self._pipelines.get(cid)
        if pipeline is None:
            pipeline = self._pipelines[cid] = _Pipeline(self)
        pipeline.send(record)

    # -- the Raft machine -----------------------------------------------------------------

    def apply(self, record: Any, index: int) -> Any:
        if index <= self._applied_index:
            # applied already: pysyncobj replays entries after a snapshot it sent this
            # replica although it was not behind (see restore); acting again would deliver twice
            return (self._seen(record) or []) if isinstance(record, Publish) else []
        self._applied_index = index
        if isinstance(record, Publish):
            again = self._seen(record)
            if again is not None:
                return again  # proposed twice (a leader change): applied the first time
            publish = record
            record = self._store_bodies(record, index)
            self.state, effects = qq.apply(record, self.state, index)
            self._remember(publish, effects)
            if not self.deleted:
                self._act(record, effects)
            return effects
        self.state, effects = qq.apply(record, self.state, index)
        if not self.deleted:
            self._act(record, effects)
        return effects

    def _store_bodies(self, record: Publish, index: int) -> qq.Enqueue:
        messages = []
        fresh = []
        for pos, (payload, durable, ttl, exchange, routing_keys, corr, extra) in enumerate(record.messages):
            mid = qq.msg_id(index, pos)
            value = codec.dumps([bytes(payload), bool(durable), exchange, list(routing_keys), extra])
            self._qh.put_blob(self.group, _KEY.pack(mid), value)
            self._fresh[mid] = value
            fresh.append(mid)
            messages.append(qq.MsgIn(len(payload), ttl, corr))
        self._qh.after_durable(lambda: [self._fresh.pop(m, None) for m in fresh])
        return qq.Enqueue(tuple(messages), record.now_ms)

    def _message(self, mid: int, delivery_count: int = 0, redelivered: bool = False,
                 annotations: dict | None = None) -> QueueMessage | None:  # fmt: skip
        value = self.body(mid)
        if value is None:
            return None
        payload, durable, exchange, routing_keys, stored = codec.loads(value)
        if stored and annotations:
            annotations = {**stored, **annotations}  # what a Modify merged wins
        return QueueMessage(mid, bytes(payload), durable, None, delivery_count, redelivered, exchange,
                            list(routing_keys), annotations or stored)  # fmt: skip

    def body(self, mid: int) -> bytes | None:
        """The stored message (payload and routing), or None when this replica lacks it."""
        value = self._fresh.get(mid)
        return value if value is not None else self._qh.get_blob(self.group, _KEY.pack(mid))

    def _send(self, cid: str, deliveries: list[tuple]) -> None:
        """Hand (msg_id, delivery_count, redelivered, annotations) to the local link `cid`.
        A body this replica lacks (it installed a snapshot instead of the log that carried
        it) is fetched from another member first."""
        consumer = self._consumers.get(cid)
        if consumer is None:
            return
        sent = self._sent.setdefault(cid, set())
        for mid, delivery_count, redelivered, merged in deliveries:
            message = self._message(mid, delivery_count, redelivered, merged)
            if message is None:
                self._await_body(mid, (cid, delivery_count, redelivered, merged))
            else:
                consumer.deliver(self, message)
                sent.add(mid)

    def _await_body(self, mid: int, delivery: tuple) -> None:
        if not self._missing:
            self._qh.call_soon(self._fetch_missing)
        self._missing.setdefault(mid, []).append(delivery)

    def _fetch_missing(self) -> None:
        wanted = [m for m in self._missing if m not in self._fetching]
        if wanted:
            self._fetching.update(wanted)
            self._qh.fetch_bodies(self.group, wanted, self._bodies_arrived)

    def _bodies_arrived(self, bodies: dict[int, bytes], asked: list[int]) -> None:
        self._fetching.difference_update(asked)
        for mid, value in bodies.items():
            self._qh.put_blob(self.group, _KEY.pack(mid), value)
            self._fresh[mid] = value
        self._qh.after_durable(lambda: [self._fresh.pop(m, None) for m in bodies])
        for mid in asked:
            waiting = self._missing.pop(mid, [])
            if mid not in bodies:
                if waiting:
                    log.error("quorum queue %s: no member has the body of message %d", self.name, mid)
                continue
            for cid, delivery_count, redelivered, merged in waiting:
                cs = self.state.consumers.get(cid)
                if cs is not None and mid in cs.checked:  # still its to deliver
                    self._send(cid, [(mid, delivery_count, redelivered, merged)])

    def _act(self, record: Any, effects: list) -> None:
        leader = self._qh.is_leader(self.group)
        self._forget_settled(record)
        for effect in effects:
            if isinstance(effect, qq.Deliver):
                if effect.consumer_id in self._consumers:
                    self._send(effect.consumer_id, [(d.msg_id, d.delivery_count, not d.first_acquirer, d.annotations)
                                                    for d in effect.messages])  # fmt: skip
            elif isinstance(effect, qq.CreditReply):
                consumer = self._consumers.get(effect.consumer_id)
                if consumer is not None:
                    consumer.credit_reply(effect.delivery_count, effect.credit, effect.available, effect.drain)
            elif isinstance(effect, qq.DeadLetter) and leader:
                self._dead_letter(effect)
        if isinstance(record, qq.DownConsumersOnNode):
            self._check_consumers()
        if leader:
            self._arm_tick()

    def _forget_settled(self, record: Any) -> None:
        sent = self._sent.get(getattr(record, "consumer_id", None))
        if sent is not None:
            if isinstance(record, qq.Detach):
                self._sent.pop(record.consumer_id, None)
            else:
                sent.difference_update(getattr(record, "msg_ids", ()))

    def _resync(self) -> None:
        """After a snapshot replaced the state: the log entries it stood for were never
        applied here, so their deliveries to this node's links never happened. Send what
        the state says each local link holds and it was not sent (marked redelivered:
        the link may have had it before); end the links the state no longer knows."""
        for cid in list(self._consumers):
            cs = self.state.consumers.get(cid)
            if cs is None:
                continue
            sent = self._sent.setdefault(cid, set())
            sent.intersection_update(cs.checked)
            self._send(cid, [(mid, m[3], True, m[5]) for mid, m in cs.checked.items() if mid not in sent])
        self._check_consumers()

    def _dead_letter(self, effect: qq.DeadLetter) -> None:
        for i, mid in enumerate(effect.msg_ids):
            annotations = effect.annotations[i] if effect.annotations else None
            message = self._message(mid, annotations=annotations)
            if message is not None:
                self._host.dead_letter(self, message, effect.reason)
        if effect.at_least_once:
            self._submit(qq.DeadLetterSettled(tuple(effect.msg_ids)))

    def _check_consumers(self) -> None:
        """Consumers the state no longer has (their node was declared down) end their links."""
        for cid in [c for c in self._consumers if c not in self.state.consumers]:
            consumer = self._consumers.pop(cid)
            self._ids.pop(consumer, None)
            # the last word of its pipeline: an Attach or Credit still being retried must not revive it
            self._for(cid, qq.Detach(cid))
            end = getattr(consumer, "queue_unavailable", None)
            if end is not None:
                end(f"quorum queue '{self.name}' cancelled this consumer (its node was seen down)")

    def _arm_tick(self) -> None:
        """The leader ticks the machine when the head message's TTL runs out."""
        due = qq.next_expiry(self.state)
        if due == self._tick_at:
            return
        if self._tick_timer is not None:
            self._tick_timer.cancel()
            self._tick_timer = None
        self._tick_at = due
        if due is not None:
            delay = max(0.0, (due - self._host.now_ms()) / 1000)
            self._tick_timer = self._host.call_later(delay + 0.001, self._tick)

    def _tick(self) -> None:
        self._tick_timer, self._tick_at = None, None
        if not self.deleted and self._qh.is_leader(self.group):
            self._submit(qq.Tick(self._host.now_ms()))

    def consumers_down(self, node: str) -> None:
        """The leader learnt that `node` is gone: detach every consumer it had (any incarnation)."""
        for incarnation in self.consumer_nodes():
            if incarnation.split("#")[0] == node and incarnation != self._qh.incarnation:
                self.consumers_gone(incarnation)

    def forget_ghosts(self) -> None:
        """Consumers of this node's incarnation the state has but no link here
        (an Attach retried after its link ended): detach them."""
        me = self._qh.incarnation
        for cid, cs in list(self.state.consumers.items()):
            if cs.node != me or cid in self._consumers:
                continue  # a link is in _consumers from before its Attach is proposed: this one is gone
            pipeline = self._pipelines.get(cid)
            if pipeline is None or not pipeline.entries or not isinstance(pipeline.entries[-1][0], qq.Detach):
                self._for(cid, qq.Detach(cid))

    def consumer_nodes(self) -> set[str]:
        """The node incarnations the attached consumers live on."""
        return {cs.node for cs in self.state.consumers.values()}

    def consumers_gone(self, incarnation: str) -> None:
        if incarnation not in self._downing:
            self._downing.add(incarnation)
            self._submit(qq.DownConsumersOnNode(incarnation), lambda _effects: self._downing.discard(incarnation))

    # -- publish batches applied once ---------------------------------------------------

    def _seen(self, record: Publish) -> list | None:
        """The confirms of a batch applied before, or None for a new one."""
        if not record.publisher:
            return None
        low, above = self._applied.get(record.publisher, (0, set()))
        if record.seq > low and record.seq not in above:
            return None
        confirms = self._outcomes.get(record.publisher, {}).get(record.seq)
        if confirms is None:  # too old to be remembered: the proposer gave up on it long ago
            return []
        return [qq.Confirm(tuple(corrs), Outcome(outcome)) for outcome, corrs in confirms]

    def _remember(self, record: Publish, effects: list) -> None:
        if not record.publisher:
            return
        low, above = self._applied.get(record.publisher, (0, set()))
        above = set(above)
        above.add(record.seq)
        while low + 1 in above:
            low += 1
            above.discard(low)
        self._applied[record.publisher] = (low, above)
        outcomes = self._outcomes.setdefault(record.publisher, {})
        outcomes[record.seq] = [[e.outcome.value, list(e.correlations)] for e in effects if isinstance(e, qq.Confirm)]
        for old in [s for s in outcomes if s <= record.seq - REMEMBERED_BATCHES]:
            del outcomes[old]

    # -- snapshots ----------------------------------------------------------------------

    def snapshot(self) -> bytes:
        # the bodies applied so far must be on disk before the log that carries them is compacted
        self._qh.sync()
        cursor = qq.release_cursor(self.state)
        self._qh.delete_blobs(self.group, _KEY.pack(qq.msg_id(cursor, 0)))
        publishers = [[p, low, sorted(above), [[s, o] for s, o in sorted(self._outcomes.get(p, {}).items())]]
                      for p, (low, above) in sorted(self._applied.items())]  # fmt: skip
        return codec.dumps([SNAPSHOT_FORMAT, publishers, qq.snapshot_bytes(self.state)])

    def restore(self, data: bytes) -> None:
        fmt, publishers, state = codec.loads(data)
        if fmt != SNAPSHOT_FORMAT:
            raise ValueError(f"quorum queue snapshot format {fmt}, this Warren reads {SNAPSHOT_FORMAT}")
        restored = qq.restore(bytes(state))
        if 0 < restored.last_index <= self._applied_index:
            # A leader that lost track of this follower sends a snapshot it does not need;
            # Raft ignores one at or below its commit index, pysyncobj does not.
            return
        self.state = restored
        self._applied_index = restored.last_index
        self._applied = {p: (low, set(above)) for p, low, above, _ in publishers}
        self._outcomes = {p: {s: o for s, o in outcomes} for p, _, _, outcomes in publishers}
        if self._consumers:
            self._qh.call_soon(self._resync)


class _Pipeline:
    """The commands of one consumer link, applied in the order it sent them.

    They are proposed at once, one after the other; when one fails (a leader
    change), it and every later one, applied or not, are proposed again in
    order. Each is safe to apply twice, and the order of the last
    applications is the link's own: a stale Credit never lands after a newer
    one (which would shrink the credit under a waiting receiver), a retried
    Attach never after its Detach."""

    def __init__(self, queue: QuorumQueue):
        self.queue = queue
        self.entries: list[list] = []  # [record, generation, applied], oldest first
        self.delay = RETRY_MIN

    def send(self, record: Any) -> None:
        entry = [record, 0, False]
        self.entries.append(entry)
        self._propose(entry)

    def _propose(self, entry: list) -> None:
        generation = entry[1]

        def done(result: Any, outcome: ProposalOutcome | None) -> None:
            if entry[1] != generation or entry not in self.entries:
                return  # proposed again since, or dropped
            if outcome is ProposalOutcome.SUCCESS or self.queue.deleted:
                entry[2] = True
                while self.entries and self.entries[0][2]:
                    self.entries.pop(0)
                self.delay = RETRY_MIN
                if not self.entries and isinstance(entry[0], qq.Detach):  # the link's last word
                    self.queue._pipelines.pop(entry[0].consumer_id, None)
            else:
                self._again_from(entry)

        self.queue._propose(entry[0], done)

    def _again_from(self, entry: list) -> None:
        later = self.entries[self.entries.index(entry):]
        for e in later:
            e[1] += 1
            e[2] = False
        delay, self.delay = self.delay, min(self.delay * 2, RETRY_MAX)

        def again() -> None:
            for e in later:
                if e in self.entries and not self.queue.deleted:
                    self._propose(e)

        self.queue._host.call_later(delay, again)
