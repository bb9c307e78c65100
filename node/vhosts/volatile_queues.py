"""This node's volatile queues (queues/volatile.py) and the way to other
nodes' ones.

A volatile queue lives only here, in memory, while its requester's link
does: nothing goes through Raft. Publishing to a reply address finds its
target by the name alone, as RabbitMQ 4.2 does:

- the name points at this node: the queue if it is still there in this
  vhost, else a sink that accepts the message and drops it (RabbitMQ
  confirms a reply to a gone requester and drops it: the responder's link
  never ends for it);
- the name points at another member: a forwarder that sends the message on
  as a node message on channel "queue.volatile" (the cluster transport the
  inter-node RPC rides on, node/cluster/rpc.py) and accepts it at once; the
  member hands it to its queue or drops it;
- anything else (not a member, not a name this broker makes): no target,
  which the publisher answers `released`, the outcome of an unroutable
  message.

The node message is a list encoded with the AMQP codec (explicit, never
pickled): ["reply", vhost, queue, payload, exchange, routing_keys]. There is
no reply and no retry: a reply crosses at most once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from amqp import codec
from node.vhosts.vhost import monotonic_ms, wall_ms
from node.workers.slots import node_of_peer
from queues.base import ConfirmCallback, Outcome, Queue, QueueMessage
from queues.volatile import VolatileQueue, new_name, node_of

if TYPE_CHECKING:
    import asyncio

    from node.cluster.cluster import Cluster
    from node.ops.metrics import NodeMetrics

log = logging.getLogger("warren.volatile")

CHANNEL = "queue.volatile"


class VolatileQueues:
    """Creates, finds and forgets this node's volatile queues; the QueueHost
    of each of them."""

    def __init__(self, metrics: NodeMetrics) -> None:
        self.metrics = metrics
        self.node_id = ""
        self._cluster: Cluster | None = None  # and the loop: both from attach_cluster
        self._loop: asyncio.AbstractEventLoop | None = None
        self.queues: dict[str, VolatileQueue] = {}
        self._pinned: set[str] = set()
        self._gone = _Gone()

    def attach_cluster(self, cluster: Cluster, loop: asyncio.AbstractEventLoop) -> None:
        """Listens for replies other nodes forward (once the cluster runs)."""
        self._cluster, self._loop, self.node_id = cluster, loop, cluster.node_id
        cluster.rpc.channels[CHANNEL] = self._on_message

    def create(self, vhost: str) -> VolatileQueue:
        name = new_name(self.node_id)
        queue = self.queues[name] = VolatileQueue(self, vhost, name)
        return queue

    def local(self, vhost: str, name: str) -> VolatileQueue | None:
        queue = self.queues.get(name)
        return queue if queue is not None and queue.vhost == vhost else None

    def target(self, vhost: str, name: str) -> Any:
        """What a publish to `name` goes to (see the module's docstring):
        an object with the queue's `publish`, or None for no such queue."""
        queue = self.queues.get(name)
        if queue is not None and queue.vhost == vhost:
            return queue  # the common case, without decoding the name
        node = node_of(name)
        if node is None:
            return None
        if node == self.node_id:
            return self._gone
        return _Forward(self, node, vhost, name) if self._is_member(node) else None

    def exists(self, vhost: str, name: str) -> bool:
        """For a sender attaching to a reply address: is the requester there?
        Known for this node's queues; another member's is taken on trust (a
        reply to a gone requester is dropped there)."""
        node = node_of(name)
        if node == self.node_id:
            return self.local(vhost, name) is not None
        return node is not None and self._is_member(node)

    def _is_member(self, node: str) -> bool:
        """A member of the cluster, or a worker of one (node/workers/: its worker 0 passes a
        reply on to it)."""
        cluster = self._cluster
        return cluster is not None and node_of_peer(node) in cluster.members()

    # -- the cross-node path -----------------------------------------------------------

    def forward(self, node: str, vhost: str, name: str, message: QueueMessage) -> None:
        transport = self._cluster.transport
        node = self._cluster.next_hop(node)
        if node not in self._pinned:  # keep a stream to the member even if no Raft group shares it
            self._pinned.add(node)
            transport.add_peer(node)
        payload = codec.dumps(["reply", vhost, name, message.payload, message.exchange, list(message.routing_keys)])
        if not transport.send_node_message(node, CHANNEL, payload):
            self.count_dropped(None, "maxlen", 1)  # no stream to the member: the reply is lost

    def _on_message(self, peer: str, payload: bytes) -> None:
        try:
            kind, vhost, name, body, exchange, routing_keys = codec.loads(payload)
            if kind != "reply":
                raise ValueError(f"unknown message {kind!r}")
        except Exception as e:
            log.warning("dropped a malformed %s message from %s: %s", CHANNEL, peer, e)
            return
        queue = self.local(vhost, name)
        if queue is None:  # a worker of this node's requester: this is its worker 0, which passes it on
            queue = self.target(vhost, name) if self._cluster.next_hop(node_of(name) or "") != peer else None
        if queue is not None:
            queue.publish(QueueMessage(0, body, False, None, 0, False, exchange, list(routing_keys)), None)

    # -- QueueHost -----------------------------------------------------------------------

    now_ms = staticmethod(wall_ms)  # the vhosts' clocks (node/vhosts/vhost.py)
    monotonic_ms = staticmethod(monotonic_ms)

    def call_later(self, delay_s: float, fn: Callable[[], None]) -> Any:
        return self._loop.call_later(delay_s, fn)

    def dead_letter(self, queue: Queue, message: QueueMessage, reason: str,
                    confirmed: Callable[[bool], None] | None = None) -> None:  # fmt: skip
        if confirmed is not None:
            confirmed(True)  # a volatile queue has no dead-letter exchange: never called

    def count_dropped(self, queue: Queue | None, reason: str, n: int) -> None:
        self.metrics.count_dead_letter(reason, VolatileQueue.type_name, "disabled", n)

    def queue_deleted(self, queue: Queue) -> None:
        if self.queues.get(queue.name) is queue:
            del self.queues[queue.name]


class _Gone:
    """A reply address of this node whose link is gone: accepted, dropped."""

    __slots__ = ()

    def publish(self, message: QueueMessage, confirm: ConfirmCallback | None) -> None:
        if confirm is not None:
            confirm(Outcome.ACCEPTED)


class _Forward:
    """A reply address another node hosts: sent on, accepted at once."""

    __slots__ = ("queues", "node", "vhost", "name")

    def __init__(self, queues: VolatileQueues, node: str, vhost: str, name: str) -> None:
        self.queues = queues
        self.node = node
        self.vhost = vhost
        self.name = name

    def publish(self, message: QueueMessage, confirm: ConfirmCallback | None) -> None:
        self.queues.forward(self.node, self.vhost, self.name, message)
        if confirm is not None:
            confirm(Outcome.ACCEPTED)
