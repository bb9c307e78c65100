"""This node's side of its quorum queues: one Raft group per queue it
replicates (queues/quorum/queue.py), on the cluster's transport and log.

Membership (`add_member`, `delete_member`, and `grow`/`shrink` over every
quorum queue) runs on the queue group's leader: Raft changes the
group's membership (one node at a time, committed by the group), then the
metadata records the new replica set, and each node starts or drops its copy
as that applies (node/vhosts/local_queues.py); an added member catches up from the
leader's log or snapshot. A node asked to change a queue it does not lead
forwards the request to the leader it knows.

The group of a queue is named "qq." + a digest of (vhost, name), so the name
fits any journal key and a queue declared again after a deletion gets a
fresh log only because the old one was dropped with it. The leader of a
group also watches the transport: when a peer's stream ends it asks the
machine to detach the consumers that lived on that node, so their
unsettled messages go back to the queue and are redelivered, marked so.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import time
from typing import TYPE_CHECKING, Any, Protocol

from metadata import commands as mc
from metadata.feature_flags import (
    QUORUM_CONSUMER_TIMEOUT,
    QUORUM_QUEUE_PRIORITIES,
    QUORUM_QUEUE_PUBLISH_BATCH,
    QUORUM_TICK_CLOCK,
)
from node.cluster.cluster import MembershipError
from node.vhosts.metadata_store import new_key
from queues.quorum.queue import COMPACTION_BYTES, COMPACTION_ENTRIES, QuorumQueue
from routing.errors import NotFound

from .quorum_flow import QuorumFlow

if TYPE_CHECKING:
    import asyncio

    from metadata.projections import Projections
    from node.cluster.cluster import Cluster
    from node.vhosts.metadata_store import MetadataStore
    from node.vhosts.streams import StreamQueues

log = logging.getLogger("warren.quorum")

MEMBER_CALL = "quorum.member"
# Longer election timeouts than the metadata group's: with hundreds of groups on a busy
# 2-core node, heartbeats of 100 ms groups ticked every 100 ms slip past 0.5-1 s and set off
# elections that feed on themselves (docs/benchmarks.md); 2-4 s is Ra's order of magnitude.
# Entries and commit indexes go out as they happen (appendEntriesUseBatch=False), and the
# node's one liveness message per peer stands for every group's heartbeat
# (node/cluster/liveness.py): a group's own heartbeat, every 1.5 s, only carries what a
# follower that fell behind needs to catch up.
QUORUM_TIMEOUTS = {"raftMinTimeout": 2.0, "raftMaxTimeout": 4.0, "leaderFallbackTimeout": 6.0,
                   "connectionTimeout": 4.0, "heartbeat_period": 1.5}  # fmt: skip
BODIES_CALL = "quorum.bodies"  # a replica that installed a snapshot fetches the bodies it lacks
BODIES_REPLY_BYTES = 512 * 1024  # per reply, so that it fits a node message
SWEEP_INTERVAL = 2.0  # seconds between checks for consumers whose node is gone and re-sends of held dead letters


def group_name(vhost: str, name: str) -> str:
    return "qq." + hashlib.sha256(f"{vhost}\x00{name}".encode()).hexdigest()[:24]


class GroupPlacement(Protocol):
    """The leader locator (node/cluster/placement.py): a new group's chosen leader campaigns first."""

    def opened(self, group: str, leader: str) -> None: ...


class HeldGroups(Protocol):
    """Maintenance mode (node/cluster/maintenance.py): a drained node keeps new groups from leading."""

    def held_group_opened(self) -> None: ...


class QuorumNode(Protocol):
    """What the quorum queues use of their node (node/broker.py provides it).
    Read at each use: `cluster`, `metadata` and `loop` exist once the node has started."""

    node_id: str
    loop: asyncio.AbstractEventLoop
    cluster: Cluster
    metadata: MetadataStore
    projections: Projections
    streams: StreamQueues  # membership changes of a stream go there
    placement: GroupPlacement
    maintenance: HeldGroups

    def background(self, coro: Any, what: str) -> None: ...


