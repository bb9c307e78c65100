"""This node's part of quorum queue publisher flow (queues/quorum/publish_hold.py).

As a follower with consumers: after it applies publishes, it tells the
group's leader how many messages it has applied, at most every
`REPORT_INTERVAL` (one node message per leader for all its groups, channel
"quorum.flow", queues/quorum/flow_records.py), and once more when its last
consumer leaves.

As a leader: it keeps each such replica's last report (ConsumerLag) and,
after every publish batch it applies and every report, decides whether the
queue holds its publishers. The decision goes to the group's other members
at once and again every `REFRESH_INTERVAL` while it holds; a member drops a
hold not repeated for `HOLD_EXPIRES`, and one whose leader's stream ended,
so a lost release or a dead leader does not hold publishers for good. A
replica not heard from for twice the groups' shortest election timeout (or
whose stream ended) no longer counts: a dead consumer replica does not hold
the queue.

Where publishers wait: a link on any replica's node is refused new credit
while that replica's queue holds (node/client/links.py); a publisher on a
node without a replica reaches the queue through a replica's node, which
holds back its confirms instead (node/vhosts/remote_queue.py), so the
publisher's own node stops granting credit at its unconfirmed bound.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Protocol

from metadata.feature_flags import QUORUM_PUBLISHER_FLOW
from queues.quorum import flow_records
from queues.quorum.publish_hold import ConsumerLag

if TYPE_CHECKING:
    import asyncio

    from metadata.projections import Projections
    from node.cluster.cluster import Cluster
    from queues.quorum.queue import QuorumQueue

    from .quorum_groups import QuorumQueues


log = logging.getLogger("warren.quorum")

CHANNEL = "quorum.flow"
REPORT_INTERVAL = 0.005  # seconds: a follower tells its leader what it applied at most this often
REFRESH_INTERVAL = 0.5  # seconds between repeats of a hold to the members (and checks for silent replicas)
HOLD_EXPIRES = 2.0  # seconds after which a member drops a hold its leader did not repeat


class FlowNode(Protocol):
    """What the flow uses of its node: the cluster's channels, the flag, a loop for timers."""

    loop: asyncio.AbstractEventLoop
    cluster: Cluster
    projections: Projections


