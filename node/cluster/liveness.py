"""Liveness per peer node instead of per Raft group (raft/patches.py, patch 7).

Every quorum queue is a Raft group, and a Raft follower elects when it has
not heard its leader's heartbeat for an election timeout, so idle groups
cost a heartbeat and its answer each per follower per period: for hundreds
of queues, most of a node's idle work. RabbitMQ's Ra avoids it by watching
nodes rather than groups. Here each node tells each peer, every
`ANNOUNCE_INTERVAL`, which groups it leads and in which term, in one node
message (channel "raft.alive"):

    ["alive", [[group, term], ...]]

A follower of that leader in that term takes it as the leader's heartbeat,
and every group this node leads takes the message as its member's answer.
Groups can then heartbeat rarely (node/vhosts/quorum_groups.py); a node that stops
(killed, paused, cut off) stops announcing, and its groups' followers elect
after their usual timeout. The metadata group keeps its own heartbeats.
"""

from __future__ import annotations

import logging
from typing import Any

from amqp import codec

log = logging.getLogger("warren.liveness")

CHANNEL = "raft.alive"
ANNOUNCE_INTERVAL = 0.5  # seconds; a quarter of the quorum groups' shortest election timeout


class GroupLiveness:
    def __init__(self, cluster: Any, skip: str):
        self.cluster = cluster
        self.skip = skip  # the group that keeps its own heartbeats (the metadata group)
        self._timer: Any = None
        cluster.rpc.channels[CHANNEL] = self._on_message

    def start(self, loop: Any) -> None:
        self._loop = loop
        self._timer = loop.call_later(ANNOUNCE_INTERVAL, self._announce)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _announce(self) -> None:
        self._timer = self._loop.call_later(ANNOUNCE_INTERVAL, self._announce)
        groups = [(name, g) for name, g in self.cluster.groups.items() if name != self.skip]
        if not groups:
            return
        payload = codec.dumps(["alive", [[name, g.term] for name, g in groups if g.is_leader]])
        for peer in {peer for _, g in groups for peer in g.peers}:
            self.cluster.transport.send_node_message(peer, CHANNEL, payload)

    def _on_message(self, peer: str, payload: bytes) -> None:
        try:
            kind, leading = codec.loads(payload)
            if kind != "alive":
                raise ValueError(f"unknown message {kind!r}")
            leading = [(str(name), int(term)) for name, term in leading]
        except Exception as e:
            log.warning("dropped a malformed %s message from %s: %s", CHANNEL, peer, e)
            return
        groups = self.cluster.groups
        for name, term in leading:
            group = groups.get(name)
            if group is not None:
                group.leader_alive(peer, term)
        for name, group in groups.items():
            if name != self.skip:
                group.member_alive(peer)
