"""The node's part in the cluster: its Raft groups, their transport, their log.

    Cluster (one per node, owned by the Broker, on the node's loop)
      - NodeTransport (raft/transport.py) on the cluster port: every group's
        messages to and from the peers, one gRPC stream per peer,
        authenticated by the cluster secret, optionally over mutual TLS
      - DurableLog (raft/journal.py) at <data_dir>/raft: the journal of every
        group, written and fsynced by a GroupCommitter on its own thread (one
        write in flight, what the loop wrote meanwhile in the next); the
        transport sends nothing a sync has not covered (`before_flush` gate)
      - the metadata RaftGroup (raft/group.py), replicating records into the
        Machine given to the constructor (the Broker gives
        node/cluster/machine.py's ClusterMachine: the metadata machine and
        the key-value probe side by side); the group's
        snapshot is <data_dir>/cluster/metadata/snapshot
      - the ticker: `doTick` for a group as soon as it has work (a message
        arrived, a command was proposed, a peer came or went), the
        metadata group every `tick_interval` (20 ms) and any other group
        when its next timer is due

Identity. A node's id is "advertise_host:grpc_port", the address its peers
dial and its name in every group; it must not change across restarts, so
the data directory remembers it (<data_dir>/cluster/members.json, with the
last membership seen) and a node started under another id refuses to run.

Membership. A node without seeds is a cluster of one. Nodes started with
the same seeds (the others' ids) form a cluster on their first boot; after
that the remembered membership wins over the seeds, as RabbitMQ's peer
discovery runs only on a blank node. `join_cluster(seed)` resets this node
(its metadata is dropped, as rabbitmqctl's join_cluster does) and has the
seed's cluster add it; `forget_cluster_node(node)` removes a member (stop it
first). Both use pysyncobj's one-at-a-time membership changes. The joining
node asks the seed over node messages (node/cluster/rpc.py), so it needs
only the seed's cluster address and the secret. A joining node starts with
long election timeouts, so that it hears from the leader before it could
call an election and disrupt the cluster.

Commands. `await propose(record, timeout)` hands the record to the group on
this node; pysyncobj forwards it to the leader when this node follows
(`apply_command`), and the proposer's callback runs when this node has
applied the entry, so a successful propose is committed by a majority and
visible in this node's machine (read-your-writes). Failures that certainly
did not commit (no leader yet, a follower that lost its leader, an entry
replaced by a new leader's) are retried until the timeout; when the leader
changed while the command was in flight the outcome is unknown, and it is
retried only for idempotent records (`idempotency_key`, or `idempotent=True`),
else reported as OutcomeUnknown. Past the timeout: NoQuorum when this node
does not reach a majority of the members, CommitTimeout otherwise.
`await fence()` commits a no-op through the leader: once it returns, every
change committed before it is applied here (Khepri's consistent read).
A stopping leader hands leadership to its most caught-up follower first.

The metadata group sends each entry at once (appendEntriesUseBatch=False)
instead of with the next heartbeat: metadata changes are few and someone
waits for each (~5 ms per change on loopback, fsync included).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import shutil
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from node.cluster.liveness import GroupLiveness
from node.cluster.rpc import NodeRpc, RpcError, RpcUnreachable
from raft.config import DEFAULTS as RAFT_DEFAULTS
from raft.config import make_conf
from raft.group import Machine, ProposalOutcome, RaftGroup, Role, monotonic
from raft.journal import DurableLog
from raft.records import command
from raft.transport import GroupTransport, NodeTransport, TlsConfig, TransportOptions
from storage.group_commit import GroupCommitter

if TYPE_CHECKING:
    from node.config import Config

__all__ = [
    "Cluster",
    "ClusterError",
    "ClusterUnavailable",
    "CommitTimeout",
    "MembershipError",
    "NoQuorum",
    "Noop",
    "OutcomeUnknown",
]

log = logging.getLogger("warren.cluster")

METADATA = "metadata"  # the metadata group's name on the transport and in the log
MEMBERS_FORMAT = 1
# Certainly not appended, or certainly not committed: safe to propose again.
_RETRY = frozenset({ProposalOutcome.MISSING_LEADER, ProposalOutcome.NOT_LEADER, ProposalOutcome.DISCARDED,
                    ProposalOutcome.QUEUE_FULL})  # fmt: skip
# The leader changed while the command was in flight: it may have committed.
_AMBIGUOUS = frozenset({ProposalOutcome.LEADER_CHANGED, ProposalOutcome.UNKNOWN_OUTCOME})
_RETRY_MIN, _RETRY_MAX = 0.02, 0.25
# Groups other than the metadata one are checked for a due timer every 5th period (100 ms):
# their timers are heartbeats of 1.5 s and elections after 2-4 s.
TIMER_SCAN_PERIODS = 5
_ATTEMPT_TIMEOUT = 1.5  # seconds an idempotent proposal waits for its answer before it is made again
_SERVE_ADD_TIMEOUT = 20.0  # how long a member works at adding a joining node
_STEP_DOWN_TIMEOUT = 1.0  # how long a stopping leader waits for a successor
_SEED_CONNECT_TIMEOUT = 10.0  # how long join_cluster tries to reach its seed
# A joining node waits this long before it may call an election, so that it
# hears from the cluster's leader first instead of disrupting it.
_JOIN_ELECTION_TIMEOUT = (10.0, 12.0)


class ClusterError(Exception):
    """A cluster operation that failed."""


class ClusterUnavailable(ClusterError):
    """Nothing could be committed in time (HTTP 503)."""


class NoQuorum(ClusterUnavailable):
    def __init__(self, reachable: int, members: int) -> None:
        super().__init__(f"cluster has no majority: {reachable} of {members} members reachable")
        self.reachable, self.members = reachable, members


class CommitTimeout(ClusterUnavailable):
    """A majority is reachable but the command did not commit in time (an election, a slow disk)."""


class OutcomeUnknown(ClusterUnavailable):
    """The leader changed while a non-idempotent command was in flight; it may or may not have committed."""


class MembershipError(ClusterError):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status  # the HTTP status the API answers with


# -------------------------------------------------------------------- records


@command("cluster.noop", version=1)
@dataclass(frozen=True)
class Noop:
    """Committed by `fence()`; applies to nothing."""


class _Hosted:
    """The machine as the group sees it: cluster-level records (Noop) stop here."""

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


class _KickingTransport(GroupTransport):
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


# -------------------------------------------------------------------- the cluster


class Cluster:
    """Create, `await start()`, use on the loop, `await stop()`."""

    def __init__(
        self,
        *,
        data_dir: str,
        machine: Machine,
        listen_host: str = "127.0.0.1",
        port: int = 25672,
        advertise_host: str = "",
        seeds: list[str] | tuple[str, ...] | str = (),
        secret: str = "",
        tls: TlsConfig | None = None,
        tick_interval: float = 0.02,
        command_timeout: float = 5.0,
        snapshot_entries: int = 5000,
        raft_overrides: dict[str, Any] | None = None,
        transport_options: TransportOptions | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.machine = machine
        self._hosted = _Hosted(machine)
        self._blank = machine.snapshot()  # the machine is given empty: what a reset restores
        self._listen_host = listen_host
        self._port = port
        self._advertise_host = advertise_host or _default_advertise_host(listen_host)
        if isinstance(seeds, str):  # "host:port,host:port", as a TOML string
            seeds = seeds.split(",")
        self._seeds = [s.strip() for s in seeds if s.strip()]
        self._secret = secret
        self._tls = tls
        self.tick_interval = tick_interval
        self.command_timeout = command_timeout
        self._raft_overrides = {"logCompactionMinEntries": snapshot_entries, **(raft_overrides or {})}
        self._transport_options = transport_options
        self.node_id: str = ""
        self.transport: NodeTransport | None = None
        self.log: DurableLog | None = None
        self._committer: GroupCommitter | None = None
        self.rpc: NodeRpc | None = None
        self.liveness: GroupLiveness | None = None
        self._periods = 0
        # Every Raft group this node hosts, by name; only the metadata group so far.
        self.groups: dict[str, RaftGroup] = {}
        self.failed: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._dir = os.path.join(data_dir, "cluster")
        self._members_file = os.path.join(self._dir, "members.json")
        self._saved_members: list[str] = []
        self._timer: asyncio.TimerHandle | None = None
        self._dirty: set[str] = set()  # groups to tick at once (call_soon)
        self._running = False
        self._joining = False
        self._last_role: tuple[bool, str | None] = (False, None)
        self._pending: set[asyncio.Future] = set()
        # calls other parts of the node serve over node messages: method -> handler(peer, args)
        self.calls: dict[str, Callable[[str, dict], Any]] = {}

    @property
    def group(self) -> RaftGroup | None:
        """The metadata group."""
        return self.groups.get(METADATA)

    @classmethod
    def from_config(cls, cfg: Config, machine: Machine) -> Cluster:
        tls_files = (cfg.cluster_tls_cert, cfg.cluster_tls_key, cfg.cluster_tls_ca)
        if any(tls_files) and not all(tls_files):
            raise ValueError("cluster TLS needs all of cluster_tls_cert, cluster_tls_key and cluster_tls_ca")
        if cfg.seeds and not cfg.cluster_secret:
            raise ValueError("--seeds needs --cluster-secret (the same on every member)")
        return cls(data_dir=cfg.data_dir, machine=machine, listen_host=cfg.listen_host, port=cfg.grpc_port,
                   advertise_host=cfg.advertise_host, seeds=cfg.seeds, secret=cfg.cluster_secret,
                   tls=TlsConfig(*tls_files) if all(tls_files) else None, tick_interval=cfg.cluster_tick_interval,
                   command_timeout=cfg.cluster_command_timeout,
                   snapshot_entries=cfg.cluster_snapshot_entries)  # fmt: skip

    # -- lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        os.makedirs(self._dir, exist_ok=True)
        # Port 0: a free port on the first boot, then the same one (the id must be known before binding).
        port = self._port or self._remembered_port() or _free_port(self._listen_host)
        self.node_id = f"{self._advertise_host}:{port}"
        members = self._load_members()
        if members is None:
            members = sorted({self.node_id, *self._seeds})
            self._save_members(members)
        elif self._seeds and set(self._seeds) - set(members):
            log.warning("ignoring seeds %s: this node already belongs to %s (use join_cluster to move it)",
                        ",".join(self._seeds), ",".join(members))  # fmt: skip
        self.transport = NodeTransport(listen=f"{self._listen_host}:{port}", node_id=self.node_id,
                                       secret=self._secret or self._load_or_make_secret(), tls=self._tls,
                                       options=self._transport_options, on_error=self._fatal)  # fmt: skip
        try:
            await self.transport.start()
            self.log = DurableLog(os.path.join(self.data_dir, "raft"))
            # one fsync in flight at a time, on its own thread: the loop goes on meanwhile, and
            # what it writes during one fsync goes out together in the next
            self._committer = GroupCommitter(self.log, self._loop, on_error=self._fatal,
                                             on_written=self._written)  # fmt: skip
            self.transport.before_flush.append(self.log.sync_point)
            self.rpc = NodeRpc(self.transport, self._serve_call)
            self.liveness = GroupLiveness(self, skip=METADATA)
            self._open_group([m for m in members if m != self.node_id])
        except BaseException:
            await self._close()
            raise
        self._running = True
        self._timer = self._loop.call_later(self.tick_interval, self._periodic)
        self.liveness.start(self._loop)
        log.info("cluster node %s, members %s", self.node_id, ",".join(members))

    async def stop(self) -> None:
        """Hand leadership over if this node leads, then stop; pending proposals fail."""
        if not self._running:
            return
        await self._step_down(_STEP_DOWN_TIMEOUT)
        self._running = False
        if self._timer is not None:
            self._timer.cancel()
        self._fail_pending(ClusterError("the node is stopping"))
        await self._close()

    async def _close(self) -> None:
        if self.liveness is not None:
            self.liveness.stop()
        if self.rpc is not None:
            await self.rpc.close()
        for group in self.groups.values():
            group.destroy()
        self.groups.clear()
        if self.transport is not None:
            await self.transport.close()
        if self._committer is not None:
            try:
                await self._committer.close()
            except Exception:
                log.exception("the last raft log commit failed")
        if self.log is not None:
            try:
                self.log.close()
            except Exception:
                log.exception("closing the raft log failed")

    async def _step_down(self, timeout: float) -> None:
        """Leading: ask the most caught-up follower to take over (Raft's TimeoutNow), shortening failover."""
        group = self.group
        if group is None or self.failed is not None or not group.is_leader or not group.peers:
            return
        refused: list[ProposalOutcome] = []
        group.transfer_leadership(lambda _res, out: out is not ProposalOutcome.SUCCESS and refused.append(out))
        self._kick(METADATA)
        loop = self._loop
        deadline = loop.time() + timeout
        while not refused and group.is_leader and loop.time() < deadline:
            await asyncio.sleep(0.01)

    def _fatal(self, e: BaseException) -> None:
        """The log or the transport failed: nothing more may be acknowledged (fail-stop)."""
        if self.failed is None:
            self.failed = e
            log.critical("the cluster part of this node stopped: %s", e, exc_info=e)
            self._fail_pending(ClusterError(f"the cluster part of this node stopped: {e}"))

    def _fail_pending(self, e: ClusterError) -> None:
        for fut in list(self._pending):
            if not fut.done():
                fut.set_exception(e)

    # -- the group ---------------------------------------------------------------------

    def _open_group(self, others: list[str], joining: bool = False) -> None:
        overrides: dict[str, Any] = {
            # metadata changes are few and waited for: send each at once rather than per heartbeat
            "appendEntriesUseBatch": False,
            "onStateChanged": lambda _old, _new: self._kick(METADATA),
            **self._raft_overrides,
        }
        if joining:
            overrides["raftMinTimeout"], overrides["raftMaxTimeout"] = _JOIN_ELECTION_TIMEOUT
            # only pysyncobj's TCP transport reads it, but validate() wants it >= raftMaxTimeout
            overrides["connectionTimeout"] = max(_JOIN_ELECTION_TIMEOUT)
        conf = make_conf(os.path.join(self._dir, METADATA), self.log.journal(METADATA), **overrides)
        transport = _KickingTransport(self.transport, METADATA, self.node_id, others, self._kick)
        self.groups[METADATA] = RaftGroup(self.node_id, others, conf, self._hosted, transport=transport)
        self._joining = joining

    # -- other groups (one per quorum queue) ------------------------------------------

    def open_group(self, name: str, members: list[str], machine: Machine, **overrides: Any) -> RaftGroup:
        """Start (or restart from its journal) the Raft group `name` of these members on this node."""
        if name in self.groups:
            raise ClusterError(f"raft group {name!r} is already open")
        others = [m for m in members if m != self.node_id]
        journal = self.log.journal(name)
        try:
            conf = make_conf(os.path.join(self._dir, name), journal,
                             onStateChanged=lambda _old, _new: self._kick(name), **overrides)  # fmt: skip
            transport = _KickingTransport(self.transport, name, self.node_id, others, self._kick)
            group = RaftGroup(self.node_id, others, conf, machine, transport=transport)
        except BaseException:
            journal._destroy()  # so that opening it again is possible
            raise
        self.groups[name] = group
        self._kick(name)
        return group

    def close_group(self, name: str, drop: bool = False) -> None:
        """Stop the group here; `drop` also deletes its journal, side data and snapshot."""
        group = self.groups.pop(name, None)
        if group is not None:
            group.destroy()
        if drop and self.log is not None:
            self.log.drop_group(name)
            self.log.delete_blobs(name)
            shutil.rmtree(os.path.join(self._dir, name), ignore_errors=True)

    def submit(self, name: str, record: Any, callback: Callable[[Any, ProposalOutcome], None] | None = None) -> bool:
        """Hand `record` to group `name` (forwarded to its leader); False if the group is not open here."""
        group = self.groups.get(name)
        if group is None or self.failed is not None or not self._running:
            return False
        group.propose(record, callback=callback)
        self._kick(name)
        return True

    def _end_joining(self) -> None:
        """Back to the usual election timeouts (pysyncobj reads them from the conf at each election)."""
        if self._joining and self.group is not None:
            usual = {**RAFT_DEFAULTS, **self._raft_overrides}
            self.group.set_election_timeouts(usual["raftMinTimeout"], usual["raftMaxTimeout"])
            self._joining = False

    def _reset_group(self, others: list[str], joining: bool) -> None:
        """Drop this node's metadata and start the group afresh with these peers."""
        self._fail_pending(ClusterError("this node's cluster membership was reset"))
        self.groups.pop(METADATA).destroy()
        self.log.drop_group(METADATA)
        self.log.flush()
        for name in os.listdir(os.path.join(self._dir, METADATA)):
            if name.startswith("snapshot"):
                os.remove(os.path.join(self._dir, METADATA, name))
        self._hosted.restore(self._blank)
        self._save_members(sorted({self.node_id, *others}))
        self._open_group(others, joining)

    # Ticking. pysyncobj does its work in doTick: it appends proposals,
    # computes the commit index, applies entries, sends heartbeats and calls
    # elections. A group with news (a message or a proposal for it, a peer up
    # or down, a role change) is ticked in the next loop turn. Otherwise the
    # metadata group is ticked every tick_interval and any other group only
    # when its own next timer is due (`SafeSyncObj.next_tick_due`, checked
    # every TIMER_SCAN_PERIODS), so that hundreds of idle quorum queues cost
    # a comparison each per scan.

    def _written(self) -> None:
        """A write of the Raft log landed: send what it held back, and tick the groups that
        appended entries, whose leader may now count itself for them (a one-member group
        hears from no follower, so nothing else would tick it to commit)."""
        self.log.release_durable()
        for name in self.log.groups_made_durable():
            self._kick(name)

    def _kick(self, name: str = METADATA) -> None:
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
        if group is None or self.failed is not None:
            return
        try:
            group.tick()
        except Exception as e:
            # A journal or snapshot failure is fail-stop, and a machine that
            # raises on a committed entry raises again at every tick.
            self._fatal(e)
            return
        if name == METADATA:
            self._observe(group)

    def _observe(self, group: RaftGroup) -> None:
        """Remember membership changes on disk; log role and leader changes."""
        members = sorted([self.node_id, *group.peers])
        if members != self._saved_members:
            self._save_members(members)
            log.info("cluster members: %s", ",".join(members))
        role = (group.is_leader, group.leader_id)
        if role != self._last_role:
            self._last_role = role
            log.info("metadata group: term %d, leader %s%s", group.term, role[1],
                     " (this node)" if role[0] else "")  # fmt: skip

    # -- commands -------------------------------------------------------------------------

    async def propose(self, record: Any, timeout: float | None = None, *, idempotent: bool | None = None) -> Any:
        """Commit `record` through the leader and return what this node's machine returned for it."""
        loop = self._loop
        timeout = self.command_timeout if timeout is None else timeout
        if idempotent is None:
            idempotent = type(record) is Noop or bool(getattr(record, "idempotency_key", None))
        deadline = loop.time() + timeout
        delay = _RETRY_MIN
        in_doubt = False  # an attempt went unanswered or was cut short: it may yet commit
        while True:
            # An idempotent record is proposed again when no answer comes within
            # _ATTEMPT_TIMEOUT: a forward lost with its stream gets no answer at all.
            attempt = min(deadline, loop.time() + _ATTEMPT_TIMEOUT) if idempotent else deadline
            may_land = self._may_land()
            try:
                result, error = await self._submit(lambda cb: self._live_group().propose(record, callback=cb),
                                                   attempt, timeout)  # fmt: skip
            except ClusterUnavailable:
                in_doubt = in_doubt or may_land
                if attempt >= deadline:
                    raise self._unavailable(timeout, in_doubt) from None
                continue
            if error is ProposalOutcome.SUCCESS:
                return result
            if error in _AMBIGUOUS and not idempotent:
                raise OutcomeUnknown(f"the leader changed while the command was in flight ({error.value});"
                                     " it may or may not have been committed")  # fmt: skip
            if error not in _RETRY and error not in _AMBIGUOUS:
                raise ClusterError(f"command refused: {error.value}")
            in_doubt = in_doubt or error in _AMBIGUOUS
            delay = await self._backoff(delay, deadline, timeout, in_doubt)

    async def fence(self, timeout: float | None = None) -> None:
        """Commit a no-op through the leader: afterwards this node has applied every earlier change."""
        await self.propose(Noop(), timeout, idempotent=True)

    async def _submit(self, send: Callable[[Callable], None], deadline: float, timeout: float,
                      group: str = METADATA) -> tuple[Any, ProposalOutcome]:  # fmt: skip
        fut = self._loop.create_future()

        def done(result: Any, error: ProposalOutcome) -> None:
            if not fut.done():
                fut.set_result((result, error))

        self._pending.add(fut)
        try:
            send(done)
            self._kick(group)
            try:
                return await asyncio.wait_for(fut, max(0.0, deadline - self._loop.time()))
            except TimeoutError:
                raise self._unavailable(timeout) from None
        finally:
            self._pending.discard(fut)

    def _may_land(self) -> bool:
        """Whether a proposal made now can reach a leader's log: this node leads, or
        the leader it knows is reachable (else pysyncobj's forward is dropped at once)."""
        group = self.group
        if group is None:
            return False
        leader = group.leader_id
        return group.is_leader or (leader is not None and self.is_reachable(leader))

    async def _backoff(self, delay: float, deadline: float, timeout: float, in_doubt: bool = False) -> float:
        if self._loop.time() + delay >= deadline:
            raise self._unavailable(timeout, in_doubt)
        await asyncio.sleep(delay)
        return min(delay * 2, _RETRY_MAX)

    def _live_group(self) -> RaftGroup:
        if self.failed is not None:
            raise ClusterError(f"the cluster part of this node stopped: {self.failed}")
        if self.group is None or not self._running:
            raise ClusterError("the cluster part of this node is not running")
        return self.group

    def _unavailable(self, timeout: float, in_doubt: bool = False) -> ClusterUnavailable:
        """Why nothing committed in time. NoQuorum and CommitTimeout promise the
        command was not applied; `in_doubt` (an attempt may still commit, e.g.
        appended by a leader cut off right after) gives OutcomeUnknown instead."""
        reachable, total = self._reachability()
        if in_doubt:
            return OutcomeUnknown(f"not committed within {timeout:g}s ({reachable} of {total} members reachable);"
                                  " the command was in flight and may still be applied")  # fmt: skip
        if reachable * 2 <= total:
            return NoQuorum(reachable, total)
        leader = self.group.leader_id if self.group is not None else None
        return CommitTimeout(f"not committed within {timeout:g}s ({reachable} of {total} members reachable,"
                             f" leader {leader or 'unknown'})")  # fmt: skip

    # -- status ---------------------------------------------------------------------------

    def members(self) -> list[str]:
        """Every member's id, this node's included (this node's view)."""
        if self.group is None:
            return [self.node_id]
        return sorted([self.node_id, *self.group.peers])

    def is_reachable(self, node: str) -> bool:
        nt = self.transport
        return node == self.node_id or (nt.is_connected(node) and not nt.is_partitioned(node))

    def _reachability(self) -> tuple[int, int]:
        members = self.members()
        return sum(1 for m in members if self.is_reachable(m)), len(members)

    def is_leader(self) -> bool:
        return self.group is not None and self.group.is_leader

    def status(self) -> dict:
        """This node's view of the metadata group."""
        base = {"node": self.node_id, "group": METADATA, "failed": None if self.failed is None else str(self.failed)}
        group = self.group
        if group is None:
            return {**base, "role": "stopped", "members": []}
        st = group.status()
        leader = st.leader
        members = []
        for m in self.members():
            entry: dict[str, Any] = {"node": m, "self": m == self.node_id, "reachable": self.is_reachable(m),
                                     "leader": m == leader}  # fmt: skip
            if st.role is Role.LEADER and m != self.node_id:
                entry["match_index"] = st.match_index.get(m)
            members.append(entry)
        reachable = sum(1 for m in members if m["reachable"])
        return {**base, "role": st.role.value, "term": st.term, "leader": leader,
                "leader_reachable": leader is not None and self.is_reachable(leader),
                "commit_index": st.commit_index, "last_applied": st.last_applied, "log_entries": st.log_entries,
                "members": members, "reachable": reachable, "majority": reachable * 2 > len(members),
                "joining": self._joining, "partitioned": sorted(self.transport.partitioned)}  # fmt: skip

    # -- fault switch (tests) ------------------------------------------------------------------

    def partition(self, peers: list[str] | None = None) -> list[str]:
        """Cut this node off from `peers` (default: every other member) until `heal`."""
        cut = [p for p in (peers if peers is not None else self.members()) if p != self.node_id]
        self.transport.partition(cut)
        return cut

    def heal(self, peers: list[str] | None = None) -> None:
        self.transport.heal(peers)

    # -- membership -----------------------------------------------------------------------------

    async def join_cluster(self, seed: str, timeout: float = 30.0) -> dict:
        """Reset this node and make it a member of `seed`'s cluster; returns the new status."""
        seed = seed.strip()
        if not seed or seed == self.node_id:
            raise MembershipError(f"cannot join {seed!r}: give another node's cluster address (host:port)")
        mine = self.members()
        loop = self._loop
        deadline = loop.time() + timeout
        if self._joining:  # an earlier join did not finish: ask again (adding is idempotent)
            if seed not in mine:
                raise MembershipError(f"a join of {', '.join(mine)} is unfinished: retry it through one of them",
                                      status=409)  # fmt: skip
        elif seed in mine:
            return self.status()  # already together
        elif len(mine) > 1:
            raise MembershipError(f"this node already belongs to a cluster of {len(mine)} ({', '.join(mine)}):"
                                  " forget it there first", status=409)  # fmt: skip
        else:
            # a wrong address should fail sooner than a slow join
            theirs = (await self._call(seed, "members", {},
                                       min(deadline, loop.time() + _SEED_CONNECT_TIMEOUT)))["members"]  # fmt: skip
            if not isinstance(theirs, list) or not all(isinstance(m, str) for m in theirs):
                raise MembershipError(f"{seed} answered an unreadable member list: {theirs!r}", status=502)
            if self.node_id in theirs:
                raise MembershipError(f"{seed}'s cluster already counts {self.node_id} as a member: run"
                                      f" forget_cluster_node {self.node_id} there first", status=409)  # fmt: skip
            log.warning("joining the cluster of %s (%s): this node's metadata is reset", seed, ",".join(theirs))
            self._reset_group(theirs, joining=True)
        try:
            await self._call(seed, "add", {"node": self.node_id}, deadline)
        except MembershipError as e:
            if e.status < 500:  # refused: certainly not added
                log.error("%s refused to add this node (%s): it is a cluster of one again", seed, e)
                self._reset_group([], joining=False)
            raise
        # Otherwise (no answer in time) the add may still commit: the node
        # stays joining, and join_cluster again finishes the job.
        await self.fence(max(1.0, deadline - loop.time()))  # caught up with the leader
        self._end_joining()
        return self.status()

    async def forget_cluster_node(self, node: str, timeout: float | None = None) -> dict:
        """Remove `node` (which should be stopped) from the cluster; returns the new status."""
        node = node.strip()
        if node == self.node_id:
            raise MembershipError("a node cannot forget itself: run forget_cluster_node on another member")
        if node not in self.members():
            raise MembershipError(f"{node} is not a member of this cluster", status=404)
        if self.group.leader_id == node:
            raise MembershipError(f"{node} is the leader: stop it, and forget it once another node leads",
                                  status=409)  # fmt: skip
        await self._change_membership("rem", node, self.command_timeout if timeout is None else timeout)
        return self.status()

    async def call(self, peer: str, method: str, args: dict, timeout: float | None = None) -> dict:
        """`method(args)` served by `peer` (see `calls`); raises MembershipError or ClusterUnavailable."""
        return await self._call(peer, method, args, self._loop.time() + (timeout or self.command_timeout))

    async def change_group_members(self, name: str, op: str, node: str, timeout: float | None = None) -> None:
        """On the leader of group `name`: add or remove `node` (pysyncobj's one-at-a-time change)."""
        group = self.groups.get(name)
        if group is None or not group.is_leader:
            raise MembershipError(f"this node does not lead raft group {name}", status=409)
        change = group.add_member if op == "add" else group.remove_member
        deadline = self._loop.time() + (timeout or self.command_timeout)
        _, error = await self._submit(lambda cb: change(node, callback=cb), deadline, timeout or self.command_timeout,
                                      name)  # fmt: skip
        if error is not ProposalOutcome.SUCCESS:
            raise MembershipError(f"raft group {name}: {op} {node} refused ({error.value})", 409)

    async def _change_membership(self, op: str, node: str, timeout: float) -> None:
        loop = self._loop
        deadline = loop.time() + timeout
        delay = _RETRY_MIN
        while True:
            if (node in self.members()) == (op == "add"):
                # Done (pysyncobj changes the membership when it appends the
                # entry); the fence commits it, or times out as any command.
                await self.fence(max(0.0, deadline - loop.time()))
                return
            group = self._live_group()
            change = group.add_member if op == "add" else group.remove_member
            _, error = await self._submit(lambda cb, change=change: change(node, callback=cb), deadline, timeout)
            if error is ProposalOutcome.SUCCESS:
                return
            # REQUEST_DENIED: the leader has an uncommitted change or has not
            # committed its first entry yet; try again.
            delay = await self._backoff(delay, deadline, timeout)

    # -- the join protocol (node messages, node/cluster/rpc.py) ---------------------------------

    async def _call(self, peer: str, method: str, args: dict, deadline: float) -> dict:
        try:
            return await self.rpc.call(peer, method, args, deadline)
        except RpcUnreachable as e:
            raise ClusterUnavailable(str(e)) from None
        except RpcError as e:
            raise MembershipError(str(e), e.status) from None

    async def _serve_call(self, peer: str, method: str, args: dict) -> dict:
        if not self._running:
            raise ClusterUnavailable("the node is not running")
        if method == "members":
            return {"members": self.members()}
        if method == "add":
            node = args.get("node")
            if node != peer:  # the stream's authenticated sender
                raise MembershipError(f"{peer} may only add itself, not {node!r}", status=403)
            await self._change_membership("add", node, _SERVE_ADD_TIMEOUT)
            log.info("%s joined the cluster", node)
            return {"members": self.members()}
        handler = self.calls.get(method)
        if handler is not None:
            return await handler(peer, args)
        raise MembershipError(f"unknown cluster call {method!r}")

    # -- files -------------------------------------------------------------------------------

    def _read_members_file(self) -> dict | None:
        try:
            with open(self._members_file) as f:
                return json.load(f)
        except FileNotFoundError:
            return None

    def _remembered_port(self) -> int | None:
        doc = self._read_members_file()
        host, _, port = str((doc or {}).get("node", "")).rpartition(":")
        return int(port) if host == self._advertise_host and port.isdigit() else None

    def _load_members(self) -> list[str] | None:
        doc = self._read_members_file()
        if doc is None:
            return None
        if doc.get("format") != MEMBERS_FORMAT:
            raise ClusterError(f"{self._members_file}: format {doc.get('format')}, this Warren reads {MEMBERS_FORMAT}")
        if doc.get("node") != self.node_id:
            raise ClusterError(f"{self.data_dir} holds the cluster state of node {doc.get('node')}, but this node's"
                               f" cluster id is {self.node_id}: advertise_host:grpc_port must not change")  # fmt: skip
        self._saved_members = sorted(doc["members"])
        return list(self._saved_members)

    def _save_members(self, members: list[str]) -> None:
        tmp = self._members_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"format": MEMBERS_FORMAT, "node": self.node_id, "members": members}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._members_file)
        _fsync_dir(self._dir)
        self._saved_members = list(members)

    def _load_or_make_secret(self) -> str:
        """A node started without a secret keeps a generated one (like Erlang's cookie)."""
        path = os.path.join(self._dir, "secret")
        try:
            with open(path) as f:
                return f.read().strip()
        except FileNotFoundError:
            pass
        secret = secrets.token_hex(32)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secret)
        return secret


def _default_advertise_host(listen_host: str) -> str:
    if listen_host in ("", "0.0.0.0", "::", "[::]"):
        return socket.getfqdn()
    return listen_host


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host.strip("[]") or "0.0.0.0", 0))
        return s.getsockname()[1]


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
