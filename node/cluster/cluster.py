"""The node's part in the cluster: its Raft groups, their transport, their log.

    Cluster (one per node, built by node/broker.py, on the node's loop)
      - NodeTransport (raft/transport.py) on the cluster port: every group's
        messages to and from the peers, one gRPC stream per peer,
        authenticated by the cluster secret, optionally over mutual TLS
      - DurableLog (raft/journal.py) at <data_dir>/raft: the journal of every
        group, written and fsynced by a GroupCommitter on its own thread (one
        write in flight, what the loop wrote meanwhile in the next); the
        transport sends nothing a sync has not covered (`before_flush` gate)
      - the metadata RaftGroup (raft/group.py), replicating records into the
        Machine given to the constructor (node/broker.py gives
        node/cluster/machine.py's ClusterMachine: the metadata machine and
        the key-value probe side by side); the group's
        snapshot is <data_dir>/cluster/metadata/snapshot

`Cluster` is the facade the rest of the node uses; each responsibility has
its own module in node/cluster/:

    identity.py     NodeIdentity: the node's id, members.json, the secret
    hosting.py      GroupHost: open and close groups, tick them (the metadata
                    group every `tick_interval`, 20 ms; the others when a
                    timer is due), and a kick when something arrives for one
    proposals.py    Proposer: propose with retries, fence, why it failed
    membership.py   Membership: join_cluster, forget_cluster_node, group
                    membership changes, the join protocol over node messages
    discovery.py    PeerDiscovery: --seeds-dns, a blank node joins or forms
                    the cluster of the nodes a DNS name resolves to
    errors.py       ClusterError and its kinds (mapped to HTTP statuses)

A stopping node hands each group it leads (the metadata group, its quorum queues') to the
most caught-up reachable member first (node/cluster/leadership.py), for up to
`handover_timeout` seconds.
`partition`/`heal` cut this node off from peers (the tests' fault switch).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from node.cluster.discovery import PeerDiscovery, Resolver, resolve_addresses
from node.cluster.errors import (
    ClusterError,
    ClusterUnavailable,
    CommitTimeout,
    MembershipError,
    NoQuorum,
    OutcomeUnknown,
)
from node.cluster.hosting import METADATA, GroupHost
from node.cluster.identity import NodeIdentity, default_advertise_host, seed_naming_this_node
from node.cluster.leadership import hand_over
from node.cluster.liveness import GroupLiveness
from node.cluster.membership import Membership
from node.cluster.proposals import Noop, Proposer
from node.cluster.rpc import NodeRpc
from node.workers.slots import node_of_peer
from raft.group import Machine, ProposalOutcome, RaftGroup, Role
from raft.journal import DurableLog
from raft.transport import NodeTransport, TlsConfig, TransportOptions
from storage.faults import DiskFaults
from storage.group_commit import GroupCommitter

if TYPE_CHECKING:
    from node.config import Config

__all__ = [
    "METADATA",
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
        handover_timeout: float = 5.0,
        seeds_dns: str = "",
        seeds_dns_timeout: float = 60.0,
        seeds_dns_retry_interval: float = 1.0,
        resolver: Resolver = resolve_addresses,
        retry_full: float = 1.0,
        disk_faults: DiskFaults | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.machine = machine
        self._listen_host = listen_host
        self._port = port
        if isinstance(seeds, str):  # "host:port,host:port", as a TOML string
            seeds = seeds.split(",")
        self._seeds = [s.strip() for s in seeds if s.strip()]
        self._secret = secret
        self._tls = tls
        self.command_timeout = command_timeout
        self.handover_timeout = handover_timeout
        self._transport_options = transport_options
        self._retry_full = retry_full  # seconds between the tries of a Raft log write that found the disk full
        self._disk_faults = disk_faults  # injected test faults (storage/faults.py), with enable_test_faults
        self.identity = NodeIdentity(data_dir, advertise_host or default_advertise_host(listen_host))
        self._advertise_given = bool(advertise_host)
        self.host = GroupHost(self, machine, tick_interval,
                              {"logCompactionMinEntries": snapshot_entries, **(raft_overrides or {})})  # fmt: skip
        self.proposer = Proposer(self)
        self.membership = Membership(self)
        self.discovery = PeerDiscovery(self, seeds_dns, port, resolver, seeds_dns_timeout, seeds_dns_retry_interval)
        self.transport: NodeTransport | None = None
        self.log: DurableLog | None = None
        self._committer: GroupCommitter | None = None
        self.rpc: NodeRpc | None = None
        self.liveness: GroupLiveness | None = None
        self.failed: BaseException | None = None
        self.loop: asyncio.AbstractEventLoop | None = None  # the node's loop, from start() on
        self.running = False
        # calls other parts of the node serve over node messages: method -> handler(peer, args)
        self.calls: dict[str, Callable[[str, dict], Any]] = {"discover": self.discovery.serve}

    @property
    def node_id(self) -> str:
        """This node's cluster id, advertise_host:grpc_port; set by start()."""
        return self.identity.node_id

    @property
    def tick_interval(self) -> float:
        return self.host.tick_interval

    @property
    def groups(self) -> dict[str, RaftGroup]:
        """Every Raft group this node hosts, by name: the metadata group and the quorum queues'."""
        return self.host.groups

    @property
    def group(self) -> RaftGroup | None:
        """The metadata group."""
        return self.host.metadata

    @classmethod
    def from_config(cls, cfg: Config, machine: Machine, disk_faults: DiskFaults | None = None) -> Cluster:
        tls_files = (cfg.cluster_tls_cert, cfg.cluster_tls_key, cfg.cluster_tls_ca)
        if any(tls_files) and not all(tls_files):
            raise ValueError("cluster TLS needs all of cluster_tls_cert, cluster_tls_key and cluster_tls_ca")
        if cfg.seeds and not cfg.cluster_secret:
            raise ValueError("--seeds needs --cluster-secret (the same on every member)")
        if cfg.seeds_dns and cfg.seeds:
            raise ValueError("--seeds-dns and --seeds both given: peers come from one of them")
        if cfg.seeds_dns and not cfg.cluster_secret:
            raise ValueError("--seeds-dns needs --cluster-secret (the same on every member)")
        if cfg.seeds_dns and cfg.grpc_port <= 0:
            raise ValueError("--seeds-dns needs a fixed --grpc-port: the peers' cluster port defaults to it")
        listen_host, port, advertise_host = cfg.listen_host, cfg.grpc_port, cfg.advertise_host
        if cfg.grpc_port < 0:
            # no cluster: a single-member metadata store whose Raft port (any free one,
            # kept across restarts) listens on loopback only, out of other machines' reach
            if cfg.seeds:
                raise ValueError("--grpc-port -1 runs a node without a cluster: it takes no --seeds")
            listen_host, port, advertise_host = "127.0.0.1", 0, "127.0.0.1"
        return cls(data_dir=cfg.data_dir, machine=machine, listen_host=listen_host, port=port,
                   advertise_host=advertise_host, seeds=cfg.seeds, secret=cfg.cluster_secret,
                   tls=TlsConfig(*tls_files) if all(tls_files) else None, tick_interval=cfg.cluster_tick_interval,
                   command_timeout=cfg.cluster_command_timeout,
                   snapshot_entries=cfg.cluster_snapshot_entries,
                   handover_timeout=cfg.shutdown_handover_timeout, seeds_dns=cfg.seeds_dns,
                   seeds_dns_timeout=cfg.seeds_dns_timeout,
                   seeds_dns_retry_interval=cfg.seeds_dns_retry_interval,
                   retry_full=cfg.alarm_check_interval if cfg.alarm_check_interval > 0 else 1.0,
                   disk_faults=disk_faults)  # fmt: skip

    # -- lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.host.bind(self.loop)
        identity = self.identity
        self._own_seed()
        discovery = self.discovery
        discover = discovery.enabled and discovery.blank()
        if discovery.enabled and not self._advertise_given:
            # peers know this node by its address in the DNS answer
            identity.advertise_host = await discovery.own_host()
        node_id = identity.choose(self._port, self._listen_host)
        members = identity.load_members()
        # a blank node with static seeds asks them first: they may be a cluster without it
        ask_seeds = bool(self._seeds) and discovery.blank()
        if members is None and not ask_seeds:
            members = [node_id] if discover else sorted({node_id, *self._seeds})
            if discover:
                discovery.mark()  # until it decides: a crash before then leaves the node blank
            identity.save_members(members)
        elif members is not None and self._seeds and set(self._seeds) - set(members):
            log.warning("ignoring seeds %s: this node already belongs to %s (use join_cluster to move it)",
                        ",".join(self._seeds), ",".join(members))  # fmt: skip
        self.transport = NodeTransport(listen=f"{self._listen_host}:{identity.port}", node_id=node_id,
                                       secret=self._secret or identity.load_or_make_secret(), tls=self._tls,
                                       options=self._transport_options, on_error=self.fatal)  # fmt: skip
        try:
            await self.transport.start()
            self.log = DurableLog(os.path.join(self.data_dir, "raft"))
            self.log.inject_faults(self._disk_faults, "raft")
            # one fsync in flight at a time, on its own thread: the loop goes on meanwhile, and
            # what it writes during one fsync goes out together in the next. A full disk is
            # waited out, not fatal (raft/journal.py): the write is tried again every retry_full s
            self._committer = GroupCommitter(self.log, self.loop, on_error=self.fatal, on_written=self.host.written,
                                             retry_full=self._retry_full, on_full=self._log_full,
                                             name="raft log")  # fmt: skip
            self.log.on_stall = self._committer.stall
            self.transport.before_flush.append(self.log.sync_point)
            self.transport.gate_closed = lambda: self.log is not None and self.log.out_of_space is not None
            self.rpc = NodeRpc(self.transport, self.membership.serve_call)
            self.liveness = GroupLiveness(self, skip=METADATA)
            join_through = None
            if ask_seeds:
                join_through = await discovery.cluster_without_this_node(self._seeds)
                members = discovery.start_from_seeds(members, self._seeds, join_through)
            self.host.open_metadata([m for m in members if m != node_id])
        except BaseException:
            await self._close()
            raise
        self.running = True
        self.host.start_ticking()
        self.liveness.start(self.loop)
        log.info("cluster node %s, members %s", node_id, ",".join(members))
        if discover or join_through:
            try:
                await (discovery.run() if discover else discovery.join_seed(join_through))
            except BaseException:
                await self.stop()
                raise

    def _own_seed(self) -> None:
        """The seeds often list every member, this node included, as an
        operator wrote them ("127.0.0.1:25672") and not as this node names
        itself ("localhost:25672"). Peers dial it by the seed, so without an
        --advertise-host the seed's spelling becomes this node's id; with
        one, the seed is this node and is not another member."""
        own = seed_naming_this_node(self._seeds, self._port)
        if own is None:
            return
        host = own.rpartition(":")[0]
        if host == self.identity.advertise_host:
            return
        if not self._advertise_given:
            log.info("seed %s is this node: advertising host %s", own, host)
            self.identity.advertise_host = host
        else:
            log.warning("seed %s is this node, advertised as %s:%d: peers must use that name",
                        own, self.identity.advertise_host, self._port)  # fmt: skip
            self._seeds = [s for s in self._seeds if s != own]

    async def stop(self) -> None:
        """Hand the groups this node leads over, then stop; pending proposals fail."""
        if not self.running:
            return
        if self.failed is None:
            started = self.loop.time()
            moved = await hand_over(self, None, self.handover_timeout)
            if moved.moved or moved.kept:
                log.info("stopping: %d leaderships handed over, %d not in time (%.2fs)", len(moved.moved),
                         len(moved.kept), self.loop.time() - started)  # fmt: skip
        self.running = False
        self.host.stop_ticking()
        self.proposer.fail_pending(ClusterError("the node is stopping"))
        await self._close()

    async def _close(self) -> None:
        if self.liveness is not None:
            self.liveness.stop()
        if self.rpc is not None:
            await self.rpc.close()
        self.host.close_all()
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

    def _log_full(self) -> None:
        """The Raft log is out of space: what waited for the failed write to answer for it is dropped."""
        dropped = self.log.drop_unwritten_turns()
        log.error("the raft log is out of space: this node acknowledges nothing new until a write lands"
                  " (%d turns' answers to peers dropped); the disk alarm is raised", dropped)  # fmt: skip

    @property
    def out_of_space(self) -> bool:
        """A Raft log write failed for want of space and none has landed since."""
        return self._committer is not None and self._committer.out_of_space

    def fatal(self, e: BaseException) -> None:
        """The log, the transport or a group failed: nothing more may be acknowledged (fail-stop)."""
        if self.failed is None:
            self.failed = e
            log.critical("the cluster part of this node stopped: %s", e, exc_info=e)
            self.proposer.fail_pending(ClusterError(f"the cluster part of this node stopped: {e}"))

    # -- groups (node/cluster/hosting.py) ------------------------------------------------

    def open_group(self, name: str, members: list[str], machine: Machine, **overrides: Any) -> RaftGroup:
        """Start (or restart from its journal) the Raft group `name` of these members on this node."""
        return self.host.open_group(name, members, machine, **overrides)

    def close_group(self, name: str, drop: bool = False) -> None:
        """Stop the group here; `drop` also deletes its journal, side data and snapshot."""
        self.host.close_group(name, drop)

    def submit(self, name: str, record: Any, callback: Callable[[Any, ProposalOutcome], None] | None = None) -> bool:
        """Hand `record` to group `name` (forwarded to its leader); False if the group is not open here."""
        return self.host.submit(name, record, callback)

    # -- commands (node/cluster/proposals.py) ---------------------------------------------

    async def propose(self, record: Any, timeout: float | None = None, *, idempotent: bool | None = None) -> Any:
        """Commit `record` through the leader and return what this node's machine returned for it."""
        return await self.proposer.propose(record, timeout, idempotent=idempotent)

    async def fence(self, timeout: float | None = None) -> None:
        """Commit a no-op through the leader: afterwards this node has applied every earlier change."""
        await self.proposer.fence(timeout)

    # -- membership (node/cluster/membership.py) ------------------------------------------

    async def join_cluster(self, seed: str, timeout: float = 30.0) -> dict:
        """Reset this node and make it a member of `seed`'s cluster; returns the new status."""
        return await self.membership.join_cluster(seed, timeout)

    async def forget_cluster_node(self, node: str, timeout: float | None = None) -> dict:
        """Remove `node` (which should be stopped) from the cluster; returns the new status."""
        return await self.membership.forget_cluster_node(node, timeout)

    async def change_group_members(self, name: str, op: str, node: str, timeout: float | None = None) -> None:
        """On the leader of group `name`: add or remove `node`."""
        await self.membership.change_group_members(name, op, node, timeout)

    async def call(self, peer: str, method: str, args: dict, timeout: float | None = None) -> dict:
        """`method(args)` served by `peer` (see `calls`); raises MembershipError or ClusterUnavailable."""
        return await self.membership.call(peer, method, args, timeout)

    # -- status ---------------------------------------------------------------------------

    def members(self) -> list[str]:
        """Every member's id, this node's included (this node's view)."""
        return [self.node_id] if self.group is None else sorted([self.node_id, *self.group.peers])

    def next_hop(self, peer: str) -> str:
        return node_of_peer(peer)  # a message for a member's worker K goes to the member (node/workers/)

    def is_reachable(self, node: str) -> bool:
        nt = self.transport
        return node == self.node_id or (nt.is_connected(node) and not nt.is_partitioned(node))

    def reachability(self) -> tuple[int, int]:
        """(members reachable from here, this node included; members)."""
        members = self.members()
        return sum(1 for m in members if self.is_reachable(m)), len(members)

    def is_leader(self) -> bool:
        return self.group is not None and self.group.is_leader

    def status(self) -> dict:
        """This node's view of the metadata group."""
        base = {"node": self.node_id, "group": METADATA, "failed": None if self.failed is None else str(self.failed),
                "raft_log_out_of_space": self.out_of_space}  # fmt: skip
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
                "joining": self.host.joining, "partitioned": sorted(self.transport.partitioned)}  # fmt: skip

    # -- fault switch (tests) ------------------------------------------------------------------

    def partition(self, peers: list[str] | None = None, inbound: bool = True) -> list[str]:
        """Cut this node off from `peers` (default: every other member) until `heal`;
        with `inbound` False only its streams to them (a one-way fault)."""
        cut = [p for p in (peers if peers is not None else self.members()) if p != self.node_id]
        self.transport.partition(cut, inbound)
        return cut

    def heal(self, peers: list[str] | None = None) -> None:
        self.transport.heal(peers)
