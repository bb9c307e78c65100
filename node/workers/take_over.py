"""Where a node's classic queues run when the number of its workers changed between two
starts (issue 36, docs/architecture.md "Workers": placement).

A node runs as many workers as it has usable cores unless told otherwise, so the count can
change between two starts: a CPU quota changed, `--workers` set, a data directory moved to
another machine. Before any worker opens a store, the supervisor (or the node of one process):

- fewer workers: moves each queue placed on a worker the node no longer runs to the remaining
  worker running the fewest queues;
- more workers (a node of one process started with several the first time, or more than the
  last time): moves queues from the workers running the most to those running the fewest
  until no worker runs more than one queue more than another. The first time, the queues
  with messages in the node's store are those it had (worker 0's), and only those are known
  here; the others, with nothing stored, are placed as the metadata starts them (slots.py).

A move copies the queue's keys (messages, index, checkpoint: the process that wrote them
closed the store) into the target's store and syncs them; the new places are written after
every copy; then the stores of workers gone are deleted. A crash part way is harmless: the
next start decides the same moves from the same map and count (queues in name order, ties to
the lowest worker) and a copy replaces what an earlier copy wrote; a copy left in a
worker's store under a queue placed elsewhere is dropped as an orphan once that worker's
metadata is caught up (ClassicStore.drop_orphans), the moved queues' old copies too."""

from __future__ import annotations

import logging
import os
import shutil

from queues.classic import payload_size
from queues.classic.persistence import queue_of_store_key, store_key
from storage.message_store import MessageStore

from .slots import balance, has_places, moves_off, read_places, store_path, write_places, write_synced

__all__ = ["take_over_queues"]

log = logging.getLogger("warren.workers")

COUNT_FILE = "count"  # in data_dir/workers: how many workers the node ran the last time


def take_over_queues(data_dir: str, workers: int) -> list[tuple[str, str, int, int]]:
    """Place the node's classic queues on its `workers` workers (see the module docstring);
    returns (vhost, name, from, to) for each queue moved."""
    places = read_places(data_dir)
    last = _last_count(data_dir, places)
    moves = moves_off(places, {worker for worker in places.values() if worker >= workers}, list(range(workers)))
    placed = {**places, **{(vhost, name): to for vhost, name, _, to in moves}}
    if workers > last:
        if not has_places(data_dir):  # the queues the node had
            placed.update(dict.fromkeys(_stored_by_worker_0(data_dir), 0))
        spread = balance(placed, workers)
        moves += spread
        placed.update({(vhost, name): to for vhost, name, _, to in spread})
    if moves:
        _copy(data_dir, moves)
        write_places(data_dir, placed)
        log.warning("%d queue(s) moved between workers for the %d this node runs now (%d before): %s", len(moves),
                    workers, last, ", ".join(f"{name} {source}->{target}" for _, name, source, target in moves[:20]))  # fmt: skip
    _drop_stores_beyond(data_dir, workers)
    _write_count(data_dir, workers)
    return moves


def _last_count(data_dir: str, places: dict) -> int:
    """How many workers the node ran the last time (a map of an older build: enough for its places)."""
    try:
        with open(os.path.join(data_dir, "workers", COUNT_FILE)) as f:
            return int(f.read())
    except (FileNotFoundError, ValueError):
        return max(places.values(), default=0) + 1


def _write_count(data_dir: str, workers: int) -> None:
    if workers == 1 and not os.path.isdir(os.path.join(data_dir, "workers")):
        return  # a node that never ran several workers: one, as a missing count says
    write_synced(data_dir, COUNT_FILE, str(workers))


def _stored_by_worker_0(data_dir: str) -> list[tuple[str, str]]:
    """The queues with messages in the node's store (worker 0's): those a node of one process had."""
    if not os.path.isdir(store_path(data_dir, 0)):
        return []
    store = MessageStore(store_path(data_dir, 0), size_of=payload_size)
    try:
        return [queue_of_store_key(key) for key in store.indexed_queues()]
    finally:
        store.close()


def _copy(data_dir: str, moves: list[tuple[str, str, int, int]]) -> None:
    stores: dict[int, MessageStore] = {}

    def store(worker: int) -> MessageStore:
        if worker not in stores:
            stores[worker] = MessageStore(store_path(data_dir, worker), size_of=payload_size)
        return stores[worker]

    try:
        for vhost, name, source, target in moves:
            if os.path.isdir(store_path(data_dir, source)):  # a worker that never stored a message has none
                store(target).copy_queue_from(store(source), store_key(vhost, name))
    finally:
        for opened in stores.values():
            opened.close()


def _drop_stores_beyond(data_dir: str, workers: int) -> None:
    directory = os.path.join(data_dir, "workers")
    if not os.path.isdir(directory):
        return
    for entry in os.listdir(directory):
        if entry.isdigit() and int(entry) >= workers:
            shutil.rmtree(os.path.join(directory, entry))
