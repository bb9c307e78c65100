"""Queues placed on workers a node no longer runs move to the workers it runs (issue 36,
docs/architecture.md "Workers": placement).

A node runs as many workers as it has usable cores unless told otherwise, so the count can
shrink between two starts: a smaller CPU quota, `--workers` lowered, a data directory moved to
a smaller machine. A classic queue placed on a worker the node no longer runs keeps its
messages in that worker's store. Before any worker opens a store, the supervisor (or the node
of one process) copies each such queue's keys into the store of the remaining worker running
the fewest queues, syncs them, writes the new places, and only then deletes the stores of the
workers gone. A crash part way is harmless: the next start decides the same moves from the
same map (queues in name order, the fewest-queues worker first) and a copy overwrites what an
earlier copy wrote; a copy left in a worker's store under a queue placed elsewhere is dropped
as an orphan once that worker's metadata is caught up (ClassicStore.drop_orphans)."""

from __future__ import annotations

import logging
import os
import shutil

from queues.classic import payload_size
from queues.classic.persistence import store_key
from storage.message_store import MessageStore

from .slots import moves_off, read_places, store_path, write_places

__all__ = ["take_over_queues"]

log = logging.getLogger("warren.workers")


def take_over_queues(data_dir: str, workers: int) -> list[tuple[str, str, int, int]]:
    """Move the queues of workers >= `workers` onto the others; returns (vhost, name, from, to)
    for each queue moved."""
    places = read_places(data_dir)
    moves = moves_off(places, {worker for worker in places.values() if worker >= workers}, list(range(workers)))
    if moves:
        _copy(data_dir, moves)
        write_places(data_dir, {**places, **{(vhost, name): to for vhost, name, _, to in moves}})
        log.warning("%d queue(s) of worker(s) %s moved to the %d worker(s) this node runs now", len(moves),
                    ", ".join(str(w) for w in sorted({m[2] for m in moves})), workers)  # fmt: skip
    _drop_stores_beyond(data_dir, workers)
    return moves


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
