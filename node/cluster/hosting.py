"""The Raft groups a node hosts and the ticks that drive them (part of Cluster, node/cluster/cluster.py).

Every group of the node, the metadata group and one per quorum queue, runs
on the node's loop over the node's transport and log. A group does its work
in `tick()`: it appends proposals, computes the commit index, applies
entries, sends heartbeats and calls elections. A group with news (a message
or a proposal for it, a peer up or down, a role change) is ticked in the
next loop turn. Otherwise the metadata group is ticked every tick_interval
and any other group only when its own next timer is due
(`RaftGroup.next_tick_due`, checked every TIMER_SCAN_PERIODS), so that
hundreds of idle quorum queues cost a comparison each per scan.

The metadata group sends each entry at once (appendEntriesUseBatch=False)
instead of with the next heartbeat: metadata changes are few and someone
waits for each (~5 ms per change on loopback, fsync included).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from node.cluster.errors import ClusterError
from node.cluster.proposals import Noop
from raft.config import DEFAULTS as RAFT_DEFAULTS
from raft.config import make_conf
from raft.group import Machine, ProposalOutcome, RaftGroup, monotonic
from raft.transport import GroupTransport, NodeTransport

if TYPE_CHECKING:
    from node.cluster.cluster import Cluster

__all__ = ["METADATA", "GroupHost"]

log = logging.getLogger("warren.cluster")

METADATA = "metadata"  # the metadata group's name on the transport and in the log
# Groups other than the metadata one are checked for a due timer every 5th period (100 ms):
# their timers are heartbeats of 1.5 s and elections after 2-4 s.
TIMER_SCAN_PERIODS = 5
# A joining node waits this long before it may call an election, so that it
# hears from the cluster's leader first instead of disrupting it.
JOIN_ELECTION_TIMEOUT = (10.0, 12.0)


class HostedMachine:
    """The machine as the metadata group sees it: cluster-level records (Noop) stop here."""

    def __init__(self, machine: Machine) -> None:
        self.machine = machine

    def apply(self, record: Any, index: int) -> Any:
        if type(record) is Noop:
            return None
        return self.machine.apply(record, index)

    def snapshot(self) -> bytes:
        return self.machine.snapshot()

    def restore(self, data: bytes) -> None:
        self.machine.restore(data)


class KickingTransport(GroupTransport):
    """A GroupTransport that asks for a tick of its group when something arrives for it."""

    def __init__(self, nt: NodeTransport, group: str, self_node: str, others: list[str],
                 kick: Callable[[str], None]) -> None:  # fmt: skip
        self._kick = kick
        super().__init__(nt, group, self_node, others)

    def _deliver(self, peer: str, payload: bytes) -> None:
        super()._deliver(peer, payload)
        self._kick(self.group)

    def _peer_up(self, peer: str) -> None:
        super()._peer_up(peer)
        self._kick(self.group)

    def _peer_down(self, peer: str) -> None:
        super()._peer_down(peer)
        self._kick(self.group)


class GroupHost:
    """Every Raft group this node hosts, by name, and the ticks that drive them.

    Part of the Cluster: it reads the cluster's node id, transport, log,
    identity and failure state, and reports a failing group to `cluster.fatal`."""

    def __init__(self, cluster: Cluster, machine: Machine, tick_interval: float,
                 raft_overrides: dict[str, Any]) -> None:  # fmt: skip
        self.cluster = cluster
        self.hosted = HostedMachine(machine)
        self._blank = machine.snapshot()  # the machine is given empty: what a reset restores
        self.tick_interval = tick_interval
        self.raft_overrides = raft_overrides
        self.groups: dict[str, RaftGroup] = {}
        self.joining = False  # the metadata group runs with a joining node's long election timeouts
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._dirty: set[str] = set()  # groups to tick at once (call_soon)
        self._periods = 0
        self._last_role: tuple[bool, str | None] = (False, None)

    @property
    def metadata(self) -> RaftGroup | None:
        return self.groups.get(METADATA)

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Kicks are scheduled on `loop` from now on."""
        self._loop = loop

    def start_ticking(self) -> None:
        self._timer = self._loop.call_later(self.tick_interval, self._periodic)

    def stop_ticking(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def close_all(self) -> None:
        for group in self.groups.values():
            group.destroy()
        self.groups.clear()

    # -- the metadata group ----------------------------------------------------------

    def open_metadata(self, others: list[str], joining: bool = False) -> None:
        c = self.cluster
        overrides: dict[str, Any] = {
            # metadata changes are few and waited for: send each at once rather than per heartbeat
            "appendEntriesUseBatch": False,
            "onStateChanged": lambda _old, _new: self.kick(METADATA),
            **self.raft_overrides,
        }
        if joining:
            overrides["raftMinTimeout"], overrides["raftMaxTimeout"] = JOIN_ELECTION_TIMEOUT
            # only pysyncobj's TCP transport reads it, but validate() wants it >= raftMaxTimeout
            overrides["connectionTimeout"] = max(JOIN_ELECTION_TIMEOUT)
        conf = make_conf(os.path.join(c.identity.dir, METADATA), c.log.journal(METADATA), **overrides)
        transport = KickingTransport(c.transport, METADATA, c.node_id, others, self.kick)
        self.groups[METADATA] = RaftGroup(c.node_id, others, conf, self.hosted, transport=transport)
        self.joining = joining

    def reset_metadata(self, others: list[str], joining: bool) -> None:
        """Drop this node's metadata and start the group afresh with these peers."""
        c = self.cluster
        self.groups.pop(METADATA).destroy()
        c.log.drop_group(METADATA)
        c.log.flush()
        group_dir = os.path.join(c.identity.dir, METADATA)
        for name in os.listdir(group_dir):
            if name.startswith("snapshot"):
                os.remove(os.path.join(group_dir, name))
        self.hosted.restore(self._blank)
        c.identity.save_members(sorted({c.node_id, *others}))
        self.open_metadata(others, joining)

    def end_joining(self) -> None:
        """Back to the usual election timeouts (they are read at each election)."""
        group = self.metadata
        if self.joining and group is not None:
            usual = {**RAFT_DEFAULTS, **self.raft_overrides}
            group.set_election_timeouts(usual["raftMinTimeout"], usual["raftMaxTimeout"])
            self.joining = False

    # -- other groups (one per quorum queue) ------------------------------------------

    def open_group(self, name: str, members: list[str], machine: Machine, **overrides: Any) -> RaftGroup:
        """Start (or restart from its journal) the Raft group `name` of these members on this node."""
        if name in self.groups:
            raise ClusterError(f"raft group {name!r} is already open")
        c = self.cluster
        others = [m for m in members if m != c.node_id]
        journal = c.log.journal(name)
        try:
            conf = make_conf(os.path.join(c.identity.dir, name), journal,
                             onStateChanged=lambda _old, _new: self.kick(name), **overrides)  # fmt: skip
            transport = KickingTransport(c.transport, name, c.node_id, others, self.kick)
            group = RaftGroup(c.node_id, others, conf, machine, transport=transport)
        except BaseException:
            journal._destroy()  # so that opening it again is possible
            raise
        self.groups[name] = group
        self.kick(name)
        return group

    def close_group(self, name: str, drop: bool = False) -> None:
        """Stop the group here; `drop` also deletes its journal, side data and snapshot."""
        group = self.groups.pop(name, None)
        if group is not None:
            group.destroy()
        log_ = self.cluster.log
        if drop and log_ is not None:
            log_.drop_group(name)
            log_.delete_blobs(name)
            shutil.rmtree(os.path.join(self.cluster.identity.dir, name), ignore_errors=True)

    def submit(self, name: str, record: Any, callback: Callable[[Any, ProposalOutcome], None] | None = None) -> bool:
        """Hand `record` to group `name` (forwarded to its leader); False if the group is not open here."""
        group = self.groups.get(name)
        if group is None or self.cluster.failed is not None or not self.cluster.running:
            return False
        group.propose(record, callback=callback)
        self.kick(name)
        return True

    # -- ticking ------------------------------------------------------------------------

    def written(self) -> None:
        """A write of the Raft log landed: send what it held back, and tick the groups that
        appended entries, whose leader may now count itself for them (a one-member group
        hears from no follower, so nothing else would tick it to commit)."""
        log_ = self.cluster.log
        log_.release_durable()
        for name in log_.groups_made_durable():
            self.kick(name)

    def kick(self, name: str = METADATA) -> None:
        """Tick group `name` in the next loop turn."""
        if self._loop is None:
            return
        if not self._dirty:
            self._loop.call_soon(self._tick_dirty)
        self._dirty.add(name)

    def _tick_dirty(self) -> None:
        names, self._dirty = self._dirty, set()
        for name in names:
            self._tick(name)

    def _periodic(self) -> None:
        self._timer = self._loop.call_later(self.tick_interval, self._periodic)
        self._tick(METADATA)
        self._periods += 1
        if self._periods % TIMER_SCAN_PERIODS:
            return
        now = monotonic()
        for name, group in list(self.groups.items()):
            if name != METADATA and group.next_tick_due() <= now:
                self._tick(name)

    def _tick(self, name: str) -> None:
        group = self.groups.get(name)
        if group is None or self.cluster.failed is not None:
            return
        try:
            group.tick()
        except Exception as e:
            # A journal or snapshot failure is fail-stop, and a machine that
            # raises on a committed entry raises again at every tick.
            self.cluster.fatal(e)
            return
        if group.apply_pending():
            self.kick(name)  # applies a bounded step per tick (a restart's long log): the rest next turn
        if name == METADATA:
            self._observe(group)

    def _observe(self, group: RaftGroup) -> None:
        """Remember membership changes on disk; log role and leader changes."""
        identity = self.cluster.identity
        members = sorted([identity.node_id, *group.peers])
        if members != identity.saved_members:
            identity.save_members(members)
            log.info("cluster members: %s", ",".join(members))
        role = (group.is_leader, group.leader_id)
        if role != self._last_role:
            self._last_role = role
            log.info("metadata group: term %d, leader %s%s", group.term, role[1],
                     " (this node)" if role[0] else "")  # fmt: skip
