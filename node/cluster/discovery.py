"""Peer discovery by DNS (part of Cluster, node/cluster/cluster.py): RabbitMQ's DNS backend.

`--seeds-dns NAME[:PORT]`: every address NAME resolves to (A and AAAA
records, resolved in a worker thread, never on the loop) is a node's cluster
address, at PORT or this node's own grpc port. As in RabbitMQ, discovery
runs only on a blank node (no members.json yet, or a discovery that a crash
interrupted: the `discovering` marker in <data_dir>/cluster); a node with
data keeps its remembered membership.

A blank node starts as a cluster of one and, until it has decided, answers
the node call "discover" with state "discovering". Each round it resolves
NAME, and acts only once the answer lists the node itself; it then asks
every node it knows (the answer's, plus any node that asked it) for its
state:
  - a peer that is a "member" of a cluster, or "joining" one: this node
    joins that cluster (Membership.join_cluster, the ordinary join path);
  - else the node whose id sorts first among those it knows forms the
    cluster (it stays a cluster of one and answers "member") once every
    other answered "discovering" within the same round and nobody new asked
    meanwhile; the others wait for it and join it in a later round.
It retries for `timeout` seconds, then the node fails to start (a node that
formed alone instead could split the cluster in two).

Static seeds (`--seeds`) list the members a blank node forms the cluster
with. But a node forgotten by its cluster, wiped and started again with the
same seeds (how a replaced machine comes back), or a new node given a running
cluster's members as seeds, would then wait for a majority of members that
do not count it. So a blank node asks its seeds for their members first
(`cluster_without_this_node`, a few seconds at most): a seed whose members
leave this node out is a running cluster it joins (the ordinary join path,
the `discovering` marker kept until it is done); a seed counting it, or no
answer, means the seeds are forming the cluster as configured.

Why nodes started together never form two clusters: say X < Y both formed.
A node answering "discovering" to an asker remembers it, so Y, when it
formed, had not been asked by X (X sorts first), and X, when it formed, had
an answer "discovering" from every node it knew, so it did not know Y. So
X's DNS answer lacked Y, Y's lacked X, and each answer listed its own
node: X resolved before Y was registered, Y resolved after Y registered,
and before X registered, which is after X resolved: impossible with a DNS
that, once it lists a node, keeps listing it (docker's embedded DNS does).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from node.cluster.errors import ClusterError, MembershipError
from node.cluster.identity import seed_naming_this_node

if TYPE_CHECKING:
    from node.cluster.cluster import Cluster

__all__ = ["DiscoveryFailed", "PeerDiscovery", "Resolver", "node_id_of", "parse_seeds_dns", "resolve_addresses"]

log = logging.getLogger("warren.cluster")

Resolver = Callable[[str], list[str]]  # a DNS name -> its addresses (blocking: run in a thread)

ASK_TIMEOUT = 2.0  # seconds one round waits for a peer's state
SEEDS_ASK_TIMEOUT = 3.0  # seconds a blank node with static seeds waits for their members at most
JOIN_TIMEOUT = 30.0  # seconds it then has to join their cluster before it fails to start
MARKER = "discovering"  # in <data_dir>/cluster while a blank node's discovery has not decided


class DiscoveryFailed(ClusterError):
    """No cluster to join or form within seeds_dns_timeout: the node does not start (main.py exits 69)."""


def resolve_addresses(name: str) -> list[str]:
    """The A and AAAA records of `name` (none when it does not resolve, yet)."""
    try:
        infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return []
    return sorted({info[4][0] for info in infos if info[0] in (socket.AF_INET, socket.AF_INET6)})


def parse_seeds_dns(value: str, default_port: int) -> tuple[str, int]:
    """ "NAME" or "NAME:PORT" -> (name, port); raises ValueError naming the setting."""
    name, sep, port = value.strip().rpartition(":")
    if not sep:
        name, port = value.strip(), ""
    if port and not port.isdigit():
        raise ValueError(f"seeds_dns: {value!r} is not NAME or NAME:PORT")
    port_n = int(port) if port else default_port
    if not name or ":" in name or not 0 < port_n < 65536:
        raise ValueError(f"seeds_dns: {value!r} is not NAME or NAME:PORT (a DNS name, a port 1-65535)")
    return name, port_n


def node_id_of(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


class PeerDiscovery:
    """Resolve, ask, then join or form; and answer the peers' "discover" calls."""

    def __init__(self, cluster: Cluster, seeds_dns: str, port: int, resolver: Resolver, timeout: float,
                 retry_interval: float) -> None:  # fmt: skip
        self.cluster = cluster
        self.name, self.port = parse_seeds_dns(seeds_dns, port) if seeds_dns else ("", port)
        if seeds_dns and (timeout <= 0 or retry_interval <= 0):
            raise ValueError("seeds_dns_timeout and seeds_dns_retry_interval must be positive")
        self.resolver = resolver
        self.timeout = timeout
        self.retry_interval = retry_interval
        self.state = "member"  # what "discover" answers: "discovering", "joining" or "member"
        self.via = ""  # the seed a joining node joins through
        self.known: set[str] = set()  # node ids resolved or heard from during discovery

    @property
    def enabled(self) -> bool:
        return bool(self.name)

    def _marker(self) -> str:
        return os.path.join(self.cluster.identity.dir, MARKER)

    def blank(self) -> bool:
        """No membership yet, or a discovery a crash interrupted: discovery must run."""
        identity = self.cluster.identity
        return not os.path.exists(os.path.join(identity.dir, "members.json")) or os.path.exists(self._marker())

    def mark(self) -> None:
        os.makedirs(self.cluster.identity.dir, exist_ok=True)
        with open(self._marker(), "w"):
            pass

    def _unmark(self) -> None:
        try:
            os.remove(self._marker())
        except FileNotFoundError:
            pass

    async def resolve(self) -> set[str]:
        addresses = await asyncio.to_thread(self.resolver, self.name)
        return {node_id_of(a, self.port) for a in addresses}

    async def own_host(self) -> str:
        """The address of this node in NAME's answer (an address this machine owns): its advertised host."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        while True:
            own = seed_naming_this_node(sorted(await self.resolve()), self.port)
            if own is not None:
                return own.rpartition(":")[0].strip("[]")
            if loop.time() >= deadline:
                raise DiscoveryFailed(f"peer discovery: {self.name} never resolved to an address of this machine"
                                   f" within {self.timeout:g}s (set --advertise-host)")  # fmt: skip
            await asyncio.sleep(self.retry_interval)

    async def run(self) -> None:
        """On a blank node: join the cluster NAME's nodes belong to, or form it; bounded by `timeout`."""
        c = self.cluster
        loop = c.loop
        deadline = loop.time() + self.timeout
        others = [m for m in c.members() if m != c.node_id]
        if others:  # a join this node began before a crash: finish it
            await c.join_cluster(others[0], max(1.0, deadline - loop.time()))
            self._decided()
            return
        self.state = "discovering"
        self.known.add(c.node_id)
        while True:
            view = await self.resolve()
            if c.node_id in view:
                self.known |= view
                if await self._round(deadline):
                    return
            else:
                log.info("peer discovery: %s does not list this node (%s) yet", self.name, c.node_id)
            if loop.time() >= deadline:
                self.state = "member"
                raise DiscoveryFailed(f"peer discovery: no cluster to join or form from {self.name} within"
                                   f" {self.timeout:g}s (nodes known: {', '.join(sorted(self.known))})")  # fmt: skip
            await asyncio.sleep(self.retry_interval)  # DNS has no event to await: poll it

    async def _round(self, deadline: float) -> bool:
        c = self.cluster
        asked = sorted(self.known - {c.node_id})
        answers = await asyncio.gather(*(self._ask(p, deadline) for p in asked))
        for peer, answer in zip(asked, answers, strict=True):
            if answer is not None and answer.get("state") in ("member", "joining"):
                seed = answer.get("via") or peer if answer.get("state") == "joining" else peer
                return await self._join(str(seed), deadline)
        # No await from here on: the check and the decision are one step on the loop, so a
        # peer that asks meanwhile (and is remembered) is counted in the next round.
        if min(self.known) != c.node_id:
            log.info("peer discovery: waiting for %s to form the cluster", min(self.known))
            return False
        if set(asked) != self.known - {c.node_id}:
            return False
        if any(a is None or a.get("state") != "discovering" for a in answers):
            return False
        log.info("peer discovery: this node forms the cluster (%s known)", ", ".join(sorted(self.known)))
        self._decided()
        return True

    async def _ask(self, peer: str, deadline: float) -> dict | None:
        c = self.cluster
        timeout = max(0.1, min(ASK_TIMEOUT, deadline - c.loop.time()))
        try:
            answer = await c.call(peer, "discover", {}, timeout)
        except MembershipError as e:
            if "unknown cluster call" in str(e):  # a Warren before discovery: always in a cluster
                return {"state": "member"}
            log.info("peer discovery: no state from %s: %s", peer, e)
            return None
        except ClusterError as e:  # unreachable, or stopping: not an answer
            log.info("peer discovery: no state from %s: %s", peer, e)
            return None
        return answer if isinstance(answer, dict) else None

    async def _join(self, seed: str, deadline: float) -> bool:
        c = self.cluster
        self.state, self.via = "joining", seed
        try:
            await c.join_cluster(seed, max(1.0, deadline - c.loop.time()))
        except ClusterError as e:
            log.warning("peer discovery: joining through %s failed (%s); discovering again", seed, e)
            self.state, self.via = "discovering", ""
            return False
        log.info("peer discovery: joined the cluster of %s", seed)
        self._decided()
        return True

    def _decided(self) -> None:
        self.state, self.via = "member", ""
        self._unmark()

    # -- static seeds ---------------------------------------------------------------------------

    async def cluster_without_this_node(self, seeds: list[str], timeout: float = SEEDS_ASK_TIMEOUT) -> str | None:
        """The seed to join through when one of `seeds` belongs to a cluster that does not
        count this node; None as soon as one counts it, or when none answers in `timeout`."""
        c = self.cluster
        asks = [asyncio.ensure_future(self._members_of(s, timeout)) for s in seeds if s != c.node_id]
        try:
            for ask in asyncio.as_completed(asks):
                seed, members = await ask
                if members is not None:
                    if c.node_id in members:
                        return None
                    log.warning("seed %s belongs to a cluster without this node (%s): joining it", seed,
                                ",".join(members))  # fmt: skip
                    return seed
            return None
        finally:
            for ask in asks:
                ask.cancel()

    async def _members_of(self, seed: str, timeout: float) -> tuple[str, list[str] | None]:
        try:
            members = (await self.cluster.call(seed, "members", {}, timeout)).get("members")
        except ClusterError:  # not up, or not running yet (starting as this node is): no answer
            return seed, None
        return seed, members if isinstance(members, list) else None

    def start_from_seeds(self, members: list[str] | None, seeds: list[str], join_through: str | None) -> list[str]:
        """The members a blank node with static seeds opens its metadata group with (saved):
        itself alone until it joins `join_through`'s cluster, else the seeds."""
        c = self.cluster
        if join_through is not None:
            self.mark()  # until joined: a crash before then leaves the node blank
            if members is None:
                members = [c.node_id]
        elif members is None:
            members = sorted({c.node_id, *seeds})
        else:
            self._unmark()  # a join before a crash did finish: the seeds count this node now
        c.identity.save_members(members)
        return members

    async def join_seed(self, seed: str) -> None:
        """Join `seed`'s cluster (or finish a join begun before a crash through its members)."""
        c = self.cluster
        others = [m for m in c.members() if m != c.node_id]
        await c.join_cluster(others[0] if others else seed, JOIN_TIMEOUT)
        log.info("joined the cluster of %s, which its seeds belong to", others[0] if others else seed)
        self._decided()

    async def serve(self, peer: str, args: dict) -> dict[str, Any]:
        """A peer's "discover" call: this node's state; a discovering node remembers the asker."""
        if self.state == "discovering":
            self.known.add(peer)
        return {"state": self.state, "via": self.via, "members": self.cluster.members()}
