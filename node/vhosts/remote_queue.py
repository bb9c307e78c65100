"""The cross-node data path: a client on node A uses a queue led by node B.

On A the queue is a `RemoteQueue`, a proxy with the queue interface
(queues/base.py), so publishers and consumer links do not know the queue is
elsewhere. On B, `QueueService` hands what arrives to the real queue and
stands in for A's consumers (`RemoteConsumer`). Both ends speak over the
cluster transport's node messages on channel "queue.data": per peer in
order and without duplicates while a stream lives. What a node sends a
peer during one loop turn goes as one typed, versioned binary record
(proxy_records.py: the messages' bytes as received, no AMQP encoding
around them) once the cluster enabled feature flag `queue_proxy_records`;
before that (a rolling upgrade), each message is one AMQP-encoded list
(explicit, never pickled); proxy_outbox.py batches them. Either way the
messages are:

    A -> B  ["pub", vhost, queue, corr, payload, durable, expires_at, exchange, routing_keys, annotations]
            ["attach", cid, vhost, queue, priority, presettled]
            ["sattach", cid, vhost, queue, priority, presettled, filters]   a replicated stream's reader
                                             (its source's filter set; only once stream_replication is on)
            ["credit", cid, delivery_count, credit, drain, echo]
            ["settle", cid, seqs, kind, delivery_failed, undeliverable_here, annotations]
            ["detach", cid]
            ["count", req, vhost, queue]     what management asks about the queue
            ["purge", req, vhost, queue]
    B -> A  ["counts", req, ready, unacked, consumers]   (ready None: B lost the queue)
            ["purged", req, messages]        (None: B lost the queue)
            ["conf", corr, outcome]          after B's queue confirmed (durable: fsynced on B)
            ["deliver", cid, seq, payload, delivery_count, acquired, durable, exchange, routing_keys, annotations]
            ["flow", cid, delivery_count, credit, available, drain]
            ["gone", cid, condition, description]

Credit flows end to end: the queue on B owns each consumer's delivery-count
and credit (credit API v2), A forwards the client's FLOWs and B's replies;
for a quorum queue's consumer A asks for a lease on top and holds what the
client's own credit does not allow yet (proxy_lease.py).
A publish is confirmed to the client only when B's queue confirmed it, so a
remote publisher gets the guarantee a local one gets. When a stream between
A and B ends, what B had not confirmed may or may not be stored there: A
reports those publishes' outcome as unknown (the publisher's link is
detached, leaving them unsettled; "released" would promise they were not
taken), and detaches the consumer links; B returns A's unsettled deliveries
to the queue.

Which node B is: a classic queue's leader. A quorum queue runs on every one
of its replicas, so B is its first-listed leader while A reaches it, else any
replica A reaches (the metadata names the declaring node, which may be down
while the queue's group goes on without it). A consumer stays with the node
it attached through.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from amqp.errors import Condition
from metadata.feature_flags import QUEUE_PROXY_RECORDS
from node.tasks import BackgroundTasks
from queues.base import ConfirmCallback, Consumer, Outcome, Queue, QueueArgumentError, QueueMessage, Settlement
from queues.stream.spec import ReadSpec
from queues.stream.sql import DEFAULT_MAX_LENGTH

from . import proxy_records
from .answer_gate import AnswerGate
from .metadata_store import MetadataUnavailable
from .proxy_lease import ProxyLeases
from .proxy_outbox import ProxySender
from .quorum_groups import group_name
from .remote_consumer import RemoteConsumer

if TYPE_CHECKING:
    from metadata.projections import Projections
    from node.cluster.cluster import Cluster
    from node.vhosts.vhost import VHost

log = logging.getLogger("warren.remote")

CHANNEL = "queue.data"
ATTACH_WAIT = 5.0  # seconds a consumer's attach waits for a stream to the queue's node
COUNT_WAIT = 2.0  # seconds management waits for the queue's node to report its counts
PURGE_WAIT = 10.0  # seconds a purge waits for the queue's node (a quorum queue commits it first)
_OUTCOMES = {o.value: o for o in Outcome}


class QueueUnreachable(MetadataUnavailable):
    """The queue's node did not answer: management answers 503, as when the
    metadata store has no majority."""


class ProxyNode(Protocol):
    """What a proxy uses of its node. Read at each use: a proxy restored while the
    cluster starts exists before the node's QueueService does."""

    queue_service: QueueService
    loop: asyncio.AbstractEventLoop


