"""This node's part in its replicated streams (feature flag stream_replication):
which role it plays for each, and the "stream.repl" node messages between
the roles (queues/stream/wire.py).

The stream's record in the metadata (metadata/state.py StreamRecord) says
who leads and in which epoch. On the leader the vhost's queue is the
StreamQueue with a StreamLeader role (queues/stream/leader.py); on a
replica the vhost's queue is a proxy to the leader (node/vhosts/remote_queue.py),
as on any node without a copy, and the copy itself is a StreamReplica
(queues/stream/replica.py) pulling from the leader. A new epoch moves the
roles: the old leader closes its StreamQueue (its unconfirmed publishes
released) and opens the same directory as a replica, the new leader the
other way round, each once the write in flight has returned.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import shutil
from typing import TYPE_CHECKING, Any, Protocol

from metadata.feature_flags import STREAM_COMMIT_NOTICES
from metadata.state import QueueRecord, StreamRecord
from queues.stream import wire
from queues.stream.config import StreamConfig
from queues.stream.disk import StreamDisk
from queues.stream.leader import StreamLeader
from queues.stream.log_epoch import raise_log_epoch
from queues.stream.queue import StreamQueue
from queues.stream.replica import StreamReplica

from .remote_queue import ProxyNode
from .stream_follower import StreamFollower
from .stream_moves import MovingReaders
from .stream_proxy import StreamProxy

if TYPE_CHECKING:
    from metadata.machine import MetadataMachine
    from metadata.projections import Projections
    from node.cluster.cluster import Cluster
    from node.vhosts.vhost import VHost

__all__ = ["StreamRoles"]

log = logging.getLogger("warren.stream")

CHANNEL = "stream.repl"


class PolicyApplying(Protocol):
    """node/vhosts/policies.py: a copy opened in a new role takes the policy in force."""

    def apply(self, queue: Any) -> None: ...


class RolesNode(ProxyNode, Protocol):
    """What the stream roles use of their node, and what the proxies and followers they make use
    (ProxyNode). Read at each use: `cluster` exists once the node has started."""

    node_id: str
    cluster: Cluster
    metadata_machine: MetadataMachine
    projections: Projections
    vhosts: dict[str, VHost]
    policies: PolicyApplying

    def queue_stopped(self, queue: Any) -> None: ...


class StreamRoles:
    def __init__(self, node: RolesNode, directory_of: Any, disk: StreamDisk | None = None) -> None:
        self.node = node
        self.disk = disk if disk is not None else StreamDisk()  # the node's streams' disk (queues/stream/disk.py)
        self.directory_of = directory_of  # (vhost, name) -> the stream's directory on this node
        self.replicas: dict[tuple[str, str], StreamReplica] = {}
        self._requests = itertools.count(1)
        self._answers: dict[int, asyncio.Future] = {}
        self.moving = MovingReaders()  # consumers of a copy changing role (node/vhosts/stream_moves.py)
        self._closing: set[tuple[str, str]] = set()  # copies closing to open in a new role
        self.stale: set[tuple[str, str]] = set()  # led here by the metadata, with a lost log (stream_failover.py)

    # -- the transport -----------------------------------------------------------------

    def attach(self) -> None:
        """Takes the channel at node start: a replica's fetch may arrive before this node's first stream
        starts (it is then dropped quietly; the leader announces itself when it starts)."""
        self.node.cluster.rpc.channels[CHANNEL] = self._on_message

    def send(self, peer: str, message: object) -> None:
        transport = self.node.cluster.transport
        transport.add_peer(peer)  # keeps a stream to it; idempotent
        transport.send_node_message(peer, CHANNEL, wire.encode(message))

    def _on_message(self, peer: str, payload: bytes) -> None:
        try:
            msg: Any = wire.decode(payload)
        except wire.WireError as e:
            log.warning("dropped a %s message from %s: %s", CHANNEL, peer, e)
            return
        key = (msg.vhost, msg.name)
        if isinstance(msg, wire.Fetch):
            queue = self._leading(*key)
            if queue is not None:
                queue.role.on_fetch(peer, msg)
        elif isinstance(msg, wire.Chunks | wire.Committed | wire.Truncate):
            replica = self.replicas.get(key)
            if replica is not None and replica.leader == peer:
                if isinstance(msg, wire.Chunks):
                    replica.on_chunks(msg)
                elif isinstance(msg, wire.Committed):
                    replica.on_committed(msg)
                else:
                    replica.on_truncate(msg)
        elif isinstance(msg, wire.Stop):
            replica = self.replicas.get(key)
            if replica is not None and peer != replica.leader and self.node.cluster.transport.is_connected(
                    replica.leader):  # fmt: skip
                log_epoch, end = 0, -1  # the leader is alive from here: no election (unless it asks)
            else:
                log_epoch, end = self.stop(msg.vhost, msg.name, msg.epoch)
            self.send(peer, wire.Status(msg.vhost, msg.name, msg.epoch, msg.request, log_epoch, end))
        elif isinstance(msg, wire.Status):
            future = self._answers.pop(msg.request, None)
            if future is not None and not future.done():
                future.set_result((msg.log_epoch, msg.end))

    def _notices(self) -> bool:
        """Whether every node takes `committed` notices (queues/stream/leader.py)."""
        return STREAM_COMMIT_NOTICES in self.node.projections.feature_flags

    def _leading(self, vhost: str, name: str) -> StreamQueue | None:
        vh = self.node.vhosts.get(vhost)
        queue = vh.queues.get(name) if vh is not None else None
        return queue if isinstance(queue, StreamQueue) and queue.role is not None else None

    # -- failover (node/vhosts/stream_failover.py) ---------------------------------------

    def stop(self, vhost: str, name: str, epoch: int) -> tuple[int, int]:
        """Fences this node's replica for `epoch`: (log epoch, end); end -1 when it has none."""
        replica = self.replicas.get((vhost, name))
        if replica is not None and replica.epoch == epoch:
            return replica.stop(epoch)
        return 0, -1  # no copy here, or this node leads: it is alive, no election

    async def ask_stop(self, peer: str, vhost: str, name: str, epoch: int, timeout: float) -> tuple[int, int] | None:
        request = next(self._requests)
        future = self._answers[request] = asyncio.get_running_loop().create_future()
        self.send(peer, wire.Stop(vhost, name, epoch, request))
        try:
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            return None
        finally:
            self._answers.pop(request, None)

    # -- roles -------------------------------------------------------------------------

    def record(self, vhost: str, name: str) -> StreamRecord | None:
        return self.node.metadata_machine.state.stream(vhost, name)

    def start(self, vhost: VHost, q: QueueRecord, arguments: dict) -> Any:
        """The vhost's queue for a replicated stream: the leader's StreamQueue, else a proxy."""
        record = self.record(vhost.name, q.name)
        assert record is not None
        me = self.node.node_id
        if record.leader == me:
            return self._lead(vhost, record, arguments, None)
        if me in record.replicas:
            return StreamFollower(self.node, vhost.name, q, arguments, self._follow(vhost.name, record, arguments))
        return StreamProxy(self.node, vhost.name, q, arguments)

    def _lead(self, vhost: VHost, record: StreamRecord, arguments: dict, committed: int | None) -> StreamQueue:
        directory = self.directory_of(vhost.name, record.name)
        queue = StreamQueue(vhost.name, record.name, arguments, directory, vhost, self.node.loop, self.disk)
        raise_log_epoch(directory, record.epoch)  # before it takes a publish of this epoch
        key = (vhost.name, record.name)
        role = StreamLeader(queue, self.node.node_id, record.epoch, record.replicas, self.send, self._notices,
                            on_lost_log=lambda: self.stale.add(key))  # fmt: skip
        queue.role = role
        # what a majority is known to have: all of it when alone, else what it learned as a replica
        queue.committed_end = queue.log.next_offset if len(record.replicas) == 1 else \
            min(committed if committed is not None else queue.log.first_offset, queue.log.next_offset)  # fmt: skip
        for peer in record.replicas:
            if peer != self.node.node_id:
                self.node.cluster.transport.add_peer(peer)
        role.announce()
        return queue

    def _follow(self, vhost: str, record: StreamRecord, arguments: dict) -> StreamReplica:
        replica = StreamReplica(vhost, record.name, self.directory_of(vhost, record.name),
                                StreamConfig.from_arguments(arguments), record.leader, record.epoch, self.send,
                                self.node.loop, self.disk)  # fmt: skip
        self.replicas[(vhost, record.name)] = replica
        replica.fetch()
        return replica

    def changed(self, vhost: VHost, name: str) -> None:
        """A new epoch (leader or replicas changed): move this node's role."""
        record = self.record(vhost.name, name)
        q = self.node.metadata_machine.state.queue(vhost.name, name)
        if record is None or q is None:
            return
        me = self.node.node_id
        arguments = dict(q.arguments_map)
        key = (vhost.name, name)
        if key in self._closing:
            return  # once closed, the copy opens in the role of the epoch then
        current = vhost.queues.get(name)
        replica = self.replicas.get(key)
        if isinstance(current, StreamQueue) and record.leader == me:  # leads on, with other replicas maybe
            current.role.epoch, current.role.replicas = record.epoch, record.replicas
            current.role.ends.clear()  # counted again from fetches of the new epoch
            current.role.parked.clear()
            raise_log_epoch(current.log.directory, record.epoch)
            self.moving.settle(key, current)
            return
        if isinstance(current, StreamProxy) and me not in record.replicas:  # still no copy here
            current.leader_moved(record.leader)
            self.moving.settle(key, current)
            return
        if isinstance(current, StreamFollower) and replica is not None and me in record.replicas \
                and record.leader != me:  # fmt: skip
            current.leader = record.leader
            current.replica.follow(record.leader, record.epoch)
            self.moving.settle(key, current)
            return

        def swap(new: Any) -> None:
            """The vhost's queue becomes `new`. A proxy's consumers stay with the node serving them;
            a copy's readers were parked and go on with this node's new role (stream_moves.py)."""
            old = vhost.queues.get(name)
            vhost.queues[name] = new
            if old is not None and old is not new and not isinstance(old, StreamQueue | StreamFollower):
                self.node.queue_stopped(old)

        def then() -> None:  # this node's copy is closed: open it in its new role
            self._closing.discard(key)
            if self.record(vhost.name, name) != record:
                self.changed(vhost, name)  # another epoch came meanwhile: that one's role
                return
            if record.leader == me:
                swap(self._lead(vhost, record, arguments, committed))
            elif me in record.replicas:
                swap(StreamFollower(self.node, vhost.name, q, arguments, self._follow(vhost.name, record, arguments)))
            else:
                swap(StreamProxy(self.node, vhost.name, q, arguments))
                shutil.rmtree(self.directory_of(vhost.name, name), ignore_errors=True)
            self.node.policies.apply(vhost.queues[name])  # the copy opened on the stream's own arguments
            self.moving.settle(key, vhost.queues[name])

        committed = replica.committed_end if replica is not None else None
        self.moving.park(key, current)
        if isinstance(current, StreamQueue):
            swap(StreamProxy(self.node, vhost.name, q, arguments))  # until its files are closed
            self._closing.add(key)
            current.close(then)
        elif replica is not None:
            del self.replicas[key]
            self._closing.add(key)
            replica.close(then)
        else:
            then()

    def dropped(self, vhost: str, name: str) -> None:
        """The stream was deleted (or its vhost): this node's copy goes."""
        replica = self.replicas.pop((vhost, name), None)
        if replica is not None:
            replica.destroy()
        self.moving.drop((vhost, name))

    def close(self) -> None:
        for replica in self.replicas.values():
            replica.close()
        self.replicas.clear()
