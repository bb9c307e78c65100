"""Resource alarms across the workers of a node (issue 36): as in RabbitMQ, an alarm
anywhere blocks every publisher, those of every worker included.

Each worker checks its own memory (against its share of the node's watermark) and the
disk (node/ops/alarms.py). Over the control link (metadata_follow.py):

    K -> worker 0  ["alarms", K, [alarm, ...]]         its own, at each check and change: a
                                                       restarted worker 0 hears them within one
    worker 0 -> K  ["alarms", [[member, [alarm, ...]], ...]]   every alarm in effect (worker 0's,
                                                       the other workers', the other nodes'),
                                                       on each change and in each snapshot

Worker 0 holds the other workers' alarms as the node's own (`Alarms.siblings`): its
publishers stop, the health checks and the API show them, and the cluster hears them
(node/cluster/alarm_gossip.py). A worker whose link ends no longer counts."""

from __future__ import annotations

from typing import Any

from node.ops.alarms import Alarms

from .slots import worker_peer

__all__ = ["NodeAlarms", "apply_picture", "follow_alarms"]


class NodeAlarms:
    """Worker 0's side: the other workers' alarms in, every alarm in effect out."""

    def __init__(self, alarms: Alarms, node_id: str) -> None:
        self._alarms = alarms
        self._node_id = node_id
        self.feed: Any = None  # MetadataFeed, once it serves
        self._workers: dict[Any, int] = {}  # a worker's control link -> its number
        self._sent: list | None = None
        alarms.on_update = self._updated

    def picture(self) -> list:
        """[[member, [alarm, ...]], ...]: every alarm in effect, as worker 0 knows them."""
        alarms = self._alarms
        known = {self._node_id: tuple(alarms.own()), **alarms.siblings, **alarms.remote}
        return [[member, list(raised)] for member, raised in sorted(known.items()) if raised]

    def on_item(self, link: Any, item: list) -> bool:
        """A worker's item; False when it is not an alarm report."""
        if item[0] != "alarms" or len(item) != 3 or not isinstance(item[1], int):
            return False
        self._workers[link] = item[1]
        self._alarms.set_sibling(worker_peer(self._node_id, item[1]), [str(a) for a in item[2]])
        return True

    def on_lost(self, link: Any) -> None:
        worker = self._workers.pop(link, None)
        if worker is not None:
            self._alarms.set_sibling(worker_peer(self._node_id, worker), [])

    def _updated(self) -> None:
        picture = self.picture()
        if picture != self._sent and self.feed is not None:
            self._sent = picture
            self.feed.notify(["alarms", picture])


def follow_alarms(alarms: Alarms, index: int, tell: Any) -> None:
    """Worker K's side: its own alarms to worker 0 at each check and change (`tell`, the
    follower's)."""
    alarms.on_update = lambda: tell(["alarms", index, alarms.own()])


def apply_picture(alarms: Alarms, picture: list, me: str) -> None:
    """Worker K: every alarm in effect elsewhere (its own entry, `me`, is its own to know)."""
    alarms.replace_remote({member: tuple(raised) for member, raised in picture if member != me})
