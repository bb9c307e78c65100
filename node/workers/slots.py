"""Which worker of this node runs each of its queues (issue 36,
docs/architecture.md "Who owns a queue").

A classic queue this node leads runs on one worker, in that worker's own
message store (RocksDB takes one writer per database); quorum queues and
streams run on worker 0, the node worker, with the node's Raft groups and
stream files. Every other worker of the node reaches a queue it does not run
through the queue proxy over the worker links (transport.py): its
`RemoteQueue` targets the running worker's peer name, `node_id` for worker 0
and `node_id/wK` for worker K.

Worker 0 decides where a new classic queue goes, as the declaration applies
there: an exclusive queue on its owner connection's worker (the owner id
names it, so the queue lives and dies with its connection), any other on the
worker running the fewest. A queue the node already had when it started
without a place, with messages in worker 0's store, stays on worker 0: until
the node's metadata is caught up at start (`caught_up`), such a queue is
worker 0's (one with nothing stored is placed as any new one). A place does
not move while the node runs, but for a lost worker's queues
(lost_workers.py); a node started with fewer or more workers than the last
time moves queues between them first (take_over.py: the queues of a node's
first start with several workers are spread there). The map is
node-local, not replicated (no other
node needs it: they reach the node through worker 0), written by atomic
rename to `data_dir/workers/placement` before the queue starts, and sent to
the other workers ahead of the command that declares it (metadata_follow.py),
so each worker knows a queue's place when its declaration applies there."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from metadata import effects as fx

__all__ = ["Slots", "balance", "has_places", "moves_off", "node_of_peer", "owner_worker", "read_places", "running", "store_path",
           "worker_peer", "write_places", "write_synced"]

FILE = "placement"


def store_path(data_dir: str, worker: int) -> str:
    """Where worker `worker` keeps its classic queues' messages (worker 0: the node's store)."""
    return os.path.join(data_dir, "messages") if worker == 0 else os.path.join(data_dir, "workers", str(worker), "messages")


def read_places(data_dir: str) -> dict[tuple[str, str], int]:
    """The node's map of classic queue (vhost, name) -> worker, as last written."""
    try:
        with open(os.path.join(data_dir, "workers", FILE)) as f:
            return {(vhost, name): int(worker) for vhost, name, worker in json.load(f)}
    except FileNotFoundError:
        return {}


def has_places(data_dir: str) -> bool:
    """Whether the node ever placed a classic queue on a worker (its map was written)."""
    return os.path.exists(os.path.join(data_dir, "workers", FILE))


def write_places(data_dir: str, places: dict[tuple[str, str], int]) -> None:
    """Replace the map on disk, synced, by atomic rename."""
    write_synced(data_dir, FILE, json.dumps([[vhost, name, worker] for (vhost, name), worker in places.items()]))


