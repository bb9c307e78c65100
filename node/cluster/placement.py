"""Where quorum-queue leaders go: at declaration (`x-queue-leader-locator`, the
`queue-leader-locator` policy key, the `queue_leader_locator` setting) and afterwards
(`warren ctl rebalance`, RabbitMQ's `POST /api/rebalance/queues`).

Locators, as RabbitMQ names them:
  client-local  the node the declaration came to (the default);
  balanced      the member leading the fewest quorum queues, as this node knows the
                leaders (the groups it hosts, and the placed leader of the others).
A node in maintenance (node/cluster/maintenance.py) is passed over by both.

The chosen node is the queue's `leader` in its metadata record and the first of its
replicas. Each replica opens the queue's group when it applies the declaration; the chosen
one, seeing a fresh group (term 0), campaigns at once (RaftGroup.campaign_within) while the
others wait their usual 2-4 s, so it normally wins the first election. Should another
member win it (the chosen one opened its group late), that member hands leadership to the
chosen one once (`FirstLeaders`); later elections are left alone.

Rebalancing asks every member which groups it leads, plans moves so that no eligible
member leads more than one group above another that could take one of them
(`plan_moves`, a pure function), and has each group's leader transfer it
(node/cluster/leadership.py's move_leader).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from node.cluster.leadership import move_leader
from routing import policies
from routing.errors import InvalidArgument

if TYPE_CHECKING:
    from metadata.projections import Projections
    from node.cluster.cluster import Cluster
    from node.cluster.maintenance import Maintenance
    from node.vhosts.metadata_store import MetadataStore

__all__ = ["LOCATORS", "Move", "Placement", "choose_leader", "locator_of", "plan_moves", "policy_definition"]

log = logging.getLogger("warren.placement")

LOCATORS = ("client-local", "balanced")
ARGUMENT = "x-queue-leader-locator"
POLICY_KEY = "queue-leader-locator"
LEADING_CALL = "placement.leading"  # which groups do you lead?
MOVE_CALL = "placement.move"  # you lead this group: hand it to that member
FIRST_ELECTION_WITHIN = 0.3  # seconds: the chosen first leader campaigns this soon (the others: 2-4 s)
FIRST_LEADER_WATCH = 30.0  # seconds during which a fresh group's first leader is checked
WATCH_INTERVAL = 0.5
MOVE_TIMEOUT = 10.0
MOVES_AT_ONCE = 16


def locator_of(arguments: Mapping[str, Any], policy_definition: Mapping[str, Any] | None, default: str) -> str:
    """The queue's argument, else its policy's key, else the node's setting."""
    value = arguments.get(ARGUMENT)
    if value is None and policy_definition:
        value = policy_definition.get(POLICY_KEY)
    if value is None:
        value = default
    if value not in LOCATORS:
        raise InvalidArgument(f"invalid {ARGUMENT} {value!r}: one of {', '.join(LOCATORS)}")
    return value


def policy_definition(projections: Any, vhost: str, name: str, queue_type: str) -> Mapping[str, Any]:
    """The definition of the policy that applies to a new queue of `queue_type` ({} if none)."""
    policy = policies.choose(projections.vhost_policies(vhost), "queue", name, queue_type)
    return {} if policy is None else policy.definition


def choose_leader(locator: str, me: str, members: Iterable[str], leading: Mapping[str, int],
                  excluded: Iterable[str] = (), rng: random.Random | None = None) -> str:  # fmt: skip
    """The node that should lead a new queue. `leading`: quorum queues each node leads;
    `excluded`: nodes in maintenance (used only when no other node is left)."""
    members = sorted(set(members) | {me})
    eligible = [m for m in members if m not in set(excluded)] or members
    if locator == "client-local" and me in eligible:
        return me
    fewest = min(leading.get(m, 0) for m in eligible)
    return (rng or random).choice([m for m in eligible if leading.get(m, 0) == fewest])


@dataclass(frozen=True)
class Move:
    group: str
    source: str
    target: str


