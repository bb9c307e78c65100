"""Handing this node's stream leaderships to other replicas before it stops
(maintenance mode's drain, node/cluster/maintenance.py).

For each replicated stream this node leads, one at a time per stream and all
streams at once:
  1. the leader holds its log still (queues/stream/queue.py `hold`: publishes
     wait, the write in flight lands);
  2. it waits until a live replica outside maintenance has the whole log on
     disk (its durable end, from its fetches, equals the leader's end), and the
     committed end has reached it: everything the leader wrote is then on the
     new leader, and every publisher of it was confirmed;
  3. it proposes metadata.stream_elect for that replica at the current epoch,
     the fenced election a failover uses: the epoch moves on, this node
     becomes a replica of the new leader (node/vhosts/stream_replication.py),
     and the publishes that waited are released (their publishers send them
     again, through the proxy, to the new leader).
A stream whose replicas do not catch up by the deadline, or whose election
is refused (a failover moved the epoch meanwhile), goes on as it was: it is
reported as still led here.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from metadata import commands as mc
from node.vhosts.metadata_store import MetadataRefused, MetadataUnavailable
from queues.stream.queue import StreamQueue

if TYPE_CHECKING:
    from node.broker import Broker
    from node.vhosts.stream_replication import StreamRoles

__all__ = ["StreamHandOver", "StreamsHandedOver"]

log = logging.getLogger("warren.stream")

CHECK_S = 0.01  # how often a held stream looks at its replicas' ends


@dataclass
class StreamsHandedOver:
    moved: dict[tuple[str, str], str] = field(default_factory=dict)  # (vhost, name) -> its new leader
    kept: list[tuple[str, str]] = field(default_factory=list)  # still led here

    def as_dict(self) -> dict:
        return {"streams_moved": [{"vhost": v, "name": n, "new_leader": leader}
                                  for (v, n), leader in sorted(self.moved.items())],
                "streams_still_leading": [{"vhost": v, "name": n} for v, n in sorted(self.kept)]}  # fmt: skip


class StreamHandOver:
    def __init__(self, broker: Broker, roles: StreamRoles) -> None:
        self.broker = broker
        self.roles = roles

    def leading(self) -> list[StreamQueue]:
        """The replicated streams this node leads, with other replicas to take them."""
        out = []
        for vhost in list(self.broker.vhosts.values()):
            for queue in list(vhost.queues.values()):
                if isinstance(queue, StreamQueue) and queue.role is not None and len(queue.role.replicas) > 1:
                    out.append(queue)
        return out

    async def hand_over(self, timeout: float, avoid: set[str]) -> StreamsHandedOver:
        out = StreamsHandedOver()
        queues = self.leading()
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
        queue.hold()
        try:
            target = None
            while target is None and loop.time() < deadline and not queue.deleted:
                target = self._in_sync(queue, avoid)
                if target is None:
                    await asyncio.sleep(CHECK_S)
            if target is None or queue.deleted:
                log.warning("stream %s/%s: no replica caught up in %.1fs, still led here", queue.vhost, queue.name,
                            timeout)  # fmt: skip
                return None
            epoch = queue.role.epoch
            command = mc.StreamElect(f"stream-handover/{uuid.uuid4()}", queue.vhost, queue.name, epoch, target)
            await asyncio.wait_for(self.broker.metadata.run(command), max(deadline - loop.time(), 1.0))
            log.info("stream %s/%s: leadership handed to %s (epoch %d)", queue.vhost, queue.name, target, epoch + 1)
            return target
        except (MetadataRefused, MetadataUnavailable, TimeoutError) as e:
            log.warning("stream %s/%s: leadership not handed over: %s", queue.vhost, queue.name, e)
            return None
        finally:
            if self.broker.vhosts.get(queue.vhost) is not None and \
                    self.broker.vhosts[queue.vhost].queues.get(queue.name) is queue:  # fmt: skip
                queue.release()  # still the leader here: publishes flow again

    def _in_sync(self, queue: StreamQueue, avoid: set[str]) -> str | None:
        """A live replica (outside `avoid` unless only those are) with all of the
        held log on disk, once it is all committed; the most caught-up first."""
        role = queue.role
        end = queue.log.next_offset
        if queue.writing or queue.committed_end < end:
            return None
        connected = self.broker.cluster.transport.is_connected
        live = [r for r in role.replicas if r != role.me and connected(r) and role.ends.get(r) == end]
        preferred = [r for r in live if r not in avoid] or live
        return min(preferred) if preferred else None