class RemoteQueue(Queue):
    """A queue led by another node, as this node's links use it."""

    remote = True

    def __init__(self, node: ProxyNode, vhost: str, record: Any, arguments: dict):
        super().__init__(vhost, record.name, record.durable, record.exclusive_owner, record.auto_delete, arguments)
        self.type_name = record.type
        self.node = node
        self.leader = record.leader
        self.replicas: tuple[str, ...] = tuple(record.replicas) if record.type == "quorum" else ()
        # the worker of this node that serves the queue, when another does (node/workers/): every
        # request goes there, while leader and replicas stay what the metadata says (as shown)
        self.via: str | None = None
        self.consumers: dict[Any, int] = {}  # local consumer -> cid
        # (ready, unacked, consumers) as the queue's node last reported them
        # (refresh_counts, before management reads them); None: never heard
        self.reported: tuple[int, int, int] | None = None

    @property
    def _service(self) -> QueueService:
        return self.node.queue_service

    def target(self) -> str:
        """The node to send to now (see the module docstring)."""
        if self.via is not None:
            return self.via
        reachable = self._service.transport.is_connected
        if not self.replicas or reachable(self.leader):
            return self.leader
        return next((r for r in self.replicas if reachable(r)), self.leader)

    def publish(self, message: QueueMessage, confirm: ConfirmCallback | None) -> None:
        self._service.publish(self, message, confirm)

    def attach_consumer(self, consumer: Consumer, priority: int = 0) -> None:
        self.consumers[consumer] = self._service.attach(self, consumer, priority)

    def detach_consumer(self, consumer: Consumer) -> None:
        cid = self.consumers.pop(consumer, None)
        if cid is not None:
            self._service.detach(cid)

    def consumer_lost(self, consumer: Any, condition: str, description: str) -> None:
        """The node serving `consumer` ended it, or cannot be reached: its link is detached."""
        self.consumers.pop(consumer, None)
        end_consumer(consumer, condition, description)

    def credit(self, consumer: Consumer, delivery_count: int, link_credit: int, drain: bool, echo: bool) -> None:
        cid = self.consumers.get(consumer)
        if cid is not None:
            self._service.credit(cid, delivery_count, link_credit, drain, echo)

    def settle(self, consumer: Consumer, seqs: list[int], settlement: Settlement) -> None:
        cid = self.consumers.get(consumer)
        if cid is not None:
            self._service.send_for(cid, ["settle", cid, list(seqs), settlement.kind, settlement.delivery_failed,
                                         settlement.undeliverable_here, settlement.annotations])  # fmt: skip

    async def purge(self) -> int:  # type: ignore[override]
        """Purged by the queue's node; how many messages it dropped."""
        purged = await self._service.ask(self, "purge", PURGE_WAIT)
        if purged is None:
            raise QueueUnreachable(f"queue '{self.name}' in vhost '{self.vhost}': its node did not answer the purge")
        return purged

    def delete(self) -> int:
        """The queue was deleted (through the metadata), or this node now has a replica of it
        (a quorum queue's member added back), which replaces this proxy: end the local
        consumers' links, and tell the node serving each, so that what it holds for them goes
        back to the queue. In the second case that queue lives on, and would otherwise keep
        their unsettled messages checked out to consumers no link stands for."""
        self.deleted = True
        for consumer in list(self.consumers):
            self._service.detach(self.consumers.pop(consumer))
            consumer.queue_deleted()
        return 0

    async def refresh_counts(self, timeout: float = COUNT_WAIT) -> None:
        """Asks the queue's node for its counts (management calls this before
        it reads them); keeps the last ones if no answer comes in time."""
        counts = await self._service.counts(self, timeout)
        if counts is not None:
            self.reported = counts

    @property
    def message_count(self) -> int:
        """Ready messages, as last reported by the queue's node (refresh_counts)."""
        return 0 if self.reported is None else self.reported[0]

    @property
    def unacked_count(self) -> int:
        return 0 if self.reported is None else self.reported[1]

    @property
    def consumer_count(self) -> int:
        """Every consumer of the queue, as last reported; this node's own until one is."""
        return len(self.consumers) if self.reported is None else self.reported[2]

    def info(self) -> dict:
        out = super().info()
        out["messages_unacknowledged"] = self.unacked_count
        if self.replicas:  # a quorum queue: its members, and its leader as announced (or the first member)
            leader = self._service.group_leader(group_name(self.vhost, self.name))
            out.update(leader=leader or self.replicas[0], leader_elected=leader is not None,
                       members=list(self.replicas))  # fmt: skip
        return out


