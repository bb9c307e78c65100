"""Maintenance mode: `warren ctl drain` / `revive` (RabbitMQ's names), before a node is
stopped for an upgrade and after it is back.

Draining a node, in this order:
  1. it tells the other members (MAINTENANCE_CALL), so that their leader placement and
     `rebalance` pass it over (node/cluster/placement.py);
  2. its AMQP listeners stop accepting (a client's connect is refused, as by a stopped
     node, and its reconnect logic tries another member);
  3. its client connections are closed with amqp:connection:forced;
  4. it stops calling elections of its own in the groups it hosts (it still votes and
     still replicates: its replicas stay in the majorities), and
  5. hands the leadership of each group it leads (the metadata group and every quorum
     queue's) to another member (node/cluster/leadership.py), and at the same time each
     replicated stream it leads to an in-sync replica (node/vhosts/stream_handover.py),
     waiting until none is led here or the timeout passes.
The answer reports what happened: connections closed, groups and streams moved, groups and
streams still led here. A drained node's replicas do not elect it stream leader
(node/vhosts/stream_failover.py) unless it alone has the longest log.
Reviving undoes 1, 2 and 4; leaderships come back only through `rebalance` or elections.

The state lives in this process only: a restarted node serves again (the upgrade's new
binary starts out of maintenance). The others forget that a node drains when their stream to
it ends (it may come back serving), and a drained node tells them again every
ANNOUNCE_INTERVAL, which also reaches a peer that restarted meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Protocol

from amqp.errors import Condition
from node.cluster.leadership import hand_over, hold_elections, release_elections

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from node.cluster.cluster import Cluster

__all__ = ["DRAINED", "DRAINING", "SERVING", "Maintenance"]

log = logging.getLogger("warren.maintenance")

MAINTENANCE_CALL = "maintenance.state"  # a member tells the others it drains or serves again
SERVING, DRAINING, DRAINED = "serving", "draining", "drained"
CLOSE_REASON = "node is being drained for maintenance"
NOTIFY_TIMEOUT = 5.0  # seconds for each peer to acknowledge the state change
ANNOUNCE_INTERVAL = 5.0  # seconds between a drained node's reminders to the others


class MaintenanceNode(Protocol):
    """What maintenance uses of its node (node/broker.py provides it); `cluster` and
    `loop` are read at each use, they exist once the node has started."""

    cluster: Cluster
    loop: asyncio.AbstractEventLoop
    connections: set[Any]  # the AMQP connections (force_close): the drain closes them

    def suspend_listeners(self) -> None:
        """New AMQP connections are refused at the socket; open ones stay."""

    async def resume_listeners(self) -> None:
        """Listen again on the ports bound before suspend_listeners."""

    def background(self, coro: Any, what: str) -> None: ...


class Maintenance:
    """A node's maintenance state and the drain and revive operations."""

    def __init__(self, node: MaintenanceNode,
                 hand_over_streams: Callable[[float, set[str]], Awaitable[Any]]) -> None:  # fmt: skip
        """`hand_over_streams(timeout, avoid)`: the drain's step for streams
        (node/vhosts/stream_handover.py), beside the groups' (leadership.hand_over); its
        report has `moved`, `kept` and `as_dict()` as theirs."""
        self.node = node
        self._hand_over_streams = hand_over_streams
        self.state = SERVING
        self.last_drain: dict | None = None  # the report of the last drain
        self.drained_peers: set[str] = set()  # members that told this node they drain
        self._held: dict[str, tuple[float, float]] = {}  # groups' election timeouts while held
        self._announcer: asyncio.TimerHandle | None = None

    @property
    def in_maintenance(self) -> bool:
        return self.state != SERVING

    def attach(self) -> None:
        """Once the cluster runs: hear the other members' state changes."""
        cluster = self.node.cluster
        cluster.calls[MAINTENANCE_CALL] = self._serve_state
        cluster.transport.on_peer_down.append(self.drained_peers.discard)

    def status(self) -> dict:
        cluster = self.node.cluster
        return {"node": cluster.node_id if cluster is not None else "", "state": self.state,
                "being_drained": self.in_maintenance, "drained_peers": sorted(self.drained_peers),
                "last_drain": self.last_drain}  # fmt: skip

    async def drain(self, timeout: float = 30.0) -> dict:
        """Put the node in maintenance (see the module's doc); returns the report."""
        node, cluster = self.node, self.node.cluster
        started = time.monotonic()
        self.state = DRAINING
        log.warning("draining this node for maintenance")
        await self._notify(True)
        self._schedule_announce()
        node.suspend_listeners()
        closed = 0
        for conn in list(node.connections):
            conn.force_close(Condition.CONNECTION_FORCED, CLOSE_REASON)
            closed += 1
        hold_elections(cluster, self._held)
        moved, streams = await asyncio.gather(hand_over(cluster, None, timeout, avoid=self.drained_peers),
                                              self._hand_over_streams(timeout, set(self.drained_peers)))
        hold_elections(cluster, self._held)  # and the groups opened meanwhile
        self.state = DRAINED
        report = {"node": cluster.node_id, "state": self.state, "connections_closed": closed,
                  **moved.as_dict(), **streams.as_dict(), "seconds": round(time.monotonic() - started, 3),
                  "done": not moved.kept and not streams.kept}  # fmt: skip
        self.last_drain = report
        log.warning("drained: %d connections closed, %d leaderships handed over, %d still led here"
                    " (streams: %d moved, %d still led here)", closed, len(moved.moved), len(moved.kept),
                    len(streams.moved), len(streams.kept))  # fmt: skip
        return report

    async def revive(self) -> dict:
        """Out of maintenance: listen again, call elections again, tell the others."""
        cluster = self.node.cluster
        if self._announcer is not None:
            self._announcer.cancel()
            self._announcer = None
        release_elections(cluster, self._held)
        await self.node.resume_listeners()
        self.state = SERVING
        await self._notify(False)
        log.warning("revived: serving clients again")
        return {"node": cluster.node_id, "state": self.state}

    def held_group_opened(self) -> None:
        """A group opened while drained does not campaign either."""
        if self.in_maintenance:
            hold_elections(self.node.cluster, self._held)

    def _schedule_announce(self) -> None:
        self._announcer = self.node.loop.call_later(ANNOUNCE_INTERVAL, self._announce)

    def _announce(self) -> None:
        self._announcer = None
        if self.in_maintenance and self.node.cluster.running:
            self.node.background(self._notify(True), "telling the other members this node drains")
            self._schedule_announce()

    async def _notify(self, drained: bool) -> None:
        cluster = self.node.cluster
        peers = [m for m in cluster.members() if m != cluster.node_id]

        async def tell(peer: str) -> None:
            try:
                await cluster.call(peer, MAINTENANCE_CALL, {"node": cluster.node_id, "drained": drained},
                                   timeout=NOTIFY_TIMEOUT)  # fmt: skip
            except Exception as e:  # a member down now learns nothing: it places as if this node served
                log.info("could not tell %s that this node %s: %s", peer, "drains" if drained else "serves", e)

        await asyncio.gather(*(tell(p) for p in peers))

    async def _serve_state(self, peer: str, args: dict[str, Any]) -> dict:
        node = str(args.get("node") or peer)
        if args.get("drained"):
            self.drained_peers.add(node)
        else:
            self.drained_peers.discard(node)
        return {"ok": True}
