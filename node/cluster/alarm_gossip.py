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
    from node.broker import Broker

log = logging.getLogger("warren.alarms")

CHANNEL = "node.alarms"
VERSION = 1


class AlarmGossip:
    def __init__(self, broker: Broker, interval: float = 1.0):
        self.broker = broker
        self.interval = interval
        cluster = broker.cluster
        self._transport = cluster.transport
        cluster.rpc.channels[CHANNEL] = self._on_message
        self._transport.on_peer_down.append(self._peer_down)
        self._last: list[str] | None = None
        self._timer = broker.loop.call_soon(self._tick)

    def close(self) -> None:
        self._timer.cancel()
        if self._peer_down in self._transport.on_peer_down:
            self._transport.on_peer_down.remove(self._peer_down)

    def local_changed(self) -> None:
        """This node's alarms changed: tell the others now."""
        self._send()

    def _tick(self) -> None:
        self._timer = self.broker.loop.call_later(self.interval, self._tick)
        self._send()

    def _send(self) -> None:
        cluster = self.broker.cluster
        payload = json.dumps({"v": VERSION, "alarms": self.broker.alarms.describe()}).encode()
        for member in cluster.members():
            if member != cluster.node_id:
                self._transport.send_node_message(member, CHANNEL, payload)

    def _on_message(self, peer: str, payload: bytes) -> None:
        try:
            msg = json.loads(payload)
            alarms = msg["alarms"]
            if msg.get("v") != VERSION or not isinstance(alarms, list) or not all(isinstance(a, str) for a in alarms):
                raise ValueError(f"not a version {VERSION} alarm list")
        except (ValueError, KeyError, TypeError) as e:
            log.warning("dropped an alarm message from %s: %s", peer, e)
            return
        self.broker.alarms.set_remote(peer, alarms)

    def _peer_down(self, peer: str) -> None:
        self.broker.alarms.set_remote(peer, [])