class QuorumFlow:
    def __init__(self, queues: QuorumQueues, node: FlowNode, bound: int, silent_after: float) -> None:
        self.queues = queues
        self.node = node
        self.bound = bound  # quorum_consumer_lag_max: messages; 0 turns the hold off
        self.silent_after = silent_after
        self._lags: dict[str, ConsumerLag] = {}  # group (led here) -> its replicas' reports
        self._dirty: set[str] = set()  # groups (followed here) whose applied count is to be reported
        self._reporting: set[str] = set()  # groups whose leader last heard "consumers here"
        self._report_timer: Any = None
        self._told: dict[str, tuple[str, float]] = {}  # group held by its leader's word -> (leader, until)
        self._refresh_timer: Any = None
        self._attached = False

    @property
    def _cluster(self) -> Any:
        return self.node.cluster

    def attach(self) -> None:
        cluster = self._cluster
        cluster.rpc.channels[CHANNEL] = self._on_message
        cluster.transport.on_peer_down.append(self._peer_down)
        self._attached = True

    def close(self) -> None:
        for timer in (self._report_timer, self._refresh_timer):
            if timer is not None:
                timer.cancel()
        if not self._attached:
            return
        transport = self._cluster.transport
        if self._peer_down in transport.on_peer_down:
            transport.on_peer_down.remove(self._peer_down)

    def _peers_read_it(self) -> bool:
        """Nodes before 0.3.0 log every message on a channel they do not know: the
        reports start once every member supports (and has enabled) quorum_publisher_flow."""
        return QUORUM_PUBLISHER_FLOW in self.node.projections.feature_flags

    def counted(self, group: str) -> tuple[str, ...]:
        """The replicas of `group` (led here) whose reports can hold its publishers."""
        lag = self._lags.get(group)
        return () if lag is None else lag.nodes

    def forget(self, group: str) -> None:
        """The queue's replica here is gone (deleted, or this node left its group)."""
        self._lags.pop(group, None)
        self._told.pop(group, None)
        self._dirty.discard(group)
        self._reporting.discard(group)

    # -- a queue's replica tells us ------------------------------------------------------

    def applied(self, queue: QuorumQueue) -> None:
        """`queue` applied a publish batch or lost its last local consumer."""
        group = queue.group
        if self.queues.is_leader(group):
            lag = self._lags.get(group)
            if lag or queue.publish_hold.held:
                self._decide(queue, lag)
            return
        self._lags.pop(group, None)  # led here before: the reports went to the new leader
        if self.bound <= 0 or not (queue.links.consumers or group in self._reporting):
            return
        self._dirty.add(group)
        if self._report_timer is None:
            self._report_timer = self.node.loop.call_later(REPORT_INTERVAL, self._report)

    def _report(self) -> None:
        self._report_timer = None
        dirty, self._dirty = self._dirty, set()
        if not self._peers_read_it():
            return
        by_leader: dict[str, list[tuple[str, int, int, bool]]] = {}
        for group in dirty:
            queue = self.queues.queues.get(group)
            leader = self.queues.leader_of(group)
            if queue is None or leader is None or leader == self.queues.node_id:
                continue
            consumers = bool(queue.links.consumers)
            state = queue.state
            by_leader.setdefault(leader, []).append((group, state.last_index, state.counters.enqueued, consumers))
            if consumers:
                self._reporting.add(group)
            else:
                self._reporting.discard(group)
        self._send(by_leader, flow_records.encode_applied)

    def _send(self, by_peer: dict[str, list], encode: Any) -> None:
        transport = self._cluster.transport
        step = flow_records.MAX_ENTRIES
        for peer, entries in by_peer.items():
            for i in range(0, len(entries), step):
                transport.send_node_message(peer, CHANNEL, encode(entries[i:i + step]))

    # -- the leader's side ---------------------------------------------------------------

    def _decide(self, queue: QuorumQueue, lag: ConsumerLag | None) -> None:
        hold = queue.publish_hold
        held = (lag is not None and self.queues.is_leader(queue.group)
                and lag.holds(queue.state.counters.enqueued, time.monotonic(), hold.held))  # fmt: skip
        if hold.set(held):
            log.debug("quorum queue %s %s its publishers", queue.name, "holds" if held else "releases")
            self._tell_members(queue, held)
            if held:
                self._arm_refresh()

    def _tell_members(self, queue: QuorumQueue, held: bool) -> None:
        if self._peers_read_it():
            me = self.queues.node_id
            self._send({m: [(queue.group, held)] for m in queue.members if m != me}, flow_records.encode_hold)

    def _arm_refresh(self) -> None:
        if self._refresh_timer is None:
            self._refresh_timer = self.node.loop.call_later(REFRESH_INTERVAL, self._refresh)

    def _refresh(self) -> None:
        """While anything is held: leaders check again (a replica gone silent,
        leadership lost) and repeat their holds; members drop stale ones."""
        self._refresh_timer = None
        now = time.monotonic()
        for group, (_leader, until) in list(self._told.items()):
            if now > until:
                self._release_told(group)
        by_member: dict[str, list[tuple[str, bool]]] = {}
        me = self.queues.node_id
        for group, queue in self.queues.queues.items():
            if not queue.publish_hold.held or group in self._told:
                continue
            self._decide(queue, self._lags.get(group))
            if queue.publish_hold.held:
                for m in queue.members:
                    if m != me:
                        by_member.setdefault(m, []).append((group, True))
        if by_member and self._peers_read_it():
            self._send(by_member, flow_records.encode_hold)
        if self._told or any(q.publish_hold.held for q in self.queues.queues.values()):
            self._arm_refresh()

    def _release_told(self, group: str) -> None:
        self._told.pop(group, None)
        queue = self.queues.queues.get(group)
        if queue is not None and not self.queues.is_leader(group):
            queue.publish_hold.set(False)

    # -- messages from peers -------------------------------------------------------------

    def _on_message(self, peer: str, payload: bytes) -> None:
        try:
            kind, entries = flow_records.decode(payload)
        except ValueError as e:
            log.warning("dropped a %s message from %s: %s", CHANNEL, peer, e)
            return
        if kind == flow_records.APPLIED:
            self._reports(peer, entries)
        else:
            self._holds(peer, entries)

    def _reports(self, peer: str, entries: list) -> None:
        now = time.monotonic()
        for group, _index, applied, consumers in entries:
            queue = self.queues.queues.get(group)
            if queue is None or peer not in queue.members or not self.queues.is_leader(group):
                continue
            lag = self._lags.get(group)
            if lag is None:
                if not consumers:
                    continue
                lag = self._lags[group] = ConsumerLag(self.bound, self.silent_after)
            lag.report(peer, applied, consumers, now)
            self._decide(queue, lag)
            if not lag:
                del self._lags[group]

    def _holds(self, peer: str, entries: list) -> None:
        until = time.monotonic() + HOLD_EXPIRES
        for group, held in entries:
            queue = self.queues.queues.get(group)
            if queue is None or self.queues.leader_of(group) != peer or self.queues.is_leader(group):
                continue
            if held:
                self._told[group] = (peer, until)
                queue.publish_hold.set(True)
                self._arm_refresh()
            else:
                self._release_told(group)

    def _peer_down(self, peer: str) -> None:
        for lag in self._lags.values():
            lag.forget(peer)
        for group, (leader, _until) in list(self._told.items()):
            if leader == peer:
                self._release_told(group)
        for group, queue in self.queues.queues.items():  # decide again at once, not at the next refresh
            if queue.publish_hold.held and group not in self._told:
                self._decide(queue, self._lags.get(group))