def write_synced(data_dir: str, name: str, text: str) -> None:
    """Replace `data_dir/workers/name` with `text`, synced, by atomic rename."""
    directory = os.path.join(data_dir, "workers")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    with open(path + ".tmp", "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".tmp", path)


def running(places: dict[tuple[str, str], int], live: list[int]) -> dict[int, int]:
    """How many queues each worker of `live` runs."""
    counts = dict.fromkeys(live, 0)
    for worker in places.values():
        if worker in counts:
            counts[worker] += 1
    return counts


def moves_off(places: dict[tuple[str, str], int], gone: set[int], live: list[int]) -> list[tuple[str, str, int, int]]:
    """(vhost, name, from, to) for each queue placed on a worker in `gone`, to the worker of
    `live` running the fewest queues at the time (queues in name order, ties to the lowest
    worker): the same map always gives the same moves."""
    counts = running(places, live)
    moves = []
    for (vhost, name), worker in sorted(places.items()):
        if worker in gone:
            target = min(live, key=lambda w: (counts[w], w))
            counts[target] += 1
            moves.append((vhost, name, worker, target))
    return moves


def balance(places: dict[tuple[str, str], int], workers: int) -> list[tuple[str, str, int, int]]:
    """(vhost, name, from, to) for the queues to move so that no worker of `workers` runs more
    than one queue more than another: from the worker running the most (the last queue in name
    order) to the one running the fewest, ties to the lowest worker. The same map always
    gives the same moves."""
    running: dict[int, list[tuple[str, str]]] = {worker: [] for worker in range(workers)}
    for queue, worker in sorted(places.items()):
        running.setdefault(worker, []).append(queue)
    moves = []
    while True:
        most = max(range(workers), key=lambda w: (len(running[w]), -w))
        fewest = min(range(workers), key=lambda w: (len(running[w]), w))
        if len(running[most]) - len(running[fewest]) <= 1:
            return moves
        vhost, name = running[most].pop()
        running[fewest].append((vhost, name))
        moves.append((vhost, name, most, fewest))


def worker_peer(node_id: str, worker: int) -> str:
    """Worker `worker`'s name as a peer of the other workers (worker 0 is the node itself)."""
    return node_id if worker == 0 else f"{node_id}/w{worker}"


def node_of_peer(peer: str) -> str:
    """The node a peer name belongs to: `node_id/wK` is worker K of node `node_id`."""
    return peer.partition("/w")[0]


def owner_worker(owner: str | None, node_id: str) -> int | None:
    """The worker of an exclusive queue's owner id ("node/wK/conn-N", or "node/conn-N" on
    worker 0); None for another node's connection or none."""
    if owner is None or not owner.startswith(node_id + "/"):
        return None
    rest = owner[len(node_id) + 1 :]
    if rest.startswith("w") and "/" in rest:
        index = rest[1 : rest.index("/")]
        return int(index) if index.isdigit() else None
    return 0


class Slots:
    """The node's map of classic queue -> worker, as this worker knows it."""

    def __init__(self, workers: int, me: int, node_id: Callable[[], str], data_dir: str | None = None) -> None:
        """`data_dir`: the node's, where worker 0 keeps the map (None on the other workers)."""
        self.workers = workers
        self.me = me
        self._node_id = node_id  # read at each use: it is known once the cluster started
        self._data_dir = data_dir
        self._places: dict[tuple[str, str], int] = {}
        self.caught_up = False  # worker 0: until then a queue without a place is one the node had
        self.lost: set[int] = set()  # worker 0: workers that will not run again (lost_workers.py)
        # worker 0: whether its store holds messages of a queue not started yet (ClassicStore.holds)
        self.stored_here: Callable[[str, str], bool] = lambda _vhost, _name: True
        self.on_placed: Callable[[str, str, int], None] | None = None  # worker 0: tell the others first
        if data_dir is not None:
            self._places = read_places(data_dir)

    # -- reading ------------------------------------------------------------------------

    def elsewhere(self, record: Any) -> str | None:
        """The peer name of the worker of this node its proxy for the queue `record` targets
        (`worker_reaching`); None when that is this worker: it runs the queue, or it is
        worker 0 and the queue is another node's (the cluster's proxy reaches it as before)."""
        worker = self.worker_reaching(record)
        return None if worker == self.me else worker_peer(self._node_id(), worker)

    def worker_reaching(self, record: Any) -> int:
        """The worker of this node through which the queue `record` is reached: the one running
        it, or worker 0, the node's one endpoint in the cluster, for another node's queue."""
        worker = self.worker_running(record)
        return 0 if worker is None else worker

    def worker_running(self, record: Any) -> int | None:
        """The worker of this node that runs the queue `record`; None when no worker of this
        node does (another node's classic queue, a quorum queue or stream without a replica here)."""
        node_id = self._node_id()
        if record.type == "classic":
            return self._places.get((record.vhost, record.name), 0) if record.leader == node_id else None
        if record.leader == node_id or node_id in tuple(getattr(record, "replicas", ()) or ()):
            return 0
        return None

    def snapshot(self) -> list:
        return [[vhost, name, worker] for (vhost, name), worker in self._places.items()]

    def restore(self, places: list) -> None:
        self._places = {(vhost, name): worker for vhost, name, worker in places}

    def placed(self, vhost: str, name: str, worker: int) -> None:
        """A place worker 0 decided (on the other workers)."""
        self._places[(vhost, name)] = worker

    @property
    def places(self) -> dict[tuple[str, str], int]:
        return dict(self._places)

    def moved(self, moves: list[tuple[str, str, int, int]]) -> None:
        """Worker 0: these queues run on their new workers from now on; the map is on disk first."""
        self._places.update({(vhost, name): to for vhost, name, _, to in moves})
        self._write()

    # -- the metadata listener (each worker; only worker 0 decides) --------------------------

    def on_applied(self, _command: Any, _result: Any, effects: tuple, _index: int) -> None:
        changed = False
        for e in effects:
            if isinstance(e, fx.QueueDeclared) and e.type == "classic" and self._data_dir is not None:
                changed |= self._place(e)
            elif isinstance(e, fx.QueueDeleted):
                changed |= self._places.pop((e.vhost, e.name), None) is not None
        if changed and self._data_dir is not None:
            self._write()

    def on_restored(self, state: Any) -> None:
        if self._data_dir is None:
            return  # the snapshot from worker 0 carries its map
        # Places of queues the snapshot lacks stay: the log replayed after it may declare them
        # (a place goes only with its queue's deletion).
        queues = [q for vh in state.vhosts.values() for q in vh.queues.values()]
        if [q for q in queues if q.type == "classic" and self._place(q)]:
            self._write()

    def _place(self, q: Any) -> bool:
        vhost = q.vhost
        if (vhost, q.name) in self._places or q.leader != self._node_id():
            return False
        # Until caught up, a queue without a place is one the node had, its messages in worker 0's
        # store (take_over.py spread those of a node's first start with several workers already).
        caught_up = self.caught_up or not self.stored_here(vhost, q.name)
        worker = owner_worker(q.exclusive_owner, self._node_id()) if caught_up else 0
        if worker is None or worker >= self.workers or worker in self.lost:
            counts = running(self._places, [w for w in range(self.workers) if w not in self.lost])
            worker = min(counts, key=lambda w: (counts[w], w))
        self._places[(vhost, q.name)] = worker
        if self.on_placed is not None:
            self.on_placed(vhost, q.name, worker)
        return True

    def _write(self) -> None:
        assert self._data_dir is not None
        write_places(self._data_dir, self._places)
