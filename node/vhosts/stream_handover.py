"""Handing this node's stream leaderships to other replicas before it stops
(maintenance mode's drain, node/cluster/maintenance.py).

For each replicated stream this node leads, all streams at once:
  1. it waits until a live replica outside maintenance is in sync (its durable
     end, from its fetches, has reached the committed end) while publishes flow;
  2. the leader holds its log still (queues/stream/queue.py `hold`: publishes
     wait, the write in flight lands) and waits, at most HOLD_S, until such a
     replica has the whole log on disk and the committed end has reached it:
     everything the leader wrote is then on the new leader, and every
     publisher of it was confirmed;
  3. it proposes metadata.stream_elect for that replica at the current epoch,
     the fenced election a failover uses: the epoch moves on, this node
     becomes a replica of the new leader (node/vhosts/stream_replication.py),
     and the publishes that waited are released (their publishers send them
     again, through the proxy, to the new leader).
A stream whose replicas do not catch up in time, or whose election is
refused, goes on as it was: it is reported as still led here. A stream with
one replica, or declared before flag stream_replication (one copy, on the
node that declared it), has nobody to take it (`streams_no_successor`).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from metadata import commands as mc
from node.vhosts.metadata_store import MetadataRefused, MetadataUnavailable
from queues.stream.queue import StreamQueue

if TYPE_CHECKING:
    from node.cluster.cluster import Cluster
    from node.vhosts.metadata_store import MetadataStore
    from node.vhosts.stream_replication import StreamRoles
    from node.vhosts.vhost import VHost

__all__ = ["StreamHandOver", "StreamsHandedOver"]

log = logging.getLogger("warren.stream")

CHECK_S = 0.01  # how often a held stream looks at its replicas' ends
HOLD_S = 5.0  # how long publishes may wait for a replica to catch up with the held log


@dataclass
class StreamsHandedOver:
    moved: dict[tuple[str, str], str] = field(default_factory=dict)  # (vhost, name) -> its new leader
    kept: list[tuple[str, str]] = field(default_factory=list)  # still led here
    alone: list[tuple[str, str]] = field(default_factory=list)  # one replica: nobody to hand it to

    def as_dict(self) -> dict:
        return {"streams_moved": [{"vhost": v, "name": n, "new_leader": leader}
                                  for (v, n), leader in sorted(self.moved.items())],
                "streams_still_leading": [{"vhost": v, "name": n} for v, n in sorted(self.kept)],
                "streams_no_successor": [{"vhost": v, "name": n} for v, n in self.alone]}  # fmt: skip


class HandOverNode(Protocol):
    """What the hand-over uses of its node (maintenance mode's drain, node/cluster/maintenance.py)."""

    node_id: str
    cluster: Cluster
    metadata: MetadataStore
    vhosts: dict[str, VHost]


class StreamHandOver:
    def __init__(self, node: HandOverNode, roles: StreamRoles) -> None:
        self.node = node
        self.roles = roles

    def streams_here(self) -> list[StreamQueue]:
        """The streams whose writing copy is on this node: those it leads, and those declared
        before flag stream_replication (no role: the node's only copy)."""
        return [queue for vhost in list(self.node.vhosts.values()) for queue in list(vhost.queues.values())
                if isinstance(queue, StreamQueue)]  # fmt: skip

    async def hand_over(self, timeout: float, avoid: set[str]) -> StreamsHandedOver:
        out = StreamsHandedOver()
        here = self.streams_here()
        queues = [q for q in here if q.role is not None and len(q.role.replicas) > 1]
        out.alone = sorted((q.vhost, q.name) for q in here if q not in queues)
        results = await asyncio.gather(*(self._move(q, timeout, avoid) for q in queues))
        for queue, leader in zip(queues, results, strict=True):
            key = (queue.vhost, queue.name)
            if leader is None:
                out.kept.append(key)
            else:
                out.moved[key] = leader
        return out

    async def _move(self, queue: StreamQueue, timeout: float, avoid: set[str]) -> str | None:
        """The new leader's id, or None if the stream is still led here."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        # a replica far behind (back from a partition, say) copies while publishes flow
        if not await self._until(lambda: self._candidates(queue, avoid, queue.committed_end), deadline, queue):
            log.warning("stream %s/%s: no replica in sync in %.1fs, still led here", queue.vhost, queue.name, timeout)
            return None
        queue.hold()
        try:
            held_until = min(deadline, loop.time() + HOLD_S)
            if not await self._until(lambda: self._in_sync(queue, avoid), held_until, queue):
                log.warning("stream %s/%s: no replica caught up with the held log in %.1fs, still led here",
                            queue.vhost, queue.name, HOLD_S)  # fmt: skip
                return None
            return await self._elect(queue, self._in_sync(queue, avoid), deadline)
        finally:
            vhost = self.node.vhosts.get(queue.vhost)
            if vhost is not None and vhost.queues.get(queue.name) is queue:
                queue.release()  # still the leader here: publishes flow again

    async def _until(self, ready: Any, deadline: float, queue: StreamQueue) -> bool:
        loop = asyncio.get_running_loop()
        while not ready():
            if loop.time() >= deadline or queue.deleted:
                return False
            await asyncio.sleep(CHECK_S)
        return True

    async def _elect(self, queue: StreamQueue, target: str, deadline: float) -> str | None:
        """stream_elect for `target` at the current epoch, again while the metadata group is
        unavailable (its own leadership may be moving off this node at the same time)."""
        loop = asyncio.get_running_loop()
        epoch = queue.role.epoch
        command = mc.StreamElect(f"stream-handover/{uuid.uuid4()}", queue.vhost, queue.name, epoch, target)
        while True:
            try:
                await asyncio.wait_for(self.node.metadata.run(command), max(deadline - loop.time(), 1.0))
                break
            except (MetadataRefused, MetadataUnavailable, TimeoutError) as e:
                record = self.roles.record(queue.vhost, queue.name)
                if record is not None and record.epoch > epoch:  # it did apply, or a failover came first
                    break
                if isinstance(e, MetadataRefused) or loop.time() >= deadline:
                    log.warning("stream %s/%s: leadership not handed over: %s", queue.vhost, queue.name, e)
                    return None
                await asyncio.sleep(CHECK_S)
        record = self.roles.record(queue.vhost, queue.name)
        if record is None or record.leader == self.node.node_id:
            return None
        log.info("stream %s/%s: leadership handed to %s (epoch %d)", queue.vhost, queue.name, record.leader,
                 record.epoch)  # fmt: skip
        return record.leader

    def _candidates(self, queue: StreamQueue, avoid: set[str], end: int) -> list[str]:
        """Live replicas whose durable end is `end` (outside `avoid` unless only those are)."""
        role = queue.role
        connected = self.node.cluster.transport.is_connected
        live = [r for r in role.replicas if r != role.me and connected(r) and role.ends.get(r, -1) >= end]
        return [r for r in live if r not in avoid] or live

    def _in_sync(self, queue: StreamQueue, avoid: set[str]) -> str | None:
        """A live replica with all of the held log on disk, once it is all committed."""
        end = queue.log.next_offset
        if queue.writing or queue.committed_end < end:
            return None
        candidates = self._candidates(queue, avoid, end)
        return min(candidates) if candidates else None
