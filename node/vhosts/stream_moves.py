"""Stream consumers across a change of this node's role (node/vhosts/stream_replication.py).

A stream consumer has a position, the next offset it reads, and the copies of a
stream hold the same offsets, so when this node's copy changes role its
consumers go on from there instead of being detached:
  - leader -> replica, replica -> leader: the copy's files close, then open in
    the new role; meanwhile the readers are frozen (`park`: they take credit and
    detaches, read nothing), then adopted by the new role's readers (`settle`)
    with their offset, filters, credit and delivery-count;
  - a copy removed from this node: adopted by the proxy, which attaches them at
    the leader from their offset, with their filter set (StreamProxy.adopt).
The same holds for the consumers of other nodes this node serves (RemoteConsumer).
Only a deleted stream ends them (`drop`: resource-deleted).
"""

from __future__ import annotations

from typing import Any

from queues.stream.queue import StreamQueue

from .stream_follower import StreamFollower
from .stream_proxy import StreamProxy

__all__ = ["MovingReaders"]


class MovingReaders:
    def __init__(self) -> None:
        self._parked: dict[tuple[str, str], list[Any]] = {}  # (vhost, name) -> copies whose readers wait

    def park(self, key: tuple[str, str], queue: Any) -> None:
        """`queue` (a StreamQueue or StreamFollower) is closing: its readers wait, frozen."""
        if isinstance(queue, StreamQueue | StreamFollower):
            queue.readers.freeze()
            parked = self._parked.setdefault(key, [])
            if queue not in parked:
                parked.append(queue)

    def settle(self, key: tuple[str, str], new: Any) -> None:
        """`new` is the stream's queue on this node from now on: the waiting readers go on with it."""
        for old in self._parked.pop(key, []):
            if old is new:
                old.readers.thaw()
                continue
            for r in old.readers.hand_off():
                consumer = r.consumer
                if hasattr(consumer, "queue"):  # a link's consumer calls its queue for credit and detach
                    consumer.queue = new
                if isinstance(new, StreamQueue | StreamFollower):
                    new.readers.adopt(r)
                elif isinstance(new, StreamProxy):
                    new.adopt(r)
                else:
                    consumer.queue_deleted()

    def drop(self, key: tuple[str, str]) -> None:
        """The stream was deleted: its waiting readers are told so."""
        for old in self._parked.pop(key, []):
            old.readers.queue_deleted()
