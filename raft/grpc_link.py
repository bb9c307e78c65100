"""The outbound half of the cluster transport: one `PeerLink` per peer.

A link owns a gRPC channel to the peer and keeps ONE `Cluster.Stream` open on
it. Each stream it opens is a new *session* with a new epoch (strictly
increasing per sender, also across restarts: epochs start from the wall clock
in ns). A session is:

  connecting --accept frame--> up --stream error / EOF / kill()--> down

Only an `up` link takes messages (`Outbound.enqueue`, raft/outbound.py), and every batch
it takes is tagged with the session's epoch. Going down drops everything not
yet handed to gRPC (the loop turn's pending messages and the outbox), so no
message is ever sent on a later session than the one it was accepted for:
the peer sees each session's messages in order, without duplicates, and
after a reconnect it sees only new messages. That is what pysyncobj needs
(it resends from its own state); a late duplicate AppendEntries would make
a follower truncate its log.

The link reconnects on its own with exponential backoff and jitter, stays
down while its peer is partitioned (`NodeTransport.partition`), and is
declared dead by the transport's watchdog when the server sent nothing
(not even a ping) for `dead_after` seconds.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import deque
from typing import TYPE_CHECKING

import grpc

from .grpc_auth import MD_LAST_EPOCH, stream_metadata
from .proto import cluster_pb2, cluster_pb2_grpc

if TYPE_CHECKING:
    from .transport import NodeTransport

__all__ = ["PeerLink"]

log = logging.getLogger(__name__)

Frame = cluster_pb2.Frame


class PeerLink:
    """Ordered, epoch-fenced delivery of this node's messages to one peer."""

    def __init__(self, owner: NodeTransport, peer: str) -> None:
        self.owner = owner
        self.peer = peer
        # Invariant: `epoch` is not None exactly when `up`; it is the epoch of
        # the session whose stream carries `outbox`.
        self.up = False
        self.epoch: int | None = None
        # This loop turn's messages, (kind, group, payload, gated); sealed by the
        # transport's flush, which also resets `dirty`. `gated` False: one that needs no
        # durable write behind it, queued here behind one that does (outbound.py).
        self.pending: list[tuple[int, str, bytes, bool]] = []
        # This turn's messages that need no durable write behind them (a leader's
        # AppendEntries), while nothing for this peer waits at the gate (outbound.py)
        self.ungated: list[tuple[int, str, bytes, bool]] = []
        self.held_turns = 0  # sealed turns with messages for this peer waiting at the gate
        # bytes enqueued for this peer and not yet in `outbox` (pending, or sealed behind the
        # durability gate): with outbox_bytes, how far behind the peer is (NodeTransport.backlog)
        self.queued_bytes = 0
        self.dirty = False
        # Frames released for the current session, written in order by its writer.
        self.outbox: deque[tuple[Frame, int, float]] = deque()  # (frame, size, when it may go)
        self._last_due = 0.0
        self.outbox_bytes = 0
        self.last_recv = 0.0
        self.last_sent = 0.0
        self.sessions = 0  # sessions that got an accept frame
        self._outbox_ready = asyncio.Event()
        self._wakeup = asyncio.Event()
        self._closed = False
        self._channel: grpc.aio.Channel | None = None
        self._stub: cluster_pb2_grpc.ClusterStub | None = None
        self._run_task: asyncio.Task | None = None
        self._session_task: asyncio.Task | None = None
        self._auth_warned = False

    # -- control (called by NodeTransport) -----------------------------------

    def start(self) -> None:
        self._channel = self.owner._make_channel(self.peer)
        self._stub = cluster_pb2_grpc.ClusterStub(self._channel)
        self._run_task = asyncio.get_running_loop().create_task(self._run(), name=f"warren-link-{self.peer}")

    def kill(self, reason: str) -> None:
        """End the current session now (if any); the link reconnects unless closed or partitioned."""
        if self._session_task is not None and not self._session_task.done():
            log.info("link to %s: dropping session (epoch %s): %s", self.peer, self.epoch, reason)
            self._set_down()
            self._session_task.cancel()
        self._wakeup.set()

    def wake(self) -> None:
        self._wakeup.set()

    def in_session(self) -> bool:
        return self._session_task is not None and not self._session_task.done()

    def push(self, frame: Frame, size: int) -> None:
        due, delay = 0.0, self.owner.send_delay
        if delay is not None:  # a test fault, netem's delay and jitter: order kept, as TCP keeps it
            self._last_due = due = max(self._last_due, self.owner._clock() + random.uniform(delay[0] - delay[1],
                                                                                            delay[0] + delay[1]))
        self.outbox.append((frame, size, due))
        self.outbox_bytes += size
        self._outbox_ready.set()

    async def close(self) -> None:
        self._closed = True
        self._set_down()
        for task in (self._session_task, self._run_task):
            if task is not None:
                task.cancel()
        for task in (self._session_task, self._run_task):
            if task is not None:
                await asyncio.gather(task, return_exceptions=True)
        if self._channel is not None:
            await self._channel.close(grace=None)

    # -- state ---------------------------------------------------------------

    def _set_up(self, epoch: int) -> None:
        self.up = True
        self.epoch = epoch
        self.sessions += 1
        self.last_sent = self.owner._clock()
        self._auth_warned = False
        self.owner._link_up(self)

    def _set_down(self) -> None:
        """Forget everything not yet handed to gRPC: it belongs to a dead session."""
        dropped = len(self.pending) + len(self.ungated) + sum(len(f.messages) for f, _, _ in self.outbox)
        # sealed ones: when released
        self.queued_bytes -= sum(len(item[2]) for item in self.pending) + sum(len(i[2]) for i in self.ungated)
        self.pending = []
        self.ungated = []
        self.outbox.clear()
        self.outbox_bytes = 0
        if dropped:
            self.owner.stats.dropped_on_reconnect += dropped
        if self.up:
            self.up = False
            self.epoch = None
            self.owner._link_down(self)

    # -- sessions --------------------------------------------------------------

    async def _run(self) -> None:
        opts = self.owner.options
        backoff = opts.backoff_initial
        while not self._closed:
            if self.owner.is_partitioned(self.peer):
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            self._wakeup.clear()
            sessions_before = self.sessions
            self._session_task = asyncio.get_running_loop().create_task(
                self._session(self.owner._next_epoch()), name=f"warren-session-{self.peer}"
            )
            await asyncio.wait({self._session_task})
            if not self._session_task.cancelled() and (err := self._session_task.exception()) is not None:
                log.error("link to %s: session failed", self.peer, exc_info=err)
            if self._closed:
                return
            if self.sessions != sessions_before:
                backoff = opts.backoff_initial  # it worked: retry at once, then back off
                continue
            self.owner.stats.connect_failures += 1
            delay = backoff * random.uniform(0.8, 1.2)
            backoff = min(backoff * 2, opts.backoff_max)
            try:
                await asyncio.wait_for(self._wakeup.wait(), delay)
            except TimeoutError:
                pass

    async def _session(self, epoch: int) -> None:
        owner = self.owner
        assert self._stub is not None
        self.last_recv = owner._clock()  # the watchdog times the accept from here
        call = self._stub.Stream(metadata=stream_metadata(owner._secret, owner.node_id, self.peer, epoch))
        tasks: list[asyncio.Task] = []
        try:
            accept = await call.read()
            if accept is grpc.aio.EOF or accept.epoch != epoch:
                log.warning("link to %s: no valid accept for epoch %d", self.peer, epoch)
                return
            self.last_recv = owner._clock()
            self._set_up(epoch)
            loop = asyncio.get_running_loop()
            tasks = [loop.create_task(self._write_loop(call)), loop.create_task(self._read_loop(call))]
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        except grpc.aio.AioRpcError as e:
            self._on_rpc_error(e)
        finally:
            self._set_down()
            for t in tasks:
                t.cancel()
            for t in tasks:
                try:
                    await t
                except (asyncio.CancelledError, asyncio.InvalidStateError, grpc.aio.AioRpcError,
                        grpc.aio.UsageError):  # fmt: skip
                    pass  # the stream ended under the task ("RPC already finished")
                except Exception:
                    log.exception("link to %s: stream task failed", self.peer)
            call.cancel()

    async def _write_loop(self, call: grpc.aio.StreamStreamCall) -> None:
        stats = self.owner.stats
        while True:
            if not self.outbox:
                self._outbox_ready.clear()
                await self._outbox_ready.wait()
                continue
            due = self.outbox[0][2]
            if due and due > self.owner._clock():  # held by the delay fault
                await asyncio.sleep(due - self.owner._clock())
                continue
            frame, size, _ = self.outbox.popleft()
            self.outbox_bytes -= size
            # frames queued while the last write was out go in this one, up to the frame bound
            limit = self.owner.options.max_frame_bytes
            outbox = self.outbox
            while (outbox and size + outbox[0][1] <= limit and outbox[0][0].epoch == frame.epoch
                   and (not outbox[0][2] or outbox[0][2] <= self.owner._clock())):  # fmt: skip
                more, n, _ = outbox.popleft()
                self.outbox_bytes -= n
                frame.messages.extend(more.messages)
                size += n
            await call.write(frame)
            self.last_sent = self.owner._clock()
            stats.frames_sent += 1
            stats.messages_sent += len(frame.messages)
            stats.bytes_sent += size

    async def _read_loop(self, call: grpc.aio.StreamStreamCall) -> None:
        while True:
            frame = await call.read()
            if frame is grpc.aio.EOF:
                return
            self.last_recv = self.owner._clock()

    def _on_rpc_error(self, e: grpc.aio.AioRpcError) -> None:
        code = e.code()
        if code == grpc.StatusCode.FAILED_PRECONDITION:
            # Stale epoch (our clock went back since an earlier run): jump past it.
            for k, v in e.trailing_metadata() or ():
                if k == MD_LAST_EPOCH and str(v).isdigit():
                    self.owner._bump_epoch(int(v))
            log.warning("link to %s: %s", self.peer, e.details())
        elif code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
            if not self._auth_warned:
                log.warning("link to %s: refused: %s", self.peer, e.details())
                self._auth_warned = True
        else:
            log.debug("link to %s: stream ended: %s %s", self.peer, code, e.details())
