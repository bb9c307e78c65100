"""Tells every cluster member this node's resource alarms, so that an alarm
anywhere blocks publishers everywhere (RabbitMQ's alarms are cluster-wide).

A node message on channel "node.alarms" carries the full list of this
node's alarms (JSON, versioned): sent to every member when the list
changes, and again each `interval` so that a member that restarted or was
cut off hears it. A member whose stream ends is forgotten until it speaks
again: an unreachable node's alarm does not block the others forever.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio

    from node.cluster.cluster import Cluster
    from node.ops.alarms import Alarms

log = logging.getLogger("warren.alarms")

CHANNEL = "node.alarms"
VERSION = 1


class AlarmGossip:
    def __init__(self, cluster: Cluster, loop: asyncio.AbstractEventLoop, alarms: Alarms, interval: float = 1.0):
        self.cluster = cluster
        self.loop = loop
        self.alarms = alarms  # this node's, and what it hears of the others'
        self.interval = interval
        self._transport = cluster.transport
        cluster.rpc.channels[CHANNEL] = self._on_message
        self._transport.on_peer_down.append(self._peer_down)
        self._last: list[str] | None = None
        self._timer = loop.call_soon(self._tick)

    def close(self) -> None:
        self._timer.cancel()
        if self._peer_down in self._transport.on_peer_down:
            self._transport.on_peer_down.remove(self._peer_down)

    def local_changed(self) -> None:
        """This node's alarms changed: tell the others now."""
        self._send()

    def _tick(self) -> None:
        self._timer = self.loop.call_later(self.interval, self._tick)
        self._send()

    def _send(self) -> None:
        cluster = self.cluster
        payload = json.dumps({"v": VERSION, "alarms": self.alarms.describe()}).encode()
        for member in cluster.members():
            if member != cluster.node_id:
                # answers for nothing in the Raft log: ungated, so a node whose log is out of
                # space (its gated messages dropped) still tells the others of its disk alarm
                self._transport.send_node_message(member, CHANNEL, payload, gated=False)

    def _on_message(self, peer: str, payload: bytes) -> None:
        try:
            msg = json.loads(payload)
            alarms = msg["alarms"]
            if msg.get("v") != VERSION or not isinstance(alarms, list) or not all(isinstance(a, str) for a in alarms):
                raise ValueError(f"not a version {VERSION} alarm list")
        except (ValueError, KeyError, TypeError) as e:
            log.warning("dropped an alarm message from %s: %s", peer, e)
            return
        self.alarms.set_remote(peer, alarms)

    def _peer_down(self, peer: str) -> None:
        self.alarms.set_remote(peer, [])