async def refresh_counts(queues: Any, timeout: float = COUNT_WAIT) -> None:
    """Refreshes the counts of the remote ones among `queues`, and waits for the consumer
    commands a quorum replica here has sent, all at once (no read shows the messages a
    detached consumer returned as gone; past `timeout` it reads what it has)."""
    waits = [q.refresh_counts(timeout) for q in queues if q.remote]
    waits += [_consumers_applied(q, timeout) for q in queues if hasattr(q, "consumers_applied")]
    if waits:
        await asyncio.gather(*waits)


async def _consumers_applied(queue: Any, timeout: float) -> None:
    applied = queue.consumers_applied()
    if applied.done():  # nothing in flight, as for nearly every queue of a listing: no timer task
        return
    try:
        await asyncio.wait_for(applied, timeout)
    except TimeoutError:
        pass  # the log is stuck (no leader): read what this replica has


class QueueService:
    """Both ends of the data path on this node."""

    def __init__(self, cluster: Cluster, loop: asyncio.AbstractEventLoop, vhosts: dict[str, VHost],
                 projections: Projections, consumer_lease: int) -> None:  # fmt: skip
        """`consumer_lease` is setting quorum_consumer_lease (proxy_lease.py)."""
        self.loop = loop
        self.vhosts = vhosts
        self.transport = cluster.transport
        self._cluster = cluster
        cluster.rpc.channels[CHANNEL] = self._on_message
        self.transport.on_peer_down.append(self._peer_down)
        # what this node sends its peers on CHANNEL, batched per loop turn (proxy_outbox.py)
        self.sender = ProxySender(loop, self.transport, CHANNEL,
                                  lambda: QUEUE_PROXY_RECORDS in projections.feature_flags)  # fmt: skip
        self.send = self.sender.send
        # this node as the client's side
        self._corr = itertools.count(1)
        self._confirms: dict[int, tuple[str, ConfirmCallback]] = {}  # corr -> (node sent to, confirm)
        self._cids = itertools.count(1)
        self._consumers: dict[int, tuple[RemoteQueue, Consumer, str]] = {}  # cid -> (queue, link, node serving it)
        # consumers whose attach waits for a stream to the leader (it restarts, say): what they sent meanwhile
        self._waiting: dict[int, list[list]] = {}
        self._counting: dict[int, asyncio.Future] = {}  # req -> the answer to a "count"
        # a quorum queue's consumers: what the client's credit does not let through yet (proxy_lease.py)
        self.leases = ProxyLeases(lambda: consumer_lease)
        # this node as the queue's side
        self.served: dict[tuple[str, int], RemoteConsumer] = {}  # (peer, cid) ->
        self._gate = AnswerGate(self.transport, loop, self._handle, self.sender.pin)
        self._tasks = BackgroundTasks(loop, log)  # attaches waiting for a stream, purges being answered
        # whether this node serves `peer` a queue it reaches through the proxy itself (a node of
        # several workers: worker 0 relays between its workers and the other nodes); else only
        # its own queues, so that two nodes with stale views never pass a link back and forth
        self.relays: Callable[[str, RemoteQueue], bool] | None = None

    def close(self) -> None:
        if self._peer_down in self.transport.on_peer_down:
            self.transport.on_peer_down.remove(self._peer_down)
        self._gate.close()
        self._tasks.cancel()

    def group_leader(self, group: str) -> str | None:
        """The leader of a quorum queue's group this node has no replica of, as its leader's
        node announces it (node/cluster/liveness.py); None while none is heard."""
        liveness = self._cluster.liveness
        return liveness.leader_of(group) if liveness is not None else None

    def streams_with(self, peer: str) -> tuple[int | None, int | None]:
        """The epochs of the peer's stream to us and ours to it (None: none now)."""
        return self.transport.epoch_from(peer), self.transport.epoch_to(peer)

    # -- the client's side -------------------------------------------------------------

    def publish(self, queue: RemoteQueue, m: QueueMessage, confirm: ConfirmCallback | None) -> None:
        corr = 0
        target = queue.target()
        if confirm is not None:
            corr = next(self._corr)
            self._confirms[corr] = (target, confirm)
        sent = self.send(target, ["pub", queue.vhost, queue.name, corr, m.payload, m.durable, m.expires_at,
                                        m.exchange, list(m.routing_keys), m.annotations])  # fmt: skip
        if not sent and corr:
            del self._confirms[corr]
            confirm(Outcome.RELEASED)  # the leader is unreachable: the client may try again

    def attach(self, queue: RemoteQueue, consumer: Consumer, priority: int, stream_filters: Any = None) -> int:
        """`stream_filters`: a replicated stream's reader's filter set (node/vhosts/stream_follower.py),
        sent only then, so only to nodes that know the element."""
        cid = next(self._cids)
        target = queue.target()
        self._consumers[cid] = (queue, consumer, target)
        if queue.type_name == "quorum":
            self.leases.add(cid, consumer.presettled)
        attach = ["attach", cid, queue.vhost, queue.name, priority, consumer.presettled]
        if stream_filters is not None:
            attach = ["sattach", *attach[1:], stream_filters]
        if not self.send(target, attach):
            self._waiting[cid] = [attach]
            self._tasks.spawn(self._attach_when_connected(target, cid),
                              f"attaching consumer {cid} once {target} is reachable")  # fmt: skip
        return cid

    def credit(self, cid: int, delivery_count: int, link_credit: int, drain: bool, echo: bool) -> None:
        """A consumer's FLOW: on to the node serving it, with a lease on top for a quorum
        queue's; what the lease held that the client's credit now allows goes at once."""
        asked, released = self.leases.grant(cid, delivery_count, link_credit, drain)
        if released:
            queue, consumer, _ = self._consumers[cid]
            for message in released:
                consumer.deliver(queue, message)
        self.send_for(cid, ["credit", cid, delivery_count, asked, drain, echo])

    def send_for(self, cid: int, message: list) -> None:
        """A consumer's message, to the node serving it: after its attach, which may wait for the stream."""
        waiting = self._waiting.get(cid)
        if waiting is not None:
            waiting.append(message)
        elif cid in self._consumers:
            self.send(self._consumers[cid][2], message)

    async def _attach_when_connected(self, leader: str, cid: int) -> None:
        loop = self.loop
        deadline = loop.time() + ATTACH_WAIT
        while cid in self._consumers and not self.transport.is_connected(leader) and loop.time() < deadline:
            await asyncio.sleep(0.05)
        backlog = self._waiting.pop(cid, [])
        if cid not in self._consumers:
            return  # detached meanwhile
        for message in backlog:
            if not self.send(leader, message):
                self._unreachable(cid)
                return

    async def counts(self, queue: RemoteQueue, timeout: float) -> tuple[int, int, int] | None:
        """The queue's (ready, unacked, consumers) from its node, or None
        (unreachable, no answer in time, or a node that does not know "count")."""
        return await self.ask(queue, "count", timeout)

    async def ask(self, queue: RemoteQueue, what: str, timeout: float) -> Any:
        """A request ("count", "purge") to the queue's node and its answer, or None."""
        req = next(self._corr)
        answer = self._counting[req] = self.loop.create_future()
        try:
            if not self.send(queue.target(), [what, req, queue.vhost, queue.name]):
                return None
            return await asyncio.wait_for(answer, timeout)
        except TimeoutError:
            return None
        finally:
            self._counting.pop(req, None)

    def detach(self, cid: int) -> None:
        entry = self._consumers.pop(cid, None)
        self.leases.drop(cid)
        if entry is not None and self._waiting.pop(cid, None) is None:
            self.send(entry[2], ["detach", cid])

    def _unreachable(self, cid: int) -> None:
        entry = self._consumers.pop(cid, None)
        self.leases.drop(cid)
        if entry is not None:
            queue, consumer, target = entry
            # Said on our stream to the serving node if it still lives: the stream that ended may
            # be one that node never saw up (its session ended before our accept reached it), so
            # nothing there fails the consumer, and an attach it holds for want of a stream back
            # (answer_gate.py) would check messages out to a link that no longer exists.
            self.send(target, ["detach", cid])
            queue.consumer_lost(consumer, Condition.DETACH_FORCED, _unreachable_text(queue, target))

    # -- incoming ------------------------------------------------------------------------

    def _on_message(self, peer: str, payload: bytes) -> None:
        try:
            messages = proxy_records.decode_message(payload)
        except Exception as e:
            log.warning("dropped a malformed %s message from %s: %s", CHANNEL, peer, e)
            return
        if self._gate.admit(peer, messages):  # else they wait for a stream to answer on (answer_gate.py)
            for message in messages:
                self._handle(peer, message)

    def _handle(self, peer: str, message: list) -> None:
        try:
            handler = self._HANDLERS[message[0]]
        except Exception:
            log.warning("dropped a malformed %s message from %s", CHANNEL, peer)
            return
        try:
            handler(self, peer, *message[1:])
        except Exception:
            log.exception("handling %r from %s failed", message[0], peer)

    # the queue's side

    def _local_queue(self, peer: str, vhost: str, name: str) -> Queue | None:
        vh = self.vhosts.get(vhost)
        queue = vh.queues.get(name) if vh is not None else None
        if queue is None or queue.deleted:
            return None
        if queue.remote and (self.relays is None or not self.relays(peer, queue)):
            return None
        return queue

    def _pub(self, peer: str, vhost: str, name: str, corr: int, payload: bytes, durable: bool, expires_at: Any,
             exchange: str, routing_keys: list, annotations: Any = None) -> None:  # fmt: skip
        queue = self._local_queue(peer, vhost, name)
        if queue is None:
            if corr:
                self.send(peer, ["conf", corr, Outcome.RELEASED.value])
            return
        # a batch's fields come as bytes and a list already (proxy_records.py), an AMQP list's may not
        message = QueueMessage(0, payload if type(payload) is bytes else bytes(payload), durable, expires_at, 0,
                               False, exchange, routing_keys if type(routing_keys) is list else list(routing_keys),
                               annotations=annotations)  # dead-lettered: x-opt-deaths and friends
        confirm = (lambda outcome: self.send(peer, ["conf", corr, outcome.value])) if corr else None
        hold = getattr(queue, "publish_hold", None)  # a quorum queue holding its publishers (quorum_flow.py)
        if confirm is not None and hold is not None:
            confirm = hold.deferring(confirm)  # the peer grants its publisher credit as confirms come back
        queue.publish(message, confirm)

    def _attach(self, peer: str, cid: int, vhost: str, name: str, priority: int, presettled: bool,
                stream_filters: Any = None) -> None:  # fmt: skip
        queue = self._local_queue(peer, vhost, name)
        if queue is None:
            self.send(peer, ["gone", cid, Condition.NOT_FOUND, f"no queue '{name}' in vhost '{vhost}' on this node"])
            return
        earlier = self.served.pop((peer, cid), None)
        if earlier is not None:  # an earlier incarnation of the peer (cids restart at 1), its end not yet seen
            earlier.queue.detach_consumer(earlier)
        consumer = self.served[(peer, cid)] = RemoteConsumer(self, peer, cid, presettled, queue)
        if stream_filters is not None and hasattr(queue, "attach_reader"):
            try:  # a stream relayed on (a StreamProxy) keeps the filter set to send on
                read_spec = getattr(queue, "read_spec", ReadSpec.from_filter_set)
                spec = read_spec(stream_filters, DEFAULT_MAX_LENGTH)
            except QueueArgumentError as e:
                self.served.pop((peer, cid))
                self.send(peer, ["gone", cid, Condition.INVALID_FIELD, str(e)])
                return
            queue.attach_reader(consumer, spec)
            return
        queue.attach_consumer(consumer, priority)

    def _credit(self, peer: str, cid: int, delivery_count: int, credit: int, drain: bool, echo: bool) -> None:
        consumer = self.served.get((peer, cid))
        if consumer is not None:
            consumer.queue.credit(consumer, delivery_count, credit, drain, echo)

    def _settle(self, peer: str, cid: int, seqs: list, kind: str, failed: bool, undeliverable: bool,
                annotations: Any) -> None:  # fmt: skip
        consumer = self.served.get((peer, cid))
        if consumer is not None:
            consumer.queue.settle(consumer, list(seqs), Settlement(kind, failed, undeliverable, annotations))

    def _detach(self, peer: str, cid: int) -> None:
        consumer = self.served.pop((peer, cid), None)
        if consumer is not None:
            consumer.queue.detach_consumer(consumer)

    def _count(self, peer: str, req: int, vhost: str, name: str) -> None:
        queue = self._local_queue(peer, vhost, name)
        if queue is None:
            self.send(peer, ["counts", req, None, 0, 0])
        elif not queue.remote:
            self.send(peer, ["counts", req, queue.message_count, queue.unacked_count, queue.consumer_count])
        else:  # relayed (`relays`): the counts of the node or worker serving it, asked now

            async def answer() -> None:
                await queue.refresh_counts()
                self.send(peer, ["counts", req, queue.message_count, queue.unacked_count, queue.consumer_count])

            self._tasks.spawn(answer(), f"relaying the counts of '{name}' in vhost '{vhost}' to {peer}")

    def _purge(self, peer: str, req: int, vhost: str, name: str) -> None:
        queue = self._local_queue(peer, vhost, name)
        if queue is None:
            self.send(peer, ["purged", req, None])
            return
        purged = queue.purge()
        if not inspect.isawaitable(purged):
            self.send(peer, ["purged", req, purged])
            return

        async def answer() -> None:  # a quorum queue: once its log applied the purge
            try:
                n = await purged
            except Exception:
                log.exception("purging %r for %s failed", name, peer)
                n = None
            self.send(peer, ["purged", req, n])

        self._tasks.spawn(answer(), f"answering {peer}'s purge of '{name}' in vhost '{vhost}'")

    # the client's side

    def _purged(self, peer: str, req: int, messages: int | None) -> None:
        answer = self._counting.get(req)
        if answer is not None and not answer.done():
            answer.set_result(messages)

    def _counts(self, peer: str, req: int, ready: int | None, unacked: int, consumers: int) -> None:
        answer = self._counting.get(req)
        if answer is not None and not answer.done():
            answer.set_result(None if ready is None else (ready, unacked, consumers))

    def _conf(self, peer: str, corr: int, outcome: str) -> None:
        entry = self._confirms.pop(corr, None)
        if entry is not None:
            entry[1](_OUTCOMES.get(outcome, Outcome.RELEASED))

    def _deliver(self, peer: str, cid: int, seq: int, payload: bytes, delivery_count: int, acquired: bool,
                 durable: bool, exchange: str, routing_keys: list, annotations: Any) -> None:  # fmt: skip
        entry = self._consumers.get(cid)
        if entry is not None:  # else detached: the leader returns the message to the queue
            queue, consumer, _ = entry
            message = QueueMessage(seq, payload if type(payload) is bytes else bytes(payload), durable, None,
                                   delivery_count, acquired, exchange,
                                   routing_keys if type(routing_keys) is list else list(routing_keys), annotations)  # fmt: skip
            for m in self.leases.admit(cid, message):  # held if beyond the client's credit (a lease)
                consumer.deliver(queue, m)

    def _flow(self, peer: str, cid: int, delivery_count: int, credit: int, available: int, drain: bool) -> None:
        entry = self._consumers.get(cid)
        if entry is not None:
            entry[1].credit_reply(*self.leases.reply(cid, delivery_count, credit, available, drain), drain)

    def _gone(self, peer: str, cid: int, condition: str, description: str) -> None:
        entry = self._consumers.pop(cid, None)
        self.leases.drop(cid)
        if entry is not None:
            queue, consumer, _ = entry
            queue.consumer_lost(consumer, condition, description)

    _HANDLERS: dict[str, Any] = {
        "pub": _pub, "attach": _attach, "sattach": _attach, "credit": _credit, "settle": _settle, "detach": _detach,
        "conf": _conf, "deliver": _deliver, "flow": _flow, "gone": _gone, "count": _count, "counts": _counts,
        "purge": _purge, "purged": _purged,
    }  # fmt: skip

    # -- a stream to or from a peer ended ------------------------------------------------------

    def _peer_down(self, peer: str) -> None:
        for corr in [c for c, (leader, _) in self._confirms.items() if leader == peer]:
            self._confirms.pop(corr)[1](Outcome.UNKNOWN)
        for cid in [c for c, (_, _, target) in self._consumers.items() if target == peer]:
            self._unreachable(cid)
        self._gate.peer_down(peer)
        # the consumers that came on the stream that ended, or were sent to on it (not those of a
        # newer incarnation of the peer, attached before the older one's end was seen)
        streams = self.streams_with(peer)
        for key in [k for k, c in self.served.items() if k[0] == peer and c.streams != streams]:
            consumer = self.served.pop(key)
            consumer.queue.detach_consumer(consumer)  # its unsettled messages return to the queue

    def queue_stopped(self, queue: Queue) -> None:
        """A local queue was deleted: the remote consumers heard it through queue_deleted."""
        for key in [k for k, c in self.served.items() if c.queue is queue]:
            self.served.pop(key)


def _unreachable_text(queue: RemoteQueue, node: str) -> str:
    return f"queue '{queue.name}' in vhost '{queue.vhost}' is on node {node}, which this node cannot reach"


def end_consumer(consumer: Any, condition: str, description: str) -> None:
    """Detaches a consumer's link with `condition` (resource-deleted: the queue was deleted)."""
    if condition == Condition.RESOURCE_DELETED:
        consumer.queue_deleted()
        return
    unavailable = getattr(consumer, "queue_unavailable", None)
    if unavailable is not None:
        unavailable(description, condition)
    else:
        consumer.queue_deleted()
