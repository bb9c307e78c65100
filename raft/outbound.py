"""The sending half of a node's transport: what the node's groups and node messages
queue during one loop turn is sealed per peer at the end of the turn, held until
every `before_flush` awaitable of that turn is done (the durability gate: nothing
leaves before the Raft log write that covers it has landed), then cut into frames
of at most `max_frame_bytes` and handed to the peer's link in order. The turns one
fsync releases together go out together, in one frame per peer (a busy node seals
several turns per fsync, and each gRPC write costs about as much as a small
message's whole Raft path). A failed gate stops all sending for good
(`NodeTransport.failed`), except a gate that fails with `NotDurable` (the Raft log is
out of space, raft/journal.py): that turn's gated messages are dropped, as a lossy
network would drop them, its ungated ones queued behind them leave, and sending goes on.

What needs no durable write behind it skips the gate (`enqueue(gated=False)`): a
leader's AppendEntries. The gate is there for answers (an ack, a vote) that must
not leave before what they answer for is on disk; a leader may send its entries
while its own write is out (Raft's usual overlap, thesis §10.2.1) because it
counts itself toward a commit only for entries on disk (raft/patches.py, patch 4),
and its term was durable before its vote requests left. So a follower hears of
new entries, and of a commit, one fsync of the leader's sooner. Order per peer is
kept: such a message skips the gate only while nothing for that peer is waiting at
it, this turn or an earlier one; otherwise it queues behind like the rest."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from .grpc_link import PeerLink
from .journal_format import NotDurable
from .proto import cluster_pb2

if TYPE_CHECKING:
    from .transport import NodeTransport

log = logging.getLogger("warren.raft.transport")

Frame = cluster_pb2.Frame
_ENVELOPE_OVERHEAD = 16  # protobuf tags and lengths, roughly


class Outbound:
    def __init__(self, nt: NodeTransport) -> None:
        self._nt = nt
        self._dirty: list[PeerLink] = []
        self._flush_scheduled = False
        # Sealed turns waiting for before_flush awaitables, oldest first.
        self._held: deque[tuple[list[Awaitable[object]], list[tuple[PeerLink, int, list]]]] = deque()
        self._gate_task: asyncio.Task | None = None

    def close(self) -> None:
        if self._gate_task is not None:
            self._gate_task.cancel()

    def enqueue(self, link: PeerLink, kind: int, group: str, payload: bytes, gated: bool = True) -> bool:
        if not link.up or self._nt.failed is not None or self._nt.is_partitioned(link.peer):
            return False
        if gated and self._nt.gate_closed():
            self._nt.stats.dropped_not_durable += 1  # it would answer for writes not on disk: lost, as on a network
            return True
        if len(payload) > self._nt.options.max_message_bytes:
            log.error("message of %d bytes for %s/%s is over max_message_bytes", len(payload), link.peer, group)
            return False
        if gated or link.pending or link.held_turns:
            link.pending.append((kind, group, payload, gated))
        else:
            link.ungated.append((kind, group, payload, False))
        link.queued_bytes += len(payload)
        if not link.dirty:
            link.dirty = True
            self._dirty.append(link)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            assert self._nt.loop is not None
            self._nt.loop.call_soon(self._flush)
        return True

    def _flush(self) -> None:
        """Seal this loop turn's messages, pass the durability gate, hand them to the links."""
        self._flush_scheduled = False
        sealed = []
        ungated = []
        for link in self._dirty:
            link.dirty = False
            if link.epoch is not None:
                if link.ungated:
                    ungated.append((link, link.epoch, link.ungated))
                    link.ungated = []
                if link.pending:
                    sealed.append((link, link.epoch, link.pending))
                    link.pending = []
        self._dirty.clear()
        if self._nt.failed is not None:
            return
        if ungated:  # enqueued before anything gated for their peers: they go first
            self._release_sealed(ungated)
        if not sealed:
            return
        self._nt.stats.flushes += 1
        waits: list[Awaitable[object]] = []
        try:
            for hook in self._nt.before_flush:
                w = hook()
                if w is not None:
                    waits.append(w)
        except Exception as e:
            self._fail(e)
            return
        if not waits and not self._held:
            self._release_sealed(sealed)
            return
        self._held.append((waits, sealed))
        for link, _, _ in sealed:
            link.held_turns += 1
        if self._gate_task is None:
            self._gate_task = self._nt.spawn(self._drain_held(), "warren-transport-gate")

    async def _drain_held(self) -> None:
        try:
            while self._held:
                waits, sealed = self._held[0]
                try:
                    for w in waits:
                        await w
                except NotDurable:
                    self._drop(self._held.popleft()[1])
                    continue
                self._unhold(self._held.popleft()[1])
                # the later turns the same write made durable leave with this one
                while self._held and all(_landed(w) for w in self._held[0][0]):
                    for w in self._held[0][0]:
                        w.result()  # a failed gate fails here, before anything of its turn leaves
                    more = self._held.popleft()[1]
                    self._unhold(more)
                    sealed = sealed + more
                self._release_sealed(sealed)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self._fail(e)
        finally:
            self._gate_task = None

    def _drop(self, sealed: list[tuple[PeerLink, int, list]]) -> None:
        """A turn whose writes did not land: its gated messages never leave. The ungated ones
        queued behind them (the queue proxy's, which promise their peer order and no loss while
        a stream lives) leave now, in order: they answer for nothing that write held."""
        self._unhold(sealed)
        kept = []
        for link, epoch, items in sealed:
            ungated = [item for item in items if not item[3]]
            link.queued_bytes -= sum(len(item[2]) for item in items if item[3])
            self._nt.stats.dropped_not_durable += len(items) - len(ungated)
            if ungated:
                kept.append((link, epoch, ungated))
        if kept:
            self._release_sealed(kept)

    def _fail(self, e: BaseException) -> None:
        log.error("durability gate failed; the transport sends nothing more", exc_info=e)
        self._nt.failed = e
        for _, sealed in self._held:
            self._unhold(sealed)
        self._held.clear()
        if self._nt.on_error is not None:
            self._nt.on_error(e)

    @staticmethod
    def _unhold(sealed: list[tuple[PeerLink, int, list]]) -> None:
        for link, _, _ in sealed:
            link.held_turns -= 1

    def _release_sealed(self, sealed: list[tuple[PeerLink, int, list]]) -> None:
        limit = self._nt.options.max_frame_bytes
        for link, epoch, items in _per_link(sealed):
            link.queued_bytes -= sum(len(item[2]) for item in items)
            if not link.up or link.epoch != epoch or self._nt.is_partitioned(link.peer):
                self._nt.stats.dropped_on_reconnect += len(items)
                continue
            frame = Frame(epoch=epoch)
            size = 0
            add = frame.messages.add
            for kind, group, payload, _ in items:
                n = len(payload) + len(group) + _ENVELOPE_OVERHEAD
                if size and size + n > limit:
                    link.push(frame, size)
                    frame = Frame(epoch=epoch)
                    add = frame.messages.add
                    size = 0
                add(kind=kind, group=group, payload=payload)
                size += n
            link.push(frame, size)
            if link.outbox_bytes > self._nt.options.max_outbox_bytes:
                link.kill(f"{link.outbox_bytes} bytes unsent")


def _landed(w: Awaitable[object]) -> bool:
    """A gate future that is done and did not fail with NotDurable (that turn is dropped instead)."""
    return isinstance(w, asyncio.Future) and w.done() and (w.cancelled() or not isinstance(w.exception(), NotDurable))


def _per_link(sealed: list[tuple[PeerLink, int, list]]) -> list[tuple[PeerLink, int, list]]:
    """Several turns' (link, epoch, items) as one per link and epoch, each link's items in order."""
    if len(sealed) <= 1:
        return sealed
    merged: dict[tuple[int, int], tuple[PeerLink, int, list]] = {}
    for link, epoch, items in sealed:
        have = merged.get((id(link), epoch))
        if have is None:
            merged[(id(link), epoch)] = (link, epoch, list(items))
        else:
            have[2].extend(items)
    return list(merged.values())
