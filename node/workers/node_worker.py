"""Worker 0's part in a node with several workers (issue 36): it is the node
as the cluster knows it (node/broker.py, unchanged otherwise), and besides:

- decides which worker runs each new classic queue (slots.py) and keeps the map;
- feeds its metadata to the other workers and commits their proposals
  (metadata_follow.py), the snapshot carrying the node's id and the map;
- listens for the other workers' links (transport.py) and routes the queue
  proxy's and Direct Reply-To's traffic to them (peers.py), relaying the
  queue proxy between them and the other nodes of the cluster;
- asks the other workers for what the HTTP API shows of them (their
  connections, sessions and consumers) and passes on what it does to them
  (closing a connection), questions.py;
- moves the classic queues of a worker the supervisor gave up on to the others
  (lost_workers.py);
- shares the workers' resource alarms (alarms.py)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from typing import Any

from metadata.machine import MetadataMachine

from .alarms import NodeAlarms
from .control import address
from .lost_workers import LostWorkers
from .metadata_follow import MetadataFeed
from .peers import RoutedTransport, WorkerPeers
from .process import WORKER_ENV
from .slots import Slots
from .supervisor import LOST, READY
from .transport import WorkerTransport

__all__ = ["NodeWorker"]

log = logging.getLogger("warren.workers")

SNAPSHOT_ASK_TIMEOUT = 1.0  # seconds: a late worker's last part is used rather than the record delayed


class NodeWorker:
    def __init__(self, data_dir: str, workers: int, machine: MetadataMachine, node_id: Any) -> None:
        """Subscribe before anything that starts queues: a queue's place is known when it starts.
        `node_id()` is the node's id (known once its cluster started)."""
        self.data_dir = data_dir
        self.workers = workers
        self.slots = Slots(workers, 0, node_id, data_dir)
        self._machine = machine
        machine.subscribe(self.slots.on_applied, self.slots.on_restored)
        self.feed: MetadataFeed | None = None
        self.transport: WorkerTransport | None = None
        self.peers: WorkerPeers | None = None
        self._workers = "\0"  # the other workers' peer names start so (known at start)
        self._snapshot_parts: dict[int, dict] = {}  # worker -> its last part of the node's snapshot
        self.lost: LostWorkers | None = None
        self.alarms: NodeAlarms | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self, loop: asyncio.AbstractEventLoop, cluster: Any, node: Any) -> WorkerPeers:
        """Serve the other workers; returns the cluster as the queue proxy and Direct Reply-To see it.
        `node`: the node (node/broker.py) whose store and queues a lost worker's queues join."""
        node_id = cluster.node_id
        self._loop = loop
        self.alarms = alarms = NodeAlarms(node.alarms, node_id)
        self.feed = MetadataFeed(loop, self._machine, cluster.propose,
                                 lambda: {"node_id": node_id, "places": self.slots.snapshot(),
                                          "alarms": alarms.picture()},
                                 on_item=self._worker_said, on_lost=alarms.on_lost)  # fmt: skip
        alarms.feed = self.feed
        self.slots.on_placed = lambda vhost, name, worker: self.feed.notify(["placed", vhost, name, worker])
        self.lost = LostWorkers(node, self.data_dir, self.slots, self.feed, loop)
        self.transport = WorkerTransport(loop, node_id, address(self.data_dir, "worker-0"), lambda peer: None)
        self.transport.on_node_message = lambda peer, channel, payload: cluster.rpc.channels[channel](peer, payload)
        await self.transport.start()
        self._workers = workers = node_id + "/w"
        routed = RoutedTransport(cluster.transport, self.transport, lambda peer: peer.startswith(workers))
        self.peers = WorkerPeers(node_id, 0, self.workers, routed, cluster.rpc.channels, cluster)
        return self.peers

    def _worker_said(self, link: Any, item: list) -> None:
        if not self.alarms.on_item(link, item):
            log.warning("a worker sent an unknown control item %r; ignored", item[0])

    def relays(self, peer: str, queue: Any) -> bool:
        """Whether this node's queue service serves `peer` the proxied `queue`: the node's
        one cluster endpoint relays between its other workers and the other nodes (a worker's
        link to another node's queue, another node's link to a worker's queue)."""
        return peer.startswith(self._workers) or queue.via is not None

    async def serve_followers(self) -> None:
        """Let the other workers follow, once this node's metadata is caught up: a worker
        starting drops the stored messages of queues its first snapshot does not place on it."""
        self.slots.caught_up = True  # from now on a queue without a place is a new one
        await self.feed.serve(address(self.data_dir, "control"))
        if os.environ.get(WORKER_ENV) == "0":  # under the supervisor (supervisor.py)
            self._loop.add_signal_handler(LOST, self._lost_signalled)
            self._lost_signalled()  # a worker lost while this one restarted
            os.kill(os.getppid(), READY)  # it starts the others now

    def _lost_signalled(self) -> None:
        self.lost.check()
        for worker in self.slots.lost:  # its last part would show its queues where they no longer are
            self._snapshot_parts.pop(worker, None)

    def worker_of(self, vhost: str, name: str) -> int | None:
        """The worker of this node that runs the queue; None when none does (another node's)."""
        declared = self._machine.state.vhosts.get(vhost)
        record = declared.queues.get(name) if declared is not None else None
        return None if record is None else self.slots.worker_running(record)

    async def gathered(self, question: list, timeout: float = 5.0) -> list:
        """The other workers' answers to `question` (questions.py), decoded; none from a worker
        that had none or did not answer within `timeout` seconds."""
        answers = await self.feed.ask(question, timeout) if self.feed is not None else []
        return [json.loads(answer) for answer in answers if answer is not None]

    async def connections(self) -> list[dict]:
        """The other workers' open connections, as the HTTP API shows them (with their `worker`)."""
        return [conn for answer in await self.gathered(["connections"]) for conn in answer]

    async def consumers(self, vhosts: set[str]) -> list[dict]:
        """The consumers of the other workers' connections in these vhosts, as the API shows them."""
        return [c for answer in await self.gathered(["consumers", sorted(vhosts)]) for c in answer]

    async def sessions(self, name: str) -> dict | None:
        """{"user", "sessions"} of another worker's connection `name`; None when none has it."""
        return next(iter(await self.gathered(["sessions", name])), None)

    def listening(self, on: bool) -> None:
        """Maintenance mode (node/cluster/maintenance.py) for the other workers: off, they stop
        taking AMQP connections and close theirs, as worker 0 does; on, they listen again."""
        if self.feed is not None:
            self.feed.notify(["listening", on])

    async def scrape(self) -> list[dict]:
        """The other workers' counters and open connections (scrape.py's `summary`)."""
        return await self.gathered(["scrape"])

    async def refresh_snapshot_parts(self) -> None:
        """Ask the others for their part of the node's snapshot record (their connections'
        counts and their queues' records); one that does not answer in time keeps its last."""
        for part in await self.gathered(["snapshot"], timeout=SNAPSHOT_ASK_TIMEOUT):
            self._snapshot_parts[part["worker"]] = part

    @property
    def snapshot_parts(self) -> list[dict]:
        return list(self._snapshot_parts.values())

    async def close_connection(self, name: str, reason: str) -> bool:
        """Close the connection `name` on the worker that has it; False when none has it."""
        return any(await self.gathered(["close", name, reason]))

    async def close(self) -> None:
        if self.lost is not None:
            self.lost.close()
        if self.feed is not None:
            self.feed.close()
        if self.transport is not None:
            await self.transport.close()
