"""The inbound half of the cluster transport: the peers' streams to this node.

The counterpart of raft/grpc_link.py. Each peer opens ONE `Cluster.Stream`
to us per session, with an epoch in its metadata (raft/grpc_auth.py checks
the secret and reads it). A stream is accepted only with an epoch above the
last one accepted from that sender; accepting it ends the older stream, so
at most one stream per peer is dispatched and nothing from an older session
arrives after anything of a newer one. A stale stream is refused with the
last accepted epoch in its trailing metadata, which the sender's link uses
to move its own epochs past it (after a clock step back, say).

The first frame we write back is the accept frame the sender's link waits
for; after it every frame read is handed to `NodeTransport._dispatch`. The
transport's watchdog calls `check` to drop streams that went silent and to
ping idle ones, and `cut` when a peer is partitioned.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import grpc

from .grpc_auth import MD_LAST_EPOCH, AuthError, check_metadata
from .proto import cluster_pb2, cluster_pb2_grpc

if TYPE_CHECKING:
    from .transport import NodeTransport

__all__ = ["InboundStreams", "Servicer"]

log = logging.getLogger(__name__)

Frame = cluster_pb2.Frame


class InboundStream:
    """A peer's stream to us: the only one from that peer whose frames are dispatched."""

    __slots__ = ("accepted", "context", "epoch", "killed", "last_recv", "last_sent", "peer", "pinging")

    def __init__(self, peer: str, epoch: int, context: grpc.aio.ServicerContext, now: float) -> None:
        self.peer = peer
        self.epoch = epoch
        self.context = context
        self.killed: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.last_recv = now
        self.last_sent = now
        self.accepted = False
        self.pinging = False

    def kill(self, reason: str) -> None:
        """End the stream (cancelling the handler task would not end the RPC)."""
        if not self.killed.done():
            self.killed.set_result(reason)


class BadFrame(Exception):
    pass


class InboundStreams:
    """Every peer's current stream to this node, and the last epoch accepted from each."""

    def __init__(self, owner: NodeTransport) -> None:
        self.owner = owner
        self.streams: dict[str, InboundStream] = {}
        self.last_epoch: dict[str, int] = {}  # last accepted epoch per sender

    def epoch_from(self, peer: str) -> int | None:
        s = self.streams.get(peer)
        return s.epoch if s is not None else None

    def cut(self, peer: str, reason: str) -> None:
        """End `peer`'s stream now, if it has one."""
        s = self.streams.pop(peer, None)
        if s is not None:
            s.kill(reason)

    def close_all(self, reason: str) -> None:
        for s in self.streams.values():
            s.kill(reason)
        self.streams.clear()

    async def serve(self, context: grpc.aio.ServicerContext) -> None:
        """One peer's stream, from its authentication to its end."""
        nt = self.owner
        assert nt.node_id is not None
        try:
            peer, epoch = check_metadata(nt._secret, nt.node_id, context.invocation_metadata() or ())
        except AuthError as e:
            nt.stats.auth_failures += 1
            log.warning("refused a cluster stream from %s: %s", context.peer(), e)
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, str(e))
        if peer == nt.node_id:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "stream from a node with this node's id")
        if nt.refuses_streams_from(peer):
            nt.stats.partition_refusals += 1
            await context.abort(grpc.StatusCode.UNAVAILABLE, "partitioned")
        last = self.last_epoch.get(peer, 0)
        if epoch <= last:
            nt.stats.stale_streams += 1
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"stale epoch {epoch}, last accepted {last}",
                trailing_metadata=((MD_LAST_EPOCH, str(last)),),
            )
        self.last_epoch[peer] = epoch
        old = self.streams.pop(peer, None)
        if old is not None:
            old.kill(f"superseded by epoch {epoch}")
        me = self.streams[peer] = InboundStream(peer, epoch, context, nt._clock())
        reader: asyncio.Task | None = None
        try:
            await context.write(Frame(epoch=epoch))
            me.accepted = True
            me.last_sent = nt._clock()
            reader = asyncio.get_running_loop().create_task(self._read_frames(me))
            await asyncio.wait({reader, me.killed}, return_when=asyncio.FIRST_COMPLETED)
            if me.killed.done():
                reader.cancel()
                await asyncio.gather(reader, return_exceptions=True)
                await context.abort(grpc.StatusCode.UNAVAILABLE, me.killed.result())
            try:
                reader.result()
            except BadFrame as e:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        finally:
            if reader is not None and not reader.done():
                reader.cancel()
            if self.streams.get(peer) is me:
                del self.streams[peer]
            if me.accepted:
                nt._peer_down(peer)

    async def _read_frames(self, me: InboundStream) -> None:
        nt = self.owner
        context = me.context
        while True:
            frame = await context.read()
            if frame is grpc.aio.EOF:
                return
            me.last_recv = nt._clock()
            if frame.epoch != me.epoch:
                raise BadFrame(f"frame epoch {frame.epoch} on a stream of epoch {me.epoch}")
            if me.killed.done():
                return  # superseded, partitioned or silent: deliver nothing more
            nt._dispatch(me.peer, frame)

    def check(self, now: float) -> None:
        """The watchdog's pass: drop streams silent for dead_after, ping the idle ones."""
        nt = self.owner
        opts = nt.options
        for s in list(self.streams.values()):
            if now - s.last_recv > opts.dead_after:
                nt.stats.timeouts += 1
                log.info("stream from %s (epoch %d): nothing received for %.1fs", s.peer, s.epoch, now - s.last_recv)
                self.streams.pop(s.peer, None)
                s.kill("nothing received")
            elif s.accepted and not s.pinging and now - s.last_sent >= opts.ping_interval:
                s.pinging = True
                nt.spawn(self._ping(s), "warren-transport-ping")

    async def _ping(self, s: InboundStream) -> None:
        try:
            await s.context.write(Frame(epoch=s.epoch))
            s.last_sent = self.owner._clock()
        except Exception:
            pass  # the stream is ending; its handler sees why
        finally:
            s.pinging = False


class Servicer(cluster_pb2_grpc.ClusterServicer):
    def __init__(self, inbound: InboundStreams) -> None:
        self._inbound = inbound

    async def Stream(self, request_iterator, context):  # noqa: N802 (gRPC method name)
        await self._inbound.serve(context)
