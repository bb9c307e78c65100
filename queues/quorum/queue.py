"""A quorum queue on one of its replicas: the queue interface (queues/base.py)
over its own Raft group, whose machine is queues/quorum's pure `apply`.

Every replica holds a `QuorumQueue`: it is both the group's machine (apply,
snapshot, restore) and the queue the node's links use. Commands from the
links (publish batches, attach, credit, settlements) are proposed to the
group from whichever replica the client is on; pysyncobj forwards them to the
leader. Every replica applies every committed command and acts on the
effects that concern it: a Deliver or CreditReply for a consumer attached on
this node is sent from here (links.py: every replica has the bodies), a
publish is confirmed by the proposer once its batch is committed and applied
here (publishing.py), and dead-lettering and TTL ticks are the leader's job.

Its parts: bodies.py keeps the message bodies beside the journal,
proposals.py gets commands into the log despite leader changes,
publishing.py batches a loop turn's publishes, links.py serves the consumer
links attached through this node, publish_hold.py holds the publishers while
a replica with consumers lags (node/vhosts/quorum_flow.py carries its reports),
ticks.py proposes the leader's Ticks (TTL, consumer timeouts).

Snapshots: when pysyncobj compacts the log (every `COMPACTION_ENTRIES`
entries or `COMPACTION_BYTES` of commands, whichever comes first) the
snapshot is the machine's (`snapshot_bytes`: ids, sizes, counters and the
publish dedup tables, never bodies), taken after a flush; bodies below the
release cursor (the oldest live message) are then deleted. Memory holds the
newest commands of the log (raft/journal.py) and the message index (a few
bytes per ready message, ready.py), never every body.

Durability: a publish is accepted once its entry is committed, i.e. in the
fsynced journal of a majority (persist before confirm, raft/journal.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

from queues import quorum as qq
from queues.base import ConfirmCallback, Consumer, Queue, QueueMessage, Settlement
from queues.quorum.state import M_ANN, consumer_timeout_of, expires_of

from .bodies import BodyStore
from .expiry import IdleExpiry
from .host import QuorumHost
from .links import LocalLinks
from .proposals import Proposer
from .publish_hold import PublishHold
from .publishing import PublishBatcher
from .ticks import LeaderTicks

__all__ = ["COMPACTION_BYTES", "COMPACTION_ENTRIES", "QuorumHost", "QuorumQueue"]

COMPACTION_ENTRIES = 2000  # log entries between snapshots: bounds the in-memory log tail...
COMPACTION_BYTES = 32 << 20  # ...and so do its bytes: entries carry bodies (a loop turn's, up to ~1 MB)


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
        self.proposals = Proposer(quorum_host, group, host)
        self.bodies = BodyStore(quorum_host, group, name, self._body_arrived, lambda: bool(self.links.consumers))
        self.links = LocalLinks(self, self.bodies, self.proposals, quorum_host)
        self._publishes = PublishBatcher(quorum_host, host, self.proposals)
        # held while a replica with consumers lags the leader (publish_hold.py); `on_applied(queue)`
        # runs after each publish batch applied here and when the last local consumer leaves
        self.publish_hold = PublishHold()
        self.on_applied: Any = None
        self.ticks = LeaderTicks(host, self._tick, self._consumer_timeout, lambda: self._qh.tick_clock())
        self._downing: set[str] = set()  # node incarnations: DownConsumersOnNode proposed, not yet applied
        self._dlx_sending: set[int] = set()  # held dead letters published, their targets' confirms awaited
        self._dlx_confirmed: list[int] = []  # confirmed, DeadLetterSettled not proposed yet (one per loop turn)
        self.expiry = IdleExpiry(host, lambda: quorum_host.is_leader(group) and not self.links.consumers,
                                 lambda: host.queue_expired(self))  # fmt: skip
        self.expiry.configure(expires_of(arguments))

    # -- the queue interface ------------------------------------------------------------

    @property
    def leader(self) -> str:
        return self._qh.leader_of(self.group) or self.members[0]

    @property
    def replicas(self) -> list[str]:
        return list(self.members)

    def publish(self, message: QueueMessage, confirm: ConfirmCallback | None) -> None:
        self._publishes.add(message, confirm)

    def attach_consumer(self, consumer: Consumer, priority: int = 0) -> None:
        cid = self.links.add(consumer)
        self.proposals.for_consumer(cid, qq.Attach(cid, priority, self._host.now_ms(), self._qh.incarnation, 0,
                                                   consumer.presettled))  # fmt: skip

    def consumer_activity(self, consumer: Consumer) -> str:
        """"up", or with x-single-active-consumer "single_active" / "waiting" (as the log has it)."""
        if not self.state.config.single_active_consumer:
            return "up"
        cid = self.links.id_of(consumer)
        return "single_active" if cid is not None and self.state.sac_active == cid else "waiting"

    def apply_policy(self, arguments: dict) -> None:
        """Acts from now on on `arguments`, the queue's own and a policy's
        (node/vhosts/policies.py): a SetConfig through the queue's log, so
        every replica changes at the same point (every replica may propose
        it; applying it twice changes nothing)."""
        config = qq.QuorumConfig.from_arguments(arguments)  # raises QueueArgumentError
        expires = expires_of(arguments)
        self.effective_arguments = dict(arguments)
        if expires != self.expiry.expires:
            self.expiry.configure(expires)
        if config != self.state.config:
            self.proposals.submit(qq.SetConfig(tuple(config.as_list())))
        self.arm_ticks()  # a new consumer timeout: due at once, not at the old one's

    def detach_consumer(self, consumer: Consumer) -> None:
        cid = self.links.remove(consumer)
        if cid is not None:
            self.proposals.for_consumer(cid, qq.Detach(cid))
            if not self.links.consumers and self.on_applied is not None:
                self.on_applied(self)  # the leader stops counting this replica

    def credit(self, consumer: Consumer, delivery_count: int, link_credit: int, drain: bool, echo: bool) -> None:
        cid = self.links.id_of(consumer)
        if cid is not None:
            lease = self._lease(consumer, link_credit, drain)
            self.links.grant(cid, delivery_count, link_credit, lease)
            self.proposals.for_consumer(cid, qq.Credit(cid, delivery_count, link_credit + lease, drain, echo))

    def _lease(self, consumer: Consumer, link_credit: int, drain: bool) -> int:
        """How many messages beyond the client's credit this replica asks to hold for it
        (credit_lease.py): on a follower, whose grants wait for a commit round trip
        behind the publishes; never for a drain or a pre-settled consumer."""
        if drain or consumer.presettled or link_credit <= 0 or self._qh.is_leader(self.group):
            return 0
        if not getattr(consumer, "leased", True):  # a consumer whose credit must be exact (delayed_messages.py)
            return 0
        return min(link_credit, self._qh.consumer_lease())

    def settle(self, consumer: Consumer, seqs: list[int], settlement: Settlement) -> None:
        cid = self.links.id_of(consumer)
        if cid is None:
            return
        ids = tuple(seqs)
        if settlement.kind == "accepted":
            record: Any = qq.Settle(cid, ids)
        elif settlement.kind == "released":
            record = qq.Return(cid, ids)
        elif settlement.kind == "rejected":
            record = qq.Discard(cid, ids)
        else:
            record = qq.Modify(cid, ids, settlement.delivery_failed, settlement.undeliverable_here,
                               settlement.annotations)  # fmt: skip
        self.proposals.for_consumer(cid, record)

    def consumers_applied(self) -> asyncio.Future[None]:
        """Resolves once every consumer command this replica sent so far is applied: counts
        read then show what a closed consumer returned (its Detach may still be in the log's
        pipeline when a management read arrives right after the DETACH answer)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.proposals.after_consumers(lambda: done.done() or done.set_result(None))
        return done

    def purge(self) -> asyncio.Future[int]:
        """Drops the ready messages once the consumer commands sent before
        are applied; resolves to the count the machine purged."""
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def purged(effects: list) -> None:
            if not done.done():
                done.set_result(sum(e.count for e in effects if isinstance(e, qq.Purged)))

        self.proposals.after_consumers(lambda: self.proposals.submit(qq.Purge(), purged))
        return done

    def delete(self) -> int:
        self.deleted = True
        self.expiry.stop()
        self.proposals.stop()
        self.publish_hold.set(False)  # its held publishers may publish elsewhere
        self.ticks.stop()
        self.links.close()
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

    @property
    def consumer_capacity(self) -> float:
        """1.0 while a consumer is in service (has credit and may receive), as
        the replicated state holds it on every member, else 0.0."""
        return 1.0 if any(self.state.service.values()) else 0.0

    def info(self) -> dict:
        out = super().info()
        out.update(leader=self.leader, leader_elected=self._qh.leader_of(self.group) is not None,
                   members=list(self.members), messages_unacknowledged=self.unacked_count,
                   consumer_details=[{"id": cid, "node": cs.node, "credit": cs.credit, "checked_out": len(cs.checked),
                                      "linked_here": cid in self.links.consumers,
                                      "held_here": len(self.links.gates[cid].held) if cid in self.links.gates else 0}
                                     for cid, cs in self.state.consumers.items()])  # fmt: skip
        return out

    def body(self, mid: int) -> bytes | None:
        """The stored message (payload and routing), or None when this replica lacks it."""
        return self.bodies.body(mid)

    # -- the Raft machine -----------------------------------------------------------------

    def apply(self, record: Any, index: int) -> Any:
        if index <= self.state.last_index:
            # applied already: pysyncobj replays entries after a snapshot it sent this
            # replica although it was not behind (see restore); acting again would deliver twice
            if isinstance(record, qq.Publish):
                return qq.publish_outcome(self.state, record.publisher, record.seq) or []
            return []
        self.state, effects = qq.apply(record, self.state, index)
        if self.expiry.expires is not None:
            self.expiry.applied(len(self.state.consumers))
        if effects and isinstance(effects[0], qq.StoreBodies):  # a new publish batch
            self.bodies.store_batch(record, index)
            if self.on_applied is not None:
                self.on_applied(self)
        elif isinstance(record, (qq.Settle, qq.Discard)):
            self.bodies.forget(record.msg_ids)  # settled through another node's consumer: not read here
        if not self.deleted:
            self._act(record, effects)
        return effects

    def snapshot(self) -> bytes:
        # the bodies applied so far must be on disk before the log that carries them is compacted
        self._qh.sync()
        self.bodies.release_below(qq.release_cursor(self.state))
        return qq.snapshot_bytes(self.state)

    def restore(self, data: bytes) -> None:
        restored = qq.restore(data)
        if 0 < restored.last_index <= self.state.last_index:
            # A leader that lost track of this follower sends a snapshot it does not need;
            # Raft ignores one at or below its commit index, pysyncobj does not.
            return
        self.state = restored
        self.expiry.applied(len(restored.consumers))
        if self.links.consumers:
            self._qh.call_soon(self.links.resync)

    def _act(self, record: Any, effects: list) -> None:
        leader = self._qh.is_leader(self.group)
        links = self.links
        links.forget_settled(record)
        for effect in effects:
            if isinstance(effect, qq.Deliver):
                if effect.consumer_id in links.consumers:
                    links.send(effect.consumer_id, [(d.msg_id, d.delivery_count, not d.first_acquirer, d.annotations)
                                                    for d in effect.messages])  # fmt: skip
            elif isinstance(effect, qq.CreditReply):
                links.credit_reply(effect.consumer_id, effect.delivery_count, effect.credit, effect.available,
                                   effect.drain)  # fmt: skip
            elif isinstance(effect, qq.DeadLetter) and leader:
                self._dead_letter(effect)
            elif isinstance(effect, qq.Dropped) and leader:  # counted once, by the leader
                self._host.count_dropped(self, effect.reason, effect.count)
            elif isinstance(effect, qq.ConsumerTimedOut):
                links.timed_out(effect.consumer_id, effect.timeout)
        if isinstance(record, qq.DownConsumersOnNode):
            links.end_unknown()
        if leader:
            self.ticks.arm(self.state, record)
        else:
            self.ticks.follower()

    def _body_arrived(self, mid: int, delivery: tuple) -> None:
        self.links.body_arrived(mid, delivery)

    def _dead_letter(self, effect: qq.DeadLetter) -> None:
        if effect.at_least_once:
            for mid in effect.msg_ids:
                self._send_dead_letter(mid, effect.reason)
            return
        for i, mid in enumerate(effect.msg_ids):
            annotations = effect.annotations[i] if effect.annotations else None
            message = self.bodies.message(mid, annotations=annotations)
            if message is not None:
                self._host.dead_letter(self, message, effect.reason)

    # -- at-least-once dead-lettering: the holding area is settled only once
    # every target queue confirmed; the leader re-sends what is still held
    # (a new leader all of it, and messages no exchange or binding took yet)

    def resend_dead_letters(self) -> None:
        """Leader only, periodically (node/vhosts/quorum_groups.py's sweep)."""
        if self.deleted or not self._qh.is_leader(self.group):
            return
        for mid, reason in qq.dead_letter_pending(self.state):
            if mid not in self._dlx_sending:
                self._send_dead_letter(mid, reason)

    def _send_dead_letter(self, mid: int, reason: str) -> None:
        held = self.state.dlx.get(mid)
        if held is None or mid in self._dlx_sending:
            return
        message = self.bodies.message(mid, annotations=held[0][M_ANN])
        if message is None:
            return  # this replica lacks the body yet; a later sweep tries again
        self._dlx_sending.add(mid)

        def confirmed(ok: bool) -> None:
            self._dlx_sending.discard(mid)
            if ok and not self.deleted:
                if not self._dlx_confirmed:
                    self._host.call_later(0, self._settle_dead_letters)
                self._dlx_confirmed.append(mid)

        self._host.dead_letter(self, message, reason, confirmed)

    def _settle_dead_letters(self) -> None:
        ids, self._dlx_confirmed = tuple(self._dlx_confirmed), []
        if ids and not self.deleted:
            self.proposals.submit(qq.DeadLetterSettled(ids))

    def arm_ticks(self) -> None:
        """On the leader, the Tick timer from the state as it is (also periodically: a new
        leader of an idle queue applies nothing that would arm it)."""
        if not self.deleted and self._qh.is_leader(self.group):
            self.ticks.arm(self.state, None)

    def _tick(self, record: Any) -> bool:
        """The leader's Tick (ticks.py): TTL, consumer timeouts. Whether it was proposed."""
        if self.deleted or not self._qh.is_leader(self.group):
            return False
        self.proposals.submit(record)
        return True

    def _consumer_timeout(self) -> int | None:
        """x-consumer-timeout (the smaller of the queue's and its policy's), else the
        node setting consumer_timeout; None while the feature flag is off."""
        node = self._qh.consumer_timeout()
        if node is None:
            return None
        own = consumer_timeout_of(self.effective_arguments)
        return node if own is None else own

    # -- consumers whose node is gone ---------------------------------------------------

    def consumers_down(self, node: str) -> None:
        """The leader learnt that `node` is gone: detach every consumer it had (any incarnation)."""
        for incarnation in self.consumer_nodes():
            if incarnation.split("#")[0] == node and incarnation != self._qh.incarnation:
                self.consumers_gone(incarnation)

    def forget_ghosts(self) -> None:
        """Consumers of this node's incarnation the state has but no link here: detach them."""
        self.links.forget_ghosts()

    def consumer_nodes(self) -> set[str]:
        """The node incarnations the attached consumers live on."""
        return {cs.node for cs in self.state.consumers.values()}

    def consumers_gone(self, incarnation: str) -> None:
        if incarnation not in self._downing:
            self._downing.add(incarnation)
            self.proposals.submit(qq.DownConsumersOnNode(incarnation), lambda _effects: self._downing.discard(incarnation))