def plan_moves(leaders: Mapping[str, str], members: Mapping[str, Iterable[str]],
               excluded: Iterable[str] = ()) -> list[Move]:  # fmt: skip
    """Leadership moves that even out how many groups each node leads.

    `leaders`: group -> its leader; `members`: group -> its replicas; `excluded`: nodes
    that must not receive a leadership (in maintenance, unreachable). A group moves from
    the node leading the most to the replica of it leading the fewest, while that lowers
    the spread; each group moves at most once."""
    excluded = set(excluded)
    count: dict[str, int] = {}
    for replicas in members.values():
        for m in replicas:
            count.setdefault(m, 0)
    for leader in leaders.values():
        count[leader] = count.get(leader, 0) + 1
    moves: list[Move] = []
    moved: set[str] = set()
    while True:
        best: tuple[int, str, str, str] | None = None  # (gain, group, source, target)
        for group, leader in leaders.items():
            if group in moved:
                continue
            for target in members.get(group, ()):
                if target == leader or target in excluded:
                    continue
                gain = count[leader] - count[target]
                if gain >= 2 and (best is None or (gain, group) > (best[0], best[1])):
                    best = (gain, group, leader, target)
        if best is None:
            return moves
        _, group, source, target = best
        moves.append(Move(group, source, target))
        moved.add(group)
        count[source] -= 1
        count[target] += 1


class QuorumGroups(Protocol):
    queues: dict[str, Any]  # this node's quorum queue replicas by group (node/vhosts/quorum_groups.py)


class PlacementNode(Protocol):
    """What placement uses of its node (node/broker.py provides it); read at each
    use: `cluster`, `metadata` and `loop` exist once the node has started."""

    node_id: str
    loop: asyncio.AbstractEventLoop
    cluster: Cluster
    metadata: MetadataStore
    projections: Projections
    maintenance: Maintenance
    quorum: QuorumGroups

    def background(self, coro: Any, what: str) -> None: ...


