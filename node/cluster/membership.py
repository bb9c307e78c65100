"""Who belongs to the cluster and to each group (part of Cluster, node/cluster/cluster.py).

A node without seeds is a cluster of one. Nodes started with the same seeds
(the others' ids) form a cluster on their first boot; after that the
remembered membership wins over the seeds, as RabbitMQ's peer discovery runs
only on a blank node. `join_cluster(seed)` resets this node (its metadata is
dropped, as rabbitmqctl's join_cluster does) and has the seed's cluster add
it; `forget_cluster_node(node)` removes a member (stop it first). Both use
Raft's one-at-a-time membership changes. The joining node asks the seed over
node messages (node/cluster/rpc.py), so it needs only the seed's cluster
address and the secret. A joining node starts with long election timeouts,
so that it hears from the leader before it could call an election and
disrupt the cluster. `change_group_members` does the same for any other
group (a quorum queue's) on its leader.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from node.cluster.errors import ClusterError, ClusterUnavailable, MembershipError
from node.cluster.proposals import RETRY_MIN
from node.cluster.rpc import RpcError, RpcUnreachable
from raft.status import ProposalOutcome

if TYPE_CHECKING:
    from node.cluster.cluster import Cluster

__all__ = ["Membership"]

log = logging.getLogger("warren.cluster")

SERVE_ADD_TIMEOUT = 20.0  # how long a member works at adding a joining node
SEED_CONNECT_TIMEOUT = 10.0  # how long join_cluster tries to reach its seed


class Membership:
    """Join, forget, and group membership changes; part of the Cluster."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    async def join_cluster(self, seed: str, timeout: float = 30.0) -> dict:
        """Reset this node and make it a member of `seed`'s cluster; returns the new status."""
        c = self.cluster
        seed = seed.strip()
        if not seed or seed == c.node_id:
            raise MembershipError(f"cannot join {seed!r}: give another node's cluster address (host:port)")
        mine = c.members()
        loop = c.loop
        deadline = loop.time() + timeout
        if c.host.joining:  # an earlier join did not finish: ask again (adding is idempotent)
            if seed not in mine:
                raise MembershipError(f"a join of {', '.join(mine)} is unfinished: retry it through one of them",
                                      status=409)  # fmt: skip
        elif seed in mine:
            return c.status()  # already together
        elif len(mine) > 1:
            raise MembershipError(f"this node already belongs to a cluster of {len(mine)} ({', '.join(mine)}):"
                                  " forget it there first", status=409)  # fmt: skip
        else:
            # a wrong address should fail sooner than a slow join
            theirs = (await self._call(seed, "members", {},
                                       min(deadline, loop.time() + SEED_CONNECT_TIMEOUT)))["members"]  # fmt: skip
            if not isinstance(theirs, list) or not all(isinstance(m, str) for m in theirs):
                raise MembershipError(f"{seed} answered an unreadable member list: {theirs!r}", status=502)
            if c.node_id in theirs:
                raise MembershipError(f"{seed}'s cluster already counts {c.node_id} as a member: run"
                                      f" forget_cluster_node {c.node_id} there first", status=409)  # fmt: skip
            log.warning("joining the cluster of %s (%s): this node's metadata is reset", seed, ",".join(theirs))
            self._reset(theirs, joining=True)
        try:
            await self._call(seed, "add", {"node": c.node_id}, deadline)
        except MembershipError as e:
            if e.status < 500:  # refused: certainly not added
                log.error("%s refused to add this node (%s): it is a cluster of one again", seed, e)
                self._reset([], joining=False)
            raise
        # Otherwise (no answer in time) the add may still commit: the node
        # stays joining, and join_cluster again finishes the job.
        await c.proposer.fence(max(1.0, deadline - loop.time()))  # caught up with the leader
        c.host.end_joining()
        return c.status()

    async def forget_cluster_node(self, node: str, timeout: float | None = None) -> dict:
        """Remove `node` (which should be stopped) from the cluster; returns the new status."""
        c = self.cluster
        node = node.strip()
        if node == c.node_id:
            raise MembershipError("a node cannot forget itself: run forget_cluster_node on another member")
        if node not in c.members():
            raise MembershipError(f"{node} is not a member of this cluster", status=404)
        if c.group.leader_id == node:
            raise MembershipError(f"{node} is the leader: stop it, and forget it once another node leads",
                                  status=409)  # fmt: skip
        await self._change_membership("rem", node, c.command_timeout if timeout is None else timeout)
        return c.status()

    async def call(self, peer: str, method: str, args: dict, timeout: float | None = None) -> dict:
        """`method(args)` served by `peer` (see `Cluster.calls`); raises MembershipError or ClusterUnavailable."""
        c = self.cluster
        return await self._call(peer, method, args, c.loop.time() + (timeout or c.command_timeout))

    async def change_group_members(self, name: str, op: str, node: str, timeout: float | None = None) -> None:
        """On the leader of group `name`: add or remove `node` (one change at a time)."""
        c = self.cluster
        group = c.groups.get(name)
        if group is None or not group.is_leader:
            raise MembershipError(f"this node does not lead raft group {name}", status=409)
        change = group.add_member if op == "add" else group.remove_member
        deadline = c.loop.time() + (timeout or c.command_timeout)
        _, outcome = await c.proposer.submit(lambda cb: change(node, callback=cb), deadline,
                                             timeout or c.command_timeout, name)  # fmt: skip
        if outcome is not ProposalOutcome.SUCCESS:
            raise MembershipError(f"raft group {name}: {op} {node} refused ({outcome.value})", 409)

    async def _change_membership(self, op: str, node: str, timeout: float) -> None:
        c = self.cluster
        loop = c.loop
        deadline = loop.time() + timeout
        delay = RETRY_MIN
        while True:
            if (node in c.members()) == (op == "add"):
                # Done (the membership changes when the leader appends the
                # entry); the fence commits it, or times out as any command.
                await c.proposer.fence(max(0.0, deadline - loop.time()))
                return
            group = c.proposer.live_group()
            change = group.add_member if op == "add" else group.remove_member
            _, outcome = await c.proposer.submit(lambda cb, change=change: change(node, callback=cb), deadline,
                                                 timeout)  # fmt: skip
            if outcome is ProposalOutcome.SUCCESS:
                return
            # REQUEST_DENIED: the leader has an uncommitted change or has not
            # committed its first entry yet; try again.
            delay = await c.proposer.backoff(delay, deadline, timeout)

    def _reset(self, others: list[str], joining: bool) -> None:
        """Drop this node's metadata and start the metadata group afresh with these peers."""
        self.cluster.proposer.fail_pending(ClusterError("this node's cluster membership was reset"))
        self.cluster.host.reset_metadata(others, joining)

    # -- the join protocol (node messages, node/cluster/rpc.py) ---------------------------------

    async def _call(self, peer: str, method: str, args: dict, deadline: float) -> dict:
        try:
            return await self.cluster.rpc.call(peer, method, args, deadline)
        except RpcUnreachable as e:
            raise ClusterUnavailable(str(e)) from None
        except RpcError as e:
            raise MembershipError(str(e), e.status) from None

    async def serve_call(self, peer: str, method: str, args: dict) -> Any:
        """Answer a peer's node call: the join protocol's, or one registered in `Cluster.calls`."""
        c = self.cluster
        if not c.running:
            raise ClusterUnavailable("the node is not running")
        if method == "members":
            return {"members": c.members()}
        if method == "add":
            node = args.get("node")
            if node != peer:  # the stream's authenticated sender
                raise MembershipError(f"{peer} may only add itself, not {node!r}", status=403)
            await self._change_membership("add", node, SERVE_ADD_TIMEOUT)
            log.info("%s joined the cluster", node)
            return {"members": c.members()}
        handler = c.calls.get(method)
        if handler is not None:
            return await handler(peer, args)
        raise MembershipError(f"unknown cluster call {method!r}")