class QuorumQueues:
    def __init__(self, node: QuorumNode, consumer_lag_max: int = 0, snapshot_entries: int = COMPACTION_ENTRIES,
                 consumer_lease: int = 0, consumer_timeout: int = 0):  # fmt: skip
        """The four numbers are settings quorum_consumer_lag_max, quorum_snapshot_entries,
        quorum_consumer_lease and consumer_timeout (node/config.py)."""
        self.node = node
        self._snapshot_entries = snapshot_entries
        self._consumer_lease = consumer_lease
        self._consumer_timeout = consumer_timeout
        self.queues: dict[str, QuorumQueue] = {}  # group -> queue
        self.incarnation = ""
        self._sweeper: Any = None
        # publishers held while a replica with consumers lags (node/vhosts/quorum_flow.py); a
        # replica silent for twice the shortest election timeout no longer counts
        self.flow = QuorumFlow(self, node, consumer_lag_max, 2 * QUORUM_TIMEOUTS["raftMinTimeout"])

    @property
    def node_id(self) -> str:
        return self.node.node_id

    @property
    def _cluster(self) -> Any:
        return self.node.cluster

    def attach(self) -> None:
        """Once the cluster runs: watch peers, serve forwarded membership changes."""
        cluster = self._cluster
        self.incarnation = self.incarnation or f"{cluster.node_id}#{time.time_ns()}"
        cluster.transport.on_peer_down.append(self._peer_down)
        cluster.calls[MEMBER_CALL] = self._serve_member_call
        cluster.calls[BODIES_CALL] = self._serve_bodies
        self.flow.attach()
        self._sweeper = self.node.loop.call_later(SWEEP_INTERVAL, self._sweep)

    def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        self.flow.close()

    def _sweep(self) -> None:
        """Consumers the queues still count but whose node is gone: a peer-down
        seen while no member led (the leader itself paused, say), this node's
        own consumers from before a restart, or those of a member taken off the
        group (its replica stopped, so nothing there will ever settle or return
        what they hold; consumers always attach through a member's replica)."""
        self._sweeper = self.node.loop.call_later(SWEEP_INTERVAL, self._sweep)
        cluster = self._cluster
        for group, queue in list(self.queues.items()):
            queue.forget_ghosts()
            queue.resend_dead_letters()  # at-least-once: a new leader's, or one no route took yet
            queue.arm_ticks()  # a new leader's TTL and consumer timeout ticks, the queue idle
            for incarnation in queue.consumer_nodes():
                member = incarnation.split("#")[0]
                if member == cluster.node_id:
                    if incarnation != self.incarnation:
                        queue.consumers_gone(incarnation)
                elif self.is_leader(group) and (not cluster.is_reachable(member)
                                                or member not in cluster.groups[group].peers):  # fmt: skip
                    queue.consumers_gone(incarnation)

    def start(self, vhost: Any, record: Any, arguments: dict) -> QuorumQueue:
        cluster = self._cluster
        if not self.incarnation:  # a queue restored while the cluster starts
            self.incarnation = f"{cluster.node_id}#{time.time_ns()}"
        group = group_name(vhost.name, record.name)
        queue = QuorumQueue(vhost.name, record.name, arguments, tuple(record.replicas), host=vhost, quorum_host=self,
                            group=group)  # fmt: skip
        self.queues[group] = queue
        queue.on_applied = self.flow.applied
        entries = self._snapshot_entries
        cluster.open_group(group, list(record.replicas), queue, appendEntriesUseBatch=False,
                           logCompactionMinEntries=entries, compaction_bytes=COMPACTION_BYTES,
                           **QUORUM_TIMEOUTS)  # fmt: skip
        self.node.placement.opened(group, record.leader)  # a new group's chosen leader campaigns first
        self.node.maintenance.held_group_opened()
        return queue

    def stop(self, queue: QuorumQueue) -> None:
        """The queue was deleted: its group and everything it stored go."""
        if self.queues.get(queue.group) is queue:
            del self.queues[queue.group]
            self.flow.forget(queue.group)
            self._cluster.close_group(queue.group, drop=True)

    # -- membership ------------------------------------------------------------------------

    async def change_member(self, vhost: str, name: str, member: str, add: bool) -> list[str]:
        """Add `member` to (or remove it from) quorum queue `name`'s replicas; returns the new members."""
        record = self.node.metadata.state.queue(vhost, name)
        if record is None:
            raise NotFound(f"no queue '{name}' in vhost '{vhost}'")
        if record.type == "stream":  # replicated streams change members through the metadata alone
            return await self.node.streams.change_member(vhost, name, member, add)
        if record.type != "quorum":
            raise MembershipError(f"queue '{name}' in vhost '{vhost}' is not a quorum queue", 400)
        if add and member not in self.node.metadata.state.members:
            raise MembershipError(f"{member} is not a cluster member", 400)
        members = list(record.replicas)
        if (member in members) == add:
            return members  # done already
        group = group_name(vhost, name)
        leader = self.leader_of(group) if group in self._cluster.groups else None
        if leader is None:
            leader = record.leader if record.leader != self.node_id else next(
                (m for m in members if m != self.node_id), self.node_id)
        if leader != self.node_id:
            result = await self._cluster.call(leader, MEMBER_CALL, {"vhost": vhost, "name": name, "node": member,
                                                                    "add": add}, timeout=30)  # fmt: skip
            return list(result.get("members", []))
        if not add and member == self.node_id:
            raise MembershipError(f"{member} leads queue '{name}': remove it through another member once it "
                                  "no longer leads", 409)  # fmt: skip
        if not add and len(members) == 1:
            raise MembershipError(f"queue '{name}' would have no replica left", 409)
        new = [*members, member] if add else [m for m in members if m != member]
        if add and len(members) == 1:
            return await self._grow_single(vhost, name, group, members, new, member)
        await self._cluster.change_group_members(group, "add" if add else "rem", member, timeout=15)
        await self.node.metadata.run(mc.SetQueueReplicas(new_key(), vhost, name, tuple(new)))
        return new

    async def _grow_single(self, vhost: str, name: str, group: str, members: list[str], new: list[str],
                           member: str) -> list[str]:  # fmt: skip
        """A one-member group counts the new member at once (pysyncobj applies a membership change
        when it appends it), so the change commits only with the new member's answer: the metadata
        names it first, which opens the group there, and is put back if the change does not commit."""
        await self.node.metadata.run(mc.SetQueueReplicas(new_key(), vhost, name, tuple(new)))
        try:
            await self._cluster.change_group_members(group, "add", member, timeout=15)
        except Exception:
            await self.node.metadata.run(mc.SetQueueReplicas(new_key(), vhost, name, tuple(members)))
            raise
        return new

    async def _serve_member_call(self, peer: str, args: dict) -> dict:
        members = await self.change_member(str(args["vhost"]), str(args["name"]), str(args["node"]),
                                           bool(args["add"]))  # fmt: skip
        return {"members": members}

    async def grow(self, member: str) -> list[dict]:
        """Add `member` to every quorum queue that lacks it."""
        return await self._each(member, add=True)

    async def shrink(self, member: str) -> list[dict]:
        """Remove `member` from every quorum queue that has it (and another replica)."""
        return await self._each(member, add=False)

    async def _each(self, member: str, add: bool) -> list[dict]:
        out = []
        for vh in list(self.node.metadata.state.vhosts.values()):
            for q in list(vh.queues.values()):
                if q.type not in ("quorum", "stream") or (member in q.replicas) == add:
                    continue
                try:
                    members = await self.change_member(vh.name, q.name, member, add)
                    out.append({"vhost": vh.name, "name": q.name, "members": members, "ok": True})
                except Exception as e:
                    out.append({"vhost": vh.name, "name": q.name, "ok": False, "error": str(e)})
        return out

    def _peer_down(self, peer: str) -> None:
        for group, queue in self.queues.items():
            if self.is_leader(group):
                queue.consumers_down(peer)

    # -- QuorumHost ---------------------------------------------------------------------

    def submit(self, group: str, record: Any, callback: Any = None) -> bool:
        return self._cluster.submit(group, record, callback)

    def packs_publishes(self) -> bool:
        return QUORUM_QUEUE_PUBLISH_BATCH in self.node.projections.feature_flags

    def is_leader(self, group: str) -> bool:
        g = self._cluster.groups.get(group)
        return g is not None and g.is_leader

    def leader_of(self, group: str) -> str | None:
        g = self._cluster.groups.get(group)
        return None if g is None else g.leader_id

    def put_blob(self, group: str, key: bytes, value: bytes) -> None:
        self._cluster.log.put_blob(group, key, value)

    def put_blobs(self, group: str, items: list[tuple[bytes, bytes]]) -> None:
        self._cluster.log.put_blobs(group, items)

    def get_blob(self, group: str, key: bytes) -> bytes | None:
        return self._cluster.log.get_blob(group, key)

    def get_blobs_from(self, group: str, key: bytes, count: int) -> list[tuple[bytes, bytes]]:
        return self._cluster.log.blobs_from(group, key, count, len(key))

    def delete_blobs(self, group: str, below: bytes | None = None) -> None:
        self._cluster.log.delete_blobs(group, below)

    def sync(self) -> None:
        self._cluster.log.flush()

    def after_durable(self, fn: Any) -> None:
        self._cluster.log.after_durable(fn)

    def call_soon(self, fn: Any) -> None:
        self.node.loop.call_soon(fn)

    def priorities(self) -> bool:
        return self.node.metadata.state.flag_enabled(QUORUM_QUEUE_PRIORITIES)

    def consumer_lease(self) -> int:
        return self._consumer_lease

    def consumer_timeout(self) -> int | None:
        if not self.node.metadata.state.flag_enabled(QUORUM_CONSUMER_TIMEOUT):
            return None
        return max(0, self._consumer_timeout)

    def tick_clock(self) -> bool:
        return self.node.metadata.state.flag_enabled(QUORUM_TICK_CLOCK)

    def fetch_bodies(self, group: str, mids: list[int], callback: Any) -> None:
        self.node.background(self._fetch(group, mids, callback), f"fetching message bodies of {group}")

    async def _fetch(self, group: str, mids: list[int], callback: Any) -> None:
        found: dict[int, bytes] = {}
        try:
            queue = self.queues.get(group)
            members = [self.leader_of(group), *(queue.members if queue is not None else ())]
            for peer in dict.fromkeys(m for m in members if m and m != self.node_id):
                while wanted := [m for m in mids if m not in found]:
                    try:
                        reply = await self._cluster.call(peer, BODIES_CALL, {"group": group, "ids": wanted},
                                                         timeout=10)  # fmt: skip
                    except Exception as e:
                        log.warning("%s could not send bodies of %s: %s", peer, group, e)
                        break
                    got = reply.get("bodies", [])
                    for mid, data in got:
                        found[int(mid)] = base64.b64decode(data)
                    if not got:
                        break  # this peer lacks the rest: ask the next
        finally:
            callback(found, mids)

    async def _serve_bodies(self, peer: str, args: dict) -> dict:
        queue = self.queues.get(str(args.get("group")))
        bodies, size = [], 0
        if queue is not None:
            for mid in args.get("ids", []):
                value = queue.body(int(mid))
                if value is not None:
                    bodies.append([int(mid), base64.b64encode(value).decode()])
                    size += len(value)
                    if size > BODIES_REPLY_BYTES:
                        break  # the asker comes back for the rest
        return {"bodies": bodies}
