"""Starts and stops this node's streams (queues/stream/): where their files
live, and closing them when the node stops."""

from __future__ import annotations

import hashlib
import os
import weakref
from typing import TYPE_CHECKING, Any

from queues.stream.queue import StreamQueue

if TYPE_CHECKING:
    from node.broker import Broker
    from node.vhosts.vhost import VHost

__all__ = ["StreamQueues"]


class StreamQueues:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._open: weakref.WeakSet[StreamQueue] = weakref.WeakSet()

    def directory(self, vhost: str, name: str) -> str:
        """One directory per stream, named by a digest: any vhost or queue name is a valid file name then."""
        digest = hashlib.sha256(f"{vhost}\0{name}".encode()).hexdigest()[:32]
        return os.path.join(self.broker.config.data_dir, "streams", digest)

    def start(self, vhost: VHost, name: str, arguments: dict[str, Any]) -> StreamQueue:
        queue = StreamQueue(vhost.name, name, arguments, self.directory(vhost.name, name), vhost, self.broker.loop)
        self._open.add(queue)
        return queue

    def close(self) -> None:
        for queue in list(self._open):
            queue.close()
        self._open = weakref.WeakSet()
