"""Keeps this node's vhosts and queue processes in step with the metadata.

Subscribed to the metadata machine after the projections (so routing tables
exist by the time a queue appears), it runs on every node for every applied
command, whoever proposed it:

    VHostAdded/Updated  -> a VHost object (node/vhosts/vhost.py)
    VHostDeleted        -> its connections closed, its local queues dropped
    QueueDeclared       -> the queue's process on its leader (a ClassicQueue,
                           with the messages recovered from the node's store),
                           a proxy everywhere else (node/vhosts/remote_queue.py)
    QueueDeleted        -> the process stopped and its messages dropped; the
                           links consuming from it detached

`on_restored` (a snapshot installed, or a membership reset) reconciles
everything at once. A declaration's exclusive owner is an id that
`Owners` maps back to the connection on the node that declared it.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from metadata import effects as fx
from metadata.effects import Effect, Result
from metadata.state import MetadataState, QueueRecord
from node.vhosts.vhost import VHost, VHostNode

if TYPE_CHECKING:
    from metadata.machine import MetadataMachine
    from node.vhosts.quorum_groups import QuorumQueues
    from node.vhosts.streams import StreamQueues

log = logging.getLogger("warren.queues")


class Owners:
    """Ids for the connections that own exclusive queues ("node/conn-N")."""

    def __init__(self, node_id: str = "") -> None:
        self.node_id = node_id
        self._ids: dict[int, str] = {}  # id(owner) ->
        self._owners: dict[str, Any] = {}
        self._next = itertools.count(1)

    def id_of(self, owner: Any) -> str:
        key = self._ids.get(id(owner))
        if key is None:
            key = self._ids[id(owner)] = f"{self.node_id}/conn-{next(self._next)}"
            self._owners[key] = owner
        return key

    def owner(self, key: str | None) -> Any:
        return None if key is None else self._owners.get(key)

    def is_local(self, key: str) -> bool:
        return key.rpartition("/")[0] == self.node_id

    def forget(self, owner: Any) -> None:
        key = self._ids.pop(id(owner), None)
        if key is not None:
            self._owners.pop(key, None)


class LocalQueuesNode(VHostNode, Protocol):
    """What LocalQueues uses of its node: the vhosts it keeps, the queue
    factories per type, and what each vhost it makes uses (VHostNode)."""

    vhosts: dict[str, VHost]
    metadata_machine: MetadataMachine
    quorum: QuorumQueues
    streams: StreamQueues

    def make_queue(self, vhost: VHost, name: str, durable: bool, exclusive_owner: Any, auto_delete: bool,
                   arguments: dict) -> Any: ...  # fmt: skip

    def recover_queue(self, queue: Any) -> None: ...

    def remote_queue(self, vhost: VHost, record: Any, arguments: dict) -> Any: ...

    def queue_stopped(self, queue: Any) -> None: ...

    def vhost_deleted(self, vhost: VHost) -> None: ...


class LocalQueues:
    def __init__(self, node: LocalQueuesNode) -> None:
        self.node = node
        # On a node with several workers (node/workers/slots.py): the peer name of the
        # worker of this node that runs a queue when it is not this one, else None.
        self.elsewhere: Callable[[Any], str | None] | None = None

    def is_local(self, vhost: str, queue: str) -> bool:
        """The queue runs on this node, on any of its workers (x-local-random routes to those first)."""
        vh = self.node.vhosts.get(vhost)
        q = vh.queues.get(queue) if vh is not None else None
        if q is None or not q.remote:
            return q is not None
        me = self.node.node_id  # another worker of this node serves it, or relays another node's
        return q.via is not None and (q.leader == me or me in q.replicas)

    # -- the machine's listener hooks ------------------------------------------------

    def on_applied(self, command: Any, result: Result, effects: tuple[Effect, ...], index: int) -> None:
        for effect in effects:
            handler = self._HANDLERS.get(type(effect))
            if handler is not None:
                handler(self, effect)

    def on_restored(self, state: MetadataState) -> None:
        node = self.node
        for name in [n for n in node.vhosts if n not in state.vhosts]:
            self._drop_vhost(name)
        for vh in state.vhosts.values():
            record = vh.record
            vhost = self._vhost(record.name)
            vhost.description, vhost.tags = record.description, list(record.tags)
            vhost.default_queue_type = record.default_queue_type
            vhost.protected_from_deletion = record.protected_from_deletion
            for name in [n for n in vhost.queues if n not in vh.queues]:
                self._stop(vhost, name)
            for q in vh.queues.values():
                current = vhost.queues.get(q.name)
                if current is not None and self._placed_here(current) != self._belongs_here(q):
                    self._stop(vhost, q.name)  # moved (a reset cluster reused the name)
                if q.name not in vhost.queues:
                    self._start(vhost, q)
            for name in vh.streams:  # each replicated stream's role in the restored epoch
                self.node.streams.changed(vhost, name)

    # -- vhosts ----------------------------------------------------------------------

    def _vhost(self, name: str) -> VHost:
        vhost = self.node.vhosts.get(name)
        if vhost is None:
            vhost = self.node.vhosts[name] = VHost(name, self.node)
        return vhost

    def _vhost_added(self, e: fx.VHostAdded | fx.VHostUpdated) -> None:
        vhost = self._vhost(e.name)
        vhost.description, vhost.tags = e.description, list(e.tags)
        vhost.default_queue_type = e.default_queue_type
        vhost.protected_from_deletion = e.protected_from_deletion

    def _vhost_deleted(self, e: fx.VHostDeleted) -> None:
        self._drop_vhost(e.name)

    def _drop_vhost(self, name: str) -> None:
        vhost = self.node.vhosts.pop(name, None)
        if vhost is None:
            return
        self.node.vhost_deleted(vhost)
        for queue_name in list(vhost.queues):
            self._stop(vhost, queue_name)

    # -- queues ----------------------------------------------------------------------

    def _queue_declared(self, e: fx.QueueDeclared) -> None:
        vhost = self.node.vhosts.get(e.vhost)
        if vhost is not None and e.name not in vhost.queues:
            self._start(vhost, e)

    def _queue_replicas(self, e: fx.QueueReplicasChanged) -> None:
        """A quorum queue gained or lost a member: start or drop this node's copy."""
        vhost = self.node.vhosts.get(e.vhost)
        if vhost is None:
            return
        if e.type == "stream":  # a new epoch (node/vhosts/stream_replication.py)
            self.node.streams.changed(vhost, e.name)
            return
        me = self.node.node_id
        current = vhost.queues.get(e.name)
        if me in e.replicas and me not in e.previous:
            self._stop(vhost, e.name)  # the proxy
            self._start(vhost, e)
        elif me in e.previous and me not in e.replicas:
            self._stop(vhost, e.name)
            self._start(vhost, e)  # a proxy now
        elif current is not None:
            if hasattr(current, "members"):
                current.members = tuple(e.replicas)
            else:  # a proxy (node/vhosts/remote_queue.py)
                current.leader = e.leader
                current.replicas = tuple(e.replicas)

    def _queue_deleted(self, e: fx.QueueDeleted) -> None:
        vhost = self.node.vhosts.get(e.vhost)
        if vhost is not None:
            self._stop(vhost, e.name)

    def start(self, vhost: VHost, q: QueueRecord | fx.QueueDeclared) -> Any:
        self._start(vhost, q)
        return vhost.queues[q.name]

    def _start(self, vhost: VHost, q: QueueRecord | fx.QueueDeclared | fx.QueueReplicasChanged) -> None:
        node = self.node
        if isinstance(q, fx.QueueReplicasChanged):
            q = node.metadata_machine.state.queue(q.vhost, q.name)
        arguments = dict(q.arguments_map if isinstance(q, QueueRecord) else q.arguments)
        worker = self.elsewhere(q) if self.elsewhere is not None else None
        if worker is not None:  # proxied to that worker, which serves it (or relays it: node/workers/)
            queue = vhost.queues[q.name] = node.remote_queue(vhost, q, arguments)
            queue.via = worker
        elif q.type == "quorum":
            if node.node_id in q.replicas:
                vhost.queues[q.name] = node.quorum.start(vhost, q, arguments)
            else:
                vhost.queues[q.name] = node.remote_queue(vhost, q, arguments)
        elif q.type == "stream" and node.streams.replicated(q.vhost, q.name):
            vhost.queues[q.name] = node.streams.start_replicated(vhost, q, arguments)
        elif q.type == "stream" and q.leader == node.node_id:
            vhost.queues[q.name] = node.streams.start(vhost, q.name, arguments)
        elif q.leader == node.node_id:
            owner = node.owners.owner(q.exclusive_owner)
            queue = node.make_queue(vhost, q.name, q.durable, owner, q.auto_delete, arguments)
            vhost.queues[q.name] = queue
            node.recover_queue(queue)
            if q.exclusive_owner is not None and owner is None:
                # its connection closed before the declaration applied here, or
                # this node restarted: an exclusive queue outlives neither
                vhost.forget(q.name)
        else:
            vhost.queues[q.name] = node.remote_queue(vhost, q, arguments)

    def moved(self, vhost_name: str, name: str) -> None:
        """The queue now runs on another worker of this node (a lost worker's queue taken over,
        node/workers/lost_workers.py): this worker's object for it starts again, the queue
        itself where it runs now, a proxy to it elsewhere."""
        vhost = self.node.vhosts.get(vhost_name)
        record = self.node.metadata_machine.state.queue(vhost_name, name)
        if vhost is not None and record is not None:
            self._stop(vhost, name)  # a proxy to the lost worker: its links ended with that worker's
            self._start(vhost, record)

    def _stop(self, vhost: VHost, name: str) -> None:
        self.node.streams.dropped(vhost.name, name)  # a stream replica's copy
        queue = vhost.queues.pop(name, None)
        if queue is None:
            return
        if not queue.deleted:
            queue.delete()
        self.node.queue_stopped(queue)

    def _belongs_here(self, q: QueueRecord) -> bool:
        """Whether this node runs the queue itself: a quorum queue's replicas, a classic queue's leader."""
        if self.elsewhere is not None and self.elsewhere(q) is not None:
            return False
        me = self.node.node_id
        return me in q.replicas if q.type == "quorum" else q.leader == me

    def _placed_here(self, queue: Any) -> bool:
        return not queue.remote

    _HANDLERS: dict[type, Any] = {
        fx.VHostAdded: _vhost_added,
        fx.VHostUpdated: _vhost_added,
        fx.VHostDeleted: _vhost_deleted,
        fx.QueueDeclared: _queue_declared,
        fx.QueueDeleted: _queue_deleted,
        fx.QueueReplicasChanged: _queue_replicas,
    }