class Placement:
    """This node's side of leader placement."""

    def __init__(self, node: PlacementNode, default_locator: str) -> None:
        """`default_locator`: setting queue_leader_locator."""
        self.node = node
        self._default_locator = default_locator
        self._first: dict[str, tuple[str, float]] = {}  # fresh group -> (chosen leader, watch until)
        self._timer: asyncio.TimerHandle | None = None

    @property
    def _cluster(self) -> Any:
        return self.node.cluster

    def attach(self) -> None:
        cluster = self._cluster
        cluster.calls[LEADING_CALL] = self._serve_leading
        cluster.calls[MOVE_CALL] = self._serve_move

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # -- at declaration --------------------------------------------------------------------

    def policy_definition(self, vhost: str, name: str, queue_type: str) -> Mapping[str, Any]:
        return policy_definition(self.node.projections, vhost, name, queue_type)

    def leader_for(self, vhost: str, name: str, arguments: Mapping[str, Any], queue_type: str = "quorum") -> str:
        """The member that should lead the new quorum queue or stream `name` (raises InvalidArgument);
        the policy is the one that applies to a queue of `queue_type` (apply-to streams or quorum_queues)."""
        node = self.node
        locator = locator_of(arguments, self.policy_definition(vhost, name, queue_type), self._default_locator)
        me = node.node_id
        return choose_leader(locator, me, node.metadata.state.members, self.leading_counts(),
                             self.nodes_in_maintenance())  # fmt: skip

    def nodes_in_maintenance(self) -> set[str]:
        maintenance = self.node.maintenance
        out = set(maintenance.drained_peers)
        if maintenance.in_maintenance:
            out.add(self.node.node_id)
        return out

    def leading_counts(self) -> dict[str, int]:
        """Quorum queues each node leads, as this node knows: the leader of each group it
        hosts, else the leader placed at declaration."""
        from node.vhosts.quorum_groups import group_name  # node/vhosts imports this module

        groups = self._cluster.groups
        out: dict[str, int] = {}
        for vh in self.node.metadata.state.vhosts.values():
            for q in vh.queues.values():
                if q.type != "quorum":
                    continue
                group = groups.get(group_name(vh.name, q.name))
                leader = (group.leader_id if group is not None else None) or q.leader
                if leader:
                    out[leader] = out.get(leader, 0) + 1
        return out

    def opened(self, group: str, chosen: str) -> None:
        """A quorum queue's group opened here: if it is new and this node was chosen to lead
        it, campaign at once; either way watch who wins its first election."""
        raft = self._cluster.groups.get(group)
        if raft is None or raft.term != 0 or not chosen:
            return  # restarted from its log: leave its elections alone
        if chosen == self.node.node_id:
            raft.campaign_within(FIRST_ELECTION_WITHIN)
            self._cluster.host.kick(group)
        loop = self.node.loop
        self._first[group] = (chosen, loop.time() + FIRST_LEADER_WATCH)
        if self._timer is None:
            self._timer = loop.call_later(WATCH_INTERVAL, self._watch)

    def _watch(self) -> None:
        """The fresh groups this node came to lead although another member was chosen: hand
        each to the chosen member, once."""
        self._timer = None
        now = self.node.loop.time()
        cluster = self._cluster
        for group, (chosen, until) in list(self._first.items()):
            raft = cluster.groups.get(group)
            if raft is None or now > until or raft.leader_id == chosen:
                del self._first[group]
            elif raft.is_leader:
                del self._first[group]
                if chosen in raft.peers and chosen not in self.nodes_in_maintenance():
                    self.node.background(move_leader(cluster, group, chosen, MOVE_TIMEOUT),
                                           f"handing {group} to its chosen leader {chosen}")  # fmt: skip
            elif raft.leader_id is not None:
                del self._first[group]  # another member leads: it watches, if it opened the group fresh
        if self._first:
            self._timer = self.node.loop.call_later(WATCH_INTERVAL, self._watch)

    # -- rebalance ---------------------------------------------------------------------------

    async def rebalance(self) -> list[dict]:
        """Even out quorum-queue leaders over the members; one row per queue moved."""
        from node.vhosts.quorum_groups import group_name

        cluster = self._cluster
        queues: dict[str, tuple[str, str]] = {}
        members: dict[str, tuple[str, ...]] = {}
        for vh in self.node.metadata.state.vhosts.values():
            for q in vh.queues.values():
                if q.type == "quorum":
                    group = group_name(vh.name, q.name)
                    queues[group] = (vh.name, q.name)
                    members[group] = tuple(q.replicas)
        leaders: dict[str, str] = {}
        unreachable: set[str] = set()
        for member in cluster.members():
            try:
                leading = await self._leading_of(member)
            except Exception as e:
                log.info("rebalance: %s did not say which queues it leads: %s", member, e)
                unreachable.add(member)
                continue
            leaders.update({g: member for g in leading if g in members})
        moves = plan_moves(leaders, members, self.nodes_in_maintenance() | unreachable)
        gate = asyncio.Semaphore(MOVES_AT_ONCE)

        async def run(move: Move) -> dict:
            vhost, name = queues[move.group]
            async with gate:
                try:
                    ok = await self._move(move)
                    error = "" if ok else f"{move.target} did not take over in {MOVE_TIMEOUT:.0f}s"
                except Exception as e:
                    ok, error = False, str(e)
            return {"vhost": vhost, "name": name, "from": move.source, "to": move.target, "ok": ok, "error": error}

        return list(await asyncio.gather(*(run(m) for m in moves)))

    async def _leading_of(self, node: str) -> list[str]:
        if node == self._cluster.node_id:
            return self._leading()
        reply = await self._cluster.call(node, LEADING_CALL, {}, timeout=10)
        return [str(g) for g in reply.get("groups", [])]

    def _leading(self) -> list[str]:
        quorum = self.node.quorum.queues
        return [name for name, group in self._cluster.groups.items() if name in quorum and group.is_leader]

    async def _move(self, move: Move) -> bool:
        if move.source == self._cluster.node_id:
            return await move_leader(self._cluster, move.group, move.target, MOVE_TIMEOUT)
        reply = await self._cluster.call(move.source, MOVE_CALL, {"group": move.group, "to": move.target},
                                         timeout=MOVE_TIMEOUT + 5)  # fmt: skip
        return bool(reply.get("ok"))

    async def _serve_leading(self, peer: str, args: dict) -> dict:
        return {"groups": self._leading()}

    async def _serve_move(self, peer: str, args: dict) -> dict:
        return {"ok": await move_leader(self._cluster, str(args["group"]), str(args["to"]), MOVE_TIMEOUT)}
