"""Node-to-node transport: every Raft group of a node over one gRPC stream per peer.

    NodeTransport (one per node)
      - grpc.aio server on the cluster port (25672): one inbound stream per
        peer, authenticated by the cluster secret (raft/grpc_auth.py),
        optionally over mutual TLS
      - one PeerLink per peer (raft/grpc_link.py): our outbound stream,
        reconnected with backoff, a new epoch per stream
      - InboundStreams (raft/grpc_inbound.py): the peers' streams to us, at
        most one per peer, the one of the highest epoch
      - per-peer send queues sealed into ONE Frame per peer per loop turn
      - the `before_flush` gate for the durable journal, the `partition` switch
    GroupTransport (one per Raft group, raft/grpc_group.py, re-exported here)
      - the pysyncobj `Transport` a SyncObj with autoTick=False uses
      - messages encoded by raft/grpc_codec.py, never pickled

Use (on the node's loop):

    nt = NodeTransport(listen="0.0.0.0:25672", node_id="node1:25672", secret=cluster_secret,
                       tls=TlsConfig(cert, key, ca))          # tls optional
    await nt.start()
    nt.before_flush.append(journal.sync_point)                  # see below
    obj = SyncObj("node1:25672", ["node2:25672", "node3:25672"], conf,   # conf.autoTick=False
                  transportClass=nt.transport_class("queue-a"))  # or transport=GroupTransport(...)
    ... every few ms: obj.doTick(0) for each group ...
    nt.partition(["node2:25672"]); nt.heal()                   # fault switch for tests
    nt.add_peer(p); nt.send_node_message(p, channel, payload); nt.on_node_message = fn
    nt.is_connected(p), nt.epoch_to(p), nt.epoch_from(p), nt.reset_peer(p), nt.stats
    await nt.close()

Everything runs on the node's asyncio loop, and so must the node's calls to
each group's `SyncObj.doTick()`: the transport calls pysyncobj's callbacks
(message received, node connected/disconnected) from that loop.

Delivery (what closes pysyncobj's gaps). Per (sender, receiver) pair there is
one stream at a time, so one group's messages arrive in the order they were
sent, with no duplicates. A new stream gets a higher epoch; the receiver
accepts a stream only with an epoch above the last it accepted from that
sender and ends the older one, and the sender drops whatever the old
stream had not taken (grpc_link.py). So nothing sent in one epoch is
delivered after anything of a later epoch, and nothing is delivered twice.
Messages may be lost (a dead stream, a partition); Raft copes with loss.

Node identity: a node's id is its cluster address "host:port", which is both
its pysyncobj Node id (in every group) and the gRPC target its peers dial.

Batching: `send` appends to the peer's list for this loop turn and schedules
one flush with `loop.call_soon`; the flush seals every peer's list into one
Frame (split at `max_frame_bytes`), so N messages in one turn cost one gRPC
message per peer (grpc.aio manages some 7k stream messages/s). The turns one
fsync releases (see below) leave as one Frame per peer, and a link's writer
puts the frames queued while its last write was out into one.

Durability gate (`before_flush`). Raft must not answer (vote, ack entries)
before the state it answers about is on disk. pysyncobj sends its answers
inside doTick right after writing its journal, so the journal, which fsyncs
once per loop turn, registers a hook:

    transport.before_flush.append(journal.sync_point)

Each flush calls every hook once, right after sealing the turn's messages. A
hook returns None when nothing it wrote is waiting for disk, or an awaitable
that completes once every write made before the call is durable; the sealed
messages (and every later flush, to keep the order) wait for it. If the
awaitable raises, the transport stops sending anything (fail-stop: nothing
may be acknowledged from a journal that could not sync) and calls `on_error`,
unless it raises `NotDurable` (a full disk, waited out by the journal): then
that turn's gated messages are dropped (its ungated ones still leave, in order)
and the later turns go on; while `gate_closed()` says so, gated messages are
dropped as they are queued.

Fault switch: `partition(peers)` drops all traffic to and from those peers
(our stream to them ends, theirs to us is cut and refused; pysyncobj sees
them disconnected) until `heal()`; the streams then come back with new epochs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

import grpc

from .grpc_auth import TlsConfig
from .grpc_group import GroupTransport
from .grpc_inbound import InboundStreams, Servicer
from .grpc_link import PeerLink
from .outbound import Outbound
from .proto import cluster_pb2, cluster_pb2_grpc

__all__ = ["GroupTransport", "NodeTransport", "TransportOptions", "TransportStats", "TlsConfig"]

log = logging.getLogger(__name__)

Frame = cluster_pb2.Frame
RAFT = cluster_pb2.Envelope.RAFT
NODE = cluster_pb2.Envelope.NODE
_ENVELOPE_OVERHEAD = 16  # protobuf tags and lengths, roughly


@dataclass(frozen=True)
class TransportOptions:
    max_frame_bytes: int = 1 << 20  # split a peer's turn into Frames of about this size
    max_message_bytes: int = 64 << 20  # larger messages are refused by send()
    max_outbox_bytes: int = 64 << 20  # a peer this far behind gets a new session (drops the backlog)
    ping_interval: float = 0.5  # idle streams send an empty Frame this often
    dead_after: float = 3.0  # a stream that received nothing for this long is dropped
    backoff_initial: float = 0.05
    backoff_max: float = 2.0


@dataclass
class TransportStats:
    frames_sent: int = 0
    messages_sent: int = 0
    bytes_sent: int = 0
    frames_received: int = 0
    messages_received: int = 0
    flushes: int = 0
    dropped_on_reconnect: int = 0  # accepted by send() but never written: their session ended
    dropped_not_durable: int = 0  # answers for Raft log writes that failed for want of space
    dropped_unknown_group: int = 0
    dropped_not_member: int = 0
    rejected_messages: int = 0  # undecodable payloads from authenticated peers
    auth_failures: int = 0
    stale_streams: int = 0  # inbound streams refused for a non-increasing epoch
    partition_refusals: int = 0  # inbound streams refused by the partition switch
    connect_failures: int = 0
    timeouts: int = 0  # streams dropped by the watchdog
    entries_held_back: int = 0  # AppendEntries with entries not sent to a peer too far behind (grpc_group.py)


class NodeTransport:
    """The cluster port of one node. Create, `await start()`, then build the groups' SyncObjs."""

    def __init__(
        self,
        *,
        listen: str,
        secret: bytes | str,
        node_id: str | None = None,
        tls: TlsConfig | None = None,
        options: TransportOptions | None = None,
        clock: Callable[[], float] = time.monotonic,
        epoch_clock: Callable[[], int] = time.time_ns,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        if not secret:
            raise ValueError("the cluster secret must not be empty")
        if node_id is None and listen.rsplit(":", 1)[0] in ("", "0.0.0.0", "[::]", "::"):
            raise ValueError(f"listening on {listen}: give the node_id (the address peers dial)")
        self.listen = listen
        self.node_id = node_id  # set from the bound port by start() if None
        self.options = options or TransportOptions()
        self.stats = TransportStats()
        self.port: int | None = None
        self.before_flush: list[Callable[[], Awaitable[object] | None]] = []
        # True while the gate cannot open (the Raft log is out of space): gated messages are
        # dropped as they are queued, so the ungated ones (alarm gossip) are not stuck behind them
        self.gate_closed: Callable[[], bool] = lambda: False
        # Non-Raft node-to-node messages (cross-node publish/deliver, later):
        # on_node_message(peer, channel, payload), called on the loop.
        self.on_node_message: Callable[[str, str, bytes], None] | None = None
        # on_peer_down(peer): a stream to or from `peer` ended, and the node
        # messages still in it are lost (the cross-node data path fails what
        # it had in flight with that peer).
        self.on_peer_down: list[Callable[[str], None]] = []
        self.on_error = on_error
        self.failed: BaseException | None = None
        self.send_delay: tuple[float, float] | None = None  # (seconds, jitter): see delay()
        self._secret = secret
        self._tls = tls
        self._channel_credentials: grpc.ChannelCredentials | None = None
        self._clock = clock
        self._epoch_clock = epoch_clock
        self._epoch = 0
        self._server: grpc.aio.Server | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._started = False
        self._closed = False
        self._groups: dict[str, GroupTransport] = {}
        self._groups_by_peer: dict[str, set[GroupTransport]] = {}
        self._pinned: set[str] = set()
        self._links: dict[str, PeerLink] = {}
        self.inbound = InboundStreams(self)  # the peers' streams to us (grpc_inbound.py)
        self._partitioned: set[str] = set()
        self._outbound_only: set[str] = set()  # partitioned one way: their streams to us still accepted
        self.outbound = Outbound(self)  # this loop turn's messages, sealed and gated (outbound.py)
        self._watchdog_task: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()

    # -- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        opts = self.options
        self._server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", opts.max_message_bytes + opts.max_frame_bytes + 1024),
                ("grpc.max_send_message_length", 1 << 20),
                ("grpc.so_reuseport", 0),
            ]
        )
        cluster_pb2_grpc.add_ClusterServicer_to_server(Servicer(self.inbound), self._server)
        try:
            if self._tls is not None:
                # Read the PEM files once, now, so a bad path fails start() and not a later addNode.
                self._channel_credentials = self._tls.channel_credentials()
                port = self._server.add_secure_port(self.listen, self._tls.server_credentials())
            else:
                port = self._server.add_insecure_port(self.listen)
        except RuntimeError as e:  # grpc's "Failed to bind"
            raise OSError(f"cannot listen on {self.listen}: {e}") from None
        if not port:
            raise OSError(f"cannot listen on {self.listen}")
        self.port = port
        if self.node_id is None:
            self.node_id = f"{self.listen.rsplit(':', 1)[0]}:{port}"
        await self._server.start()
        self._started = True
        for link in self._links.values():
            link.start()
        self._watchdog_task = self.spawn(self._watchdog(), "warren-transport-watchdog")

    async def close(self) -> None:
        """Stop everything; pending messages are dropped."""
        if self._closed:
            return
        self._closed = True
        if self._watchdog_task is not None:
            self._watchdog_task.cancel()
        self.outbound.close()
        links = list(self._links.values())
        self._links.clear()
        await asyncio.gather(*(link.close() for link in links), return_exceptions=True)
        self.inbound.close_all("node shutting down")
        await asyncio.sleep(0)  # let the handlers send their status
        if self._server is not None:
            await self._server.stop(grace=None)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def spawn(self, coro, name: str) -> asyncio.Task:
        assert self.loop is not None
        task = self.loop.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- groups and peers --------------------------------------------------------

    def transport_class(self, group: str) -> Callable[..., GroupTransport]:
        """For `SyncObj(..., transportClass=...)`: pysyncobj calls it with (syncObj, selfNode, otherNodes)."""

        def make(_sync_obj: object, self_node, other_nodes) -> GroupTransport:
            return GroupTransport(self, group, self_node, other_nodes)

        return make

    @property
    def groups(self) -> dict[str, GroupTransport]:
        return dict(self._groups)

    def add_peer(self, peer: str) -> None:
        """Keep a stream to `peer` even when no group needs it (for node messages)."""
        self._pinned.add(peer)
        self._acquire(peer)

    def remove_peer(self, peer: str) -> None:
        self._pinned.discard(peer)
        self._release(peer)

    def is_connected(self, peer: str) -> bool:
        link = self._links.get(peer)
        return link is not None and link.up

    def epoch_to(self, peer: str) -> int | None:
        """Epoch of our current stream to `peer` (None when down)."""
        link = self._links.get(peer)
        return link.epoch if link is not None else None

    def epoch_from(self, peer: str) -> int | None:
        """Epoch of `peer`'s current stream to us (None when there is none)."""
        return self.inbound.epoch_from(peer)

    def reset_peer(self, peer: str) -> None:
        """Drop our stream to `peer` now; it comes back with a new epoch."""
        link = self._links.get(peer)
        if link is not None:
            link.kill("reset")

    def _acquire(self, peer: str) -> PeerLink:
        if peer == self.node_id:
            raise ValueError(f"{peer} is this node")
        link = self._links.get(peer)
        if link is None:
            link = self._links[peer] = PeerLink(self, peer)
            if self._started and not self._closed:
                link.start()
        return link

    def _release(self, peer: str) -> None:
        if self._groups_by_peer.get(peer) or peer in self._pinned:
            return
        self._groups_by_peer.pop(peer, None)
        link = self._links.pop(peer, None)
        if link is not None:
            self.spawn(link.close(), f"warren-link-close-{peer}")

    def _make_channel(self, peer: str) -> grpc.aio.Channel:
        opts = self.options
        options = [
            ("grpc.max_send_message_length", opts.max_message_bytes + opts.max_frame_bytes + 1024),
            ("grpc.max_receive_message_length", 1 << 20),
            ("grpc.use_local_subchannel_pool", 1),
            ("grpc.enable_retries", 0),
            ("grpc.initial_reconnect_backoff_ms", int(opts.backoff_initial * 1000) or 1),
            ("grpc.min_reconnect_backoff_ms", int(opts.backoff_initial * 1000) or 1),
            ("grpc.max_reconnect_backoff_ms", int(opts.backoff_max * 1000) or 1),
        ]
        if self._channel_credentials is None:
            return grpc.aio.insecure_channel(peer, options=options)
        if self._tls is not None and self._tls.server_name:
            options.append(("grpc.ssl_target_name_override", self._tls.server_name))
        return grpc.aio.secure_channel(peer, self._channel_credentials, options=options)

    def _next_epoch(self) -> int:
        self._epoch = max(self._epoch + 1, self._epoch_clock())
        return self._epoch

    def _bump_epoch(self, last: int) -> None:
        self._epoch = max(self._epoch, last)

    def _link_up(self, link: PeerLink) -> None:
        if self._links.get(link.peer) is link:  # not a released link winding down
            for group in list(self._groups_by_peer.get(link.peer, ())):
                group._peer_up(link.peer)

    def _link_down(self, link: PeerLink) -> None:
        if self._links.get(link.peer) is link:
            for group in list(self._groups_by_peer.get(link.peer, ())):
                group._peer_down(link.peer)
        self._peer_down(link.peer)

    def _peer_down(self, peer: str) -> None:
        for callback in list(self.on_peer_down):
            try:
                callback(peer)
            except Exception:
                log.exception("a peer-down callback for %s failed", peer)

    # -- fault switch --------------------------------------------------------------

    def partition(self, peers: Iterable[str], inbound: bool = True) -> None:
        """Drop all traffic to and from `peers` until `heal`; with `inbound`
        False only ours to them (their streams to us go on: a one-way fault)."""
        for peer in peers:
            self._partitioned.add(peer)
            if inbound:
                self._outbound_only.discard(peer)
            else:
                self._outbound_only.add(peer)
            link = self._links.get(peer)
            if link is not None:
                link.kill("partitioned")
            if inbound:
                self.inbound.cut(peer, "partitioned")

    def heal(self, peers: Iterable[str] | None = None) -> None:
        """Undo `partition` for `peers` (default: all)."""
        healed = set(self._partitioned) if peers is None else set(peers) & self._partitioned
        self._partitioned -= healed
        self._outbound_only -= healed
        for peer in healed:
            link = self._links.get(peer)
            if link is not None:
                link.wake()

    def delay(self, seconds: float, jitter: float = 0.0) -> None:
        """Hold each frame sent to any peer for `seconds` +- `jitter` (uniform) before it goes,
        in order, until delay(0): a test fault, what `tc netem delay` does to a link (this
        machine's kernel has no sch_netem). Frames already queued are not held."""
        if seconds < 0 or jitter < 0 or jitter > seconds:
            raise ValueError("a delay needs 0 <= jitter <= seconds")
        self.send_delay = (seconds, jitter) if seconds > 0 else None

    def is_partitioned(self, peer: str) -> bool:
        return peer in self._partitioned

    def refuses_streams_from(self, peer: str) -> bool:
        return peer in self._partitioned and peer not in self._outbound_only

    @property
    def partitioned(self) -> frozenset[str]:
        return frozenset(self._partitioned)

    # -- sending --------------------------------------------------------------------

    def backlog(self, peer: str) -> int:
        """Bytes queued for `peer` and not yet written to its stream."""
        link = self._links.get(peer)
        return 0 if link is None else link.queued_bytes + link.outbox_bytes

    def send_node_message(self, peer: str, channel: str, payload: bytes, gated: bool = True) -> bool:
        """Queue a non-Raft message for `peer` (see `on_node_message`); False if not connected.
        `gated=False`: it answers for nothing in the journal, so it need not wait for the
        durability gate (it still never overtakes a message for `peer` waiting there)."""
        link = self._links.get(peer)
        return link is not None and self.outbound.enqueue(link, NODE, channel, payload, gated)

    # -- receiving --------------------------------------------------------------------

    def _dispatch(self, peer: str, frame: Frame) -> None:
        stats = self.stats
        stats.frames_received += 1
        stats.messages_received += len(frame.messages)
        groups = self._groups
        for env in frame.messages:
            try:
                if env.kind == RAFT:
                    group = groups.get(env.group)
                    if group is None:
                        stats.dropped_unknown_group += 1
                    else:
                        group._deliver(peer, env.payload)
                elif env.kind == NODE:
                    if self.on_node_message is not None:
                        self.on_node_message(peer, env.group, env.payload)
                else:
                    stats.rejected_messages += 1
            except Exception:
                log.exception("handling a message from %s for %r failed", peer, env.group)

    # -- liveness ------------------------------------------------------------------------

    async def _watchdog(self) -> None:
        opts = self.options
        period = min(opts.ping_interval, opts.dead_after / 3) / 2
        while True:
            await asyncio.sleep(period)
            now = self._clock()
            for link in list(self._links.values()):
                if not link.in_session():
                    continue
                if now - link.last_recv > opts.dead_after:
                    self.stats.timeouts += 1
                    link.kill(f"nothing received for {now - link.last_recv:.1f}s")
                elif link.up and not link.outbox and now - link.last_sent >= opts.ping_interval:
                    assert link.epoch is not None
                    link.push(Frame(epoch=link.epoch), 0)
                    link.last_sent = now
            self.inbound.check(now)
