"""Each cluster member's node name (`warren@host`, the `node_name` setting),
by its cluster address (`127.0.0.1:41443`, what Raft and the metadata name a
member by): the management API shows quorum queues' node, leader and members
by node name, as RabbitMQ does, and takes either spelling back.

A node answers the call "node.name" with its own; every `interval` seconds
this node asks the reachable members it has no name for (a member that
cannot answer yet, or an older version, is asked again after `RETRY`
seconds). A member never heard of, or whose name another member shares
(`node_name` left at its default on every node), is shown by its address.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

    from node.cluster.cluster import Cluster

log = logging.getLogger("warren.cluster")

NAME_CALL = "node.name"
RETRY = 2.0  # seconds before asking again a member that did not answer
CALL_TIMEOUT = 5.0


class NodeNames:
    def __init__(self, cluster: Cluster, loop: asyncio.AbstractEventLoop, own_name: str,
                 background: Callable[[Any, str], None], interval: float = 0.5):  # fmt: skip
        self.cluster = cluster
        self.loop = loop
        self.own_name = own_name
        self.background = background
        self.interval = interval
        self._names: dict[str, str] = {cluster.node_id: own_name}  # member address -> node name
        self._asked: dict[str, float] = {}  # member address -> when last asked (monotonic)
        cluster.calls[NAME_CALL] = self._serve
        self._timer = loop.call_soon(self._tick)

    def close(self) -> None:
        self._timer.cancel()

    def name_of(self, member: str) -> str:
        """The node name of a member address; the address itself while unknown or not unique."""
        name = self._names.get(member)
        if name is None or sum(1 for known in self._names.values() if known == name) > 1:
            return member
        return name

    def member_of(self, name: str) -> str:
        """The member address of a node name; `name` itself when it is no known, unique node name."""
        members = [member for member, known in self._names.items() if known == name]
        return members[0] if len(members) == 1 else name

    async def _serve(self, peer: str, args: dict) -> dict:
        return {"name": self.own_name}

    def _tick(self) -> None:
        self._timer = self.loop.call_later(self.interval, self._tick)
        now = time.monotonic()
        cluster = self.cluster
        for member in cluster.members():
            if member in self._names or not cluster.is_reachable(member):
                continue
            if now - self._asked.get(member, -RETRY) < RETRY:
                continue
            self._asked[member] = now
            self.background(self._ask(member), f"asking {member} its node name")

    async def _ask(self, member: str) -> None:
        try:
            reply = await self.cluster.call(member, NAME_CALL, {}, CALL_TIMEOUT)
        except Exception as e:  # not up yet, or a version without the call: asked again later
            log.debug("%s did not tell its node name: %s", member, e)
            return
        name = reply.get("name")
        if isinstance(name, str) and name:
            self._names[member] = name
