"""Moving Raft leaderships off this node or onto a chosen member, and keeping this node from
taking them back (part of Cluster, node/cluster/cluster.py).

Used by maintenance mode (node/cluster/maintenance.py: every group this node leads goes to
another member), by `warren ctl rebalance` (node/cluster/placement.py: one group to a named
member) and by a graceful stop (Cluster.stop).

A transfer is Raft's TimeoutNow (RaftGroup.transfer_leadership): the leader tells a follower
that has stored its whole log to call an election at once, and that follower wins it. A
follower that lags (under load its last append may still be on its way) is refused with
REQUEST_DENIED; the transfer is asked again every RETRY_INTERVAL until the deadline. The
leader keeps leading until it hears of the new term, so "done" is read from the group's
state, checked at the same interval.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from raft.group import ProposalOutcome, RaftGroup

if TYPE_CHECKING:
    from node.cluster.cluster import Cluster

__all__ = ["HandOver", "hand_over", "hold_elections", "move_leader", "release_elections"]

RETRY_INTERVAL = 0.05  # seconds between checks of the groups still led here, and between retries
# A target that was told (SUCCESS) but has not won this long after is told again: its
# TimeoutNow or its election may have been lost (a vote request dropped while a peer's
# stream reconnects, a competing candidate).
TOLD_AGAIN_AFTER = 1.0
# While a node is in maintenance its groups wait this long before calling an election of their
# own: it still votes, and a transfer (TimeoutNow) still makes it campaign at once.
HELD_ELECTION_TIMEOUTS = (3600.0, 7200.0)


@dataclass
class HandOver:
    """What a hand-over did: groups handed to another member, and those still led here."""

    moved: dict[str, str] = field(default_factory=dict)  # group -> its new leader
    kept: list[str] = field(default_factory=list)  # groups still led here at the deadline
    alone: list[str] = field(default_factory=list)  # groups with no reachable member to take over

    def as_dict(self) -> dict:
        return {"moved": dict(sorted(self.moved.items())), "still_leading": sorted(self.kept),
                "no_successor": sorted(self.alone)}  # fmt: skip


def _ask(cluster: Cluster, name: str, group: RaftGroup, to: str | None, refused: set[str]) -> None:
    def told(_result, outcome: ProposalOutcome) -> None:
        if outcome is not ProposalOutcome.SUCCESS:
            refused.add(name)

    group.transfer_leadership(told, to=to)
    cluster.host.kick(name)


def _successor(cluster: Cluster, group: RaftGroup, avoid: set[str]) -> str | None:
    """The most caught-up reachable member outside `avoid` (None: let Raft pick among all)."""
    st = group.status()
    eligible = [p for p in group.peers if p not in avoid and cluster.is_reachable(p)]
    if not eligible:
        return None
    return max(eligible, key=lambda p: (st.match_index.get(p, 0), p))


async def hand_over(cluster: Cluster, names: list[str] | None = None, timeout: float = 10.0,
                    avoid: set[str] | frozenset[str] = frozenset()) -> HandOver:  # fmt: skip
    """Every group in `names` (default: all) that this node leads goes to another member:
    the most caught-up reachable one, not one in `avoid` (members in maintenance) unless
    no other is reachable. Returns once none is led here or at the deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    out = HandOver()
    pending: dict[str, RaftGroup] = {}
    for name, group in list(cluster.groups.items()):
        if (names is None or name in names) and group.is_leader:
            if any(cluster.is_reachable(p) for p in group.peers):
                pending[name] = group
            else:
                out.alone.append(name)
    refused: set[str] = set(pending)  # "refused" here means: ask (again)
    asked: dict[str, float] = {}
    me = cluster.node_id
    while pending:
        now = loop.time()
        for name in list(pending):
            group = pending[name]
            if cluster.groups.get(name) is not group:  # closed meanwhile (the queue was deleted)
                del pending[name]
            elif not group.is_leader:
                # done once the successor is known here: it won its election, so the group
                # is not left leaderless when this node goes
                if group.leader_id not in (None, me):
                    out.moved[name] = group.leader_id
                    del pending[name]
            elif name in refused or now - asked.get(name, now) >= TOLD_AGAIN_AFTER:
                refused.discard(name)
                asked[name] = now
                _ask(cluster, name, group, _successor(cluster, group, set(avoid)), refused)
        if not pending or loop.time() >= deadline:
            break
        await asyncio.sleep(RETRY_INTERVAL)
    out.kept = sorted(n for n, g in pending.items() if g.is_leader)
    out.moved.update({n: "" for n, g in pending.items() if not g.is_leader})  # an election still running
    return out


async def move_leader(cluster: Cluster, name: str, to: str, timeout: float = 10.0) -> bool:
    """On the leader of group `name`: make member `to` lead it. True once `to` leads (as this
    node sees it), False if it did not by the deadline or this node does not lead the group."""
    group = cluster.groups.get(name)
    if group is None or not group.is_leader or to not in group.peers:
        return group is not None and group.leader_id == to
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    refused = {name}
    asked = loop.time()
    while loop.time() < deadline:
        if cluster.groups.get(name) is not group:
            return False
        if not group.is_leader:
            if group.leader_id == to:
                return True
            if group.leader_id is not None:
                return False  # another member won an election meanwhile
        elif name in refused or loop.time() - asked >= TOLD_AGAIN_AFTER:
            refused.discard(name)
            asked = loop.time()
            _ask(cluster, name, group, to, refused)
        await asyncio.sleep(RETRY_INTERVAL)
    return False


def hold_elections(cluster: Cluster, saved: dict[str, tuple[float, float]]) -> None:
    """This node calls no election of its own in any group it hosts (maintenance); the bounds
    in force go to `saved` so that `release_elections` puts them back."""
    for name, group in cluster.groups.items():
        if name not in saved:
            saved[name] = group.election_timeouts
            group.set_election_timeouts(*HELD_ELECTION_TIMEOUTS)


def release_elections(cluster: Cluster, saved: dict[str, tuple[float, float]]) -> None:
    for name, bounds in saved.items():
        group = cluster.groups.get(name)
        if group is not None:
            group.set_election_timeouts(*bounds)
    saved.clear()
