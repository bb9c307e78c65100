"""Failover of replicated streams: a replica whose leader's node has been
unreachable for MISSES checks in a row elects a new one.

It stops (fences) the other live replicas of the epoch (queues/stream/replica.py
`stop`) and collects their logs' (log epoch, end); a replica that still
reaches the leader refuses (so one broken link does not stall a working
leader). With a majority of the replicas answering, the one with the newest log epoch and then the longest
log (node id breaking a tie) must lead, since every committed chunk is on
a majority and so on at least one of them, and the fenced replicas add
nothing meanwhile. If that is this node, it proposes metadata.stream_elect
at the current epoch: the metadata applies one such proposal per epoch, so
two candidates never both win. The others then follow the new leader and
truncate what it does not have. Of replicas with the same log, one in
maintenance (drained) is passed over. A replica stopped for an election
that has not come after FENCE_S, and that reaches its leader, proposes that
leader for the next epoch instead (`_reelect`): its fence holds until a newer
epoch, since a late election could otherwise be applied after the old leader
committed chunks with it.

A leader can also lose its log: a node wiped and back at the same address
(forgotten while no majority of the stream's other replicas could elect
without it, so the metadata still names it). A replica's fetch then names a
committed end past the leader's log, which a leader's own log always holds
(queues/stream/leader.py): it holds its publishes, answers no fetch (that
would cut the replicas' logs to its own) and, here, asks the other replicas
to stop; once *every* one answers (a committed chunk was on a majority, so
on one of them, since its own copy is gone) it proposes the one with the
best log as the next epoch's leader and follows it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from metadata import commands as mc

if TYPE_CHECKING:
    from node.cluster.cluster import Cluster
    from node.vhosts.metadata_store import MetadataStore
    from node.vhosts.stream_replication import StreamRoles

__all__ = ["StreamFailover"]

log = logging.getLogger("warren.stream")

CHECK_S = 1.0
MISSES = 3  # checks in a row without a stream to the leader's node
STOP_WAIT_S = 2.0


class DrainedNodes(Protocol):
    """node/cluster/placement.py: nodes in maintenance are the last choice for a new leader."""

    def nodes_in_maintenance(self) -> set[str]: ...


class FailoverNode(Protocol):
    """What the failover uses of its node; read at each check (the cluster exists once it started)."""

    node_id: str
    loop: asyncio.AbstractEventLoop
    cluster: Cluster
    metadata: MetadataStore
    placement: DrainedNodes

    def background(self, coro: Any, what: str) -> None: ...


class StreamFailover:
    def __init__(self, node: FailoverNode, roles: StreamRoles) -> None:
        self.node = node
        self.roles = roles
        self._misses: dict[tuple[str, str], int] = {}
        self._electing: set[tuple[str, str]] = set()
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        if self._timer is None:
            self._timer = self.node.loop.call_later(CHECK_S, self._check)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check(self) -> None:
        self._timer = self.node.loop.call_later(CHECK_S, self._check)
        connected = self.node.cluster.transport.is_connected
        for key in list(self.roles.stale):
            if key not in self._electing:
                self._electing.add(key)
                self.node.background(self._elect(self._replace_stale, *key), f"replacing this node as stream {key[1]!r}'s leader")
        for key, replica in list(self.roles.replicas.items()):
            if connected(replica.leader):
                self._misses.pop(key, None)
                if replica.fence_overdue() and key not in self._electing:
                    self._electing.add(key)
                    self.node.background(self._elect(self._reelect, *key), f"re-electing stream {key[1]!r}'s leader")
                continue
            self._misses[key] = misses = self._misses.get(key, 0) + 1
            if misses >= MISSES and key not in self._electing:
                self._electing.add(key)
                self.node.background(self._elect(self._run, *key), f"electing a leader for stream {key[1]!r}")

    async def _elect(self, election: Callable[[str, str], Awaitable[None]], vhost: str, name: str) -> None:
        try:
            await election(vhost, name)
        finally:
            self._electing.discard((vhost, name))

    async def _reelect(self, vhost: str, name: str) -> None:
        """This node's replica was stopped for an election that has not come (queues/stream/replica.py
        `fence_overdue`) and reaches its leader: that leader leads the next epoch, unless the
        election is applied first. Either way the replica then follows a newer epoch."""
        record = self.roles.record(vhost, name)
        replica = self.roles.replicas.get((vhost, name))
        if record is None or replica is None or replica.epoch != record.epoch or not replica.fence_overdue():
            return
        log.warning("stream %s/%s: stopped for an election at epoch %d that has not come; re-electing %s",
                    vhost, name, record.epoch, record.leader)  # fmt: skip
        await self.node.metadata.run(mc.StreamElect(f"stream-elect/{uuid.uuid4()}", vhost, name, record.epoch,
                                                    record.leader))  # fmt: skip

    async def _replace_stale(self, vhost: str, name: str) -> None:
        record = self.roles.record(vhost, name)
        me = self.node.node_id
        if record is None or record.leader != me:
            self.roles.stale.discard((vhost, name))
            return
        others = [r for r in record.replicas if r != me]
        logs = await self._stopped_logs(others, vhost, name, record.epoch)
        if len(logs) < len(others):
            log.warning("stream %s/%s: this node's log was lost and only %d of the %d other replicas answer:"
                        " no election", vhost, name, len(logs), len(others))  # fmt: skip
            return  # tried again at the next check
        best = _choose(logs, self.node.placement.nodes_in_maintenance())
        log.warning("stream %s/%s: this node's log was lost; %s leads epoch %d (logs %s)", vhost, name, best,
                    record.epoch + 1, logs)  # fmt: skip
        await self.node.metadata.run(mc.StreamElect(f"stream-elect/{uuid.uuid4()}", vhost, name, record.epoch, best))
        self.roles.stale.discard((vhost, name))

    async def _stopped_logs(self, others: list[str], vhost: str, name: str, epoch: int) -> dict[str, tuple[int, int]]:
        """Asks `others` to stop for `epoch`: the (log epoch, end) of each that answered with a copy."""
        answers = await asyncio.gather(*(self.roles.ask_stop(r, vhost, name, epoch, STOP_WAIT_S) for r in others))
        return {r: a for r, a in zip(others, answers, strict=True) if a is not None and a[1] >= 0}

    async def _run(self, vhost: str, name: str) -> None:
        record = self.roles.record(vhost, name)
        replica = self.roles.replicas.get((vhost, name))
        me = self.node.node_id
        if record is None or replica is None or replica.epoch != record.epoch or record.leader == me:
            return
        others = [r for r in record.replicas if r not in (me, record.leader)]
        logs = await self._stopped_logs(others, vhost, name, record.epoch)
        if len(logs) + 1 < len(record.replicas) // 2 + 1:
            log.warning("stream %s/%s: leader %s unreachable, and only %d of %d replicas answer: no election",
                        vhost, name, record.leader, len(logs), len(record.replicas))  # fmt: skip
            return
        logs[me] = replica.stop(record.epoch)
        best = _choose(logs, self.node.placement.nodes_in_maintenance())
        if best != me:
            return  # it elects itself when it sees the leader gone (it is fenced meanwhile)
        log.info("stream %s/%s: leader %s unreachable; %s leads epoch %d (logs %s)", vhost, name, record.leader, me,
                 record.epoch + 1, logs)  # fmt: skip
        await self.node.metadata.run(mc.StreamElect(f"stream-elect/{uuid.uuid4()}", vhost, name, record.epoch, me))


def _choose(logs: dict[str, tuple[int, int]], in_maintenance: set[str]) -> str:
    """The node with the newest, longest log (the greatest id of those alike); of those
    alike, one serving rather than one in maintenance. A node in maintenance leads only
    when it alone has that log: a shorter one might lack a committed chunk."""
    newest = max(logs.values())
    alike = [n for n in logs if logs[n] == newest]
    return max([n for n in alike if n not in in_maintenance] or alike)
