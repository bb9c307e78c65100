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

A node that leads groups tells every member, not only its groups' peers: a
node without a replica of a quorum queue then knows its leader too
(`leader_of`, the management API's `leader` there, as RabbitMQ's shows from
any node). A build before this ignores the groups it has no replica of.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from amqp import codec

log = logging.getLogger("warren.liveness")

CHANNEL = "raft.alive"
ANNOUNCE_INTERVAL = 0.5  # seconds; a quarter of the quorum groups' shortest election timeout
HEARD_S = 4 * ANNOUNCE_INTERVAL  # a leader not heard from for this long is no longer named


class GroupLiveness:
    def __init__(self, cluster: Any, skip: str):
        self.cluster = cluster
        self.skip = skip  # the group that keeps its own heartbeats (the metadata group)
        self._timer: Any = None
        # groups without a replica here -> (the node that last said it leads, its term, when heard)
        self._leaders: dict[str, tuple[str, int, float]] = {}
        self.heard = 0  # announcements taken from peers, malformed ones not counted
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
        now = time.monotonic()
        self._leaders = {name: heard for name, heard in self._leaders.items() if now - heard[2] < HEARD_S}
        groups = [(name, g) for name, g in self.cluster.groups.items() if name != self.skip]
        if not groups:
            return
        leading = [[name, g.term] for name, g in groups if g.is_leader]
        payload = codec.dumps(["alive", leading])
        peers = {peer for _, g in groups for peer in g.peers}
        if leading:
            peers.update(self.cluster.members())
            peers.discard(self.cluster.node_id)
        for peer in peers:
            # ungated: a leader's term is on disk before it wins, so the claim answers for
            # nothing unwritten; a gated one held the ungated queue-proxy messages behind it
            # (deliveries to a consumer's node) until the leader's next log write
            self.cluster.transport.send_node_message(peer, CHANNEL, payload, gated=False)

    def leader_of(self, group: str) -> str | None:
        """The leader of a group this node has no replica of, as its announcements say; None
        when none announced it within HEARD_S."""
        heard = self._leaders.get(group)
        return heard[0] if heard is not None and time.monotonic() - heard[2] < HEARD_S else None

    def _on_message(self, peer: str, payload: bytes) -> None:
        try:
            kind, leading = codec.loads(payload)
            if kind != "alive":
                raise ValueError(f"unknown message {kind!r}")
            leading = [(str(name), int(term)) for name, term in leading]
        except Exception as e:
            log.warning("dropped a malformed %s message from %s: %s", CHANNEL, peer, e)
            return
        self.heard += 1
        groups = self.cluster.groups
        now = time.monotonic()
        for name, term in leading:
            group = groups.get(name)
            if group is not None:
                group.leader_alive(peer, term)
                continue
            heard = self._leaders.get(name)
            if heard is None or term >= heard[1] or now - heard[2] >= HEARD_S:
                self._leaders[name] = (peer, term, now)
        for name, group in groups.items():
            if name != self.skip:
                group.member_alive(peer)
