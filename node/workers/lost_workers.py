"""A worker the node cannot keep running: its queues go to the others while the node
runs (issue 36, docs/architecture.md "Workers": a worker lost).

The supervisor restarts a worker that exits; one that exits 3 times within 30 s is
lost (supervisor.py): rather than stop the node, the supervisor leaves it down, adds
it to `data_dir/workers/lost` and tells worker 0 (SIGUSR2). Worker 0 then moves each
classic queue placed on the lost worker to the remaining worker running the fewest
(slots.py `moves_off`), in two steps:

1. `["adopt", target, lost, [[vhost, name], ...]]` (a question on the control link):
   the target copies each queue's messages and index from the lost worker's store into
   its own, synced (ClassicStore.adopt: read-only, since no process writes that store
   any longer), and does not serve it yet;
2. worker 0 writes the new map, then tells every worker `["moved", vhost, name, target]`:
   the target starts the queue from its store (rebuilt from the index, as after a
   crash), the others' proxies reach it there.

A crash between the steps is harmless: until the map is written the queue is the lost
worker's (its store untouched), and a restarted worker 0 decides the same moves again
(a copy replaces what an earlier one wrote); once it is written, the queue is the target's. A
lost worker stays down until the node restarts; its store's copies of the queues moved
are then orphans, dropped as it starts (ClassicStore.drop_orphans). Worker 0 is never
lost: a worker 0 that cannot run stops the node (exit 70), as a node crash does."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from typing import Any, Protocol

from node.tasks import BackgroundTasks
from queues.classic.persistence import store_key

from .slots import Slots, moves_off, store_path
from .supervisor import lost_path

__all__ = ["LostWorkers", "adopt", "moved", "read_lost"]

log = logging.getLogger("warren.workers")

ADOPT_TIMEOUT = 3600.0  # seconds: a copy of a long backlog; a target that dies answers none at once
RETRY = (1.0, 60.0)  # seconds before a pass that left queues behind is tried again, doubling up to the second


def read_lost(data_dir: str) -> set[int]:
    try:
        with open(lost_path(data_dir)) as f:
            return {int(worker) for worker in json.load(f)}
    except FileNotFoundError:
        return set()


class _Node(Protocol):
    """What a worker's adopting and moving use of its node (worker K's, or worker 0's)."""

    classic: Any  # node/vhosts/classic_store.py
    local_queues: Any  # node/vhosts/local_queues.py


async def adopt(node: _Node, data_dir: str, lost: int, queues: list) -> str:
    """Step 1 on the target: copy the queues' stored messages from the lost worker's store;
    the [vhost, name] of those copied, as JSON (a queue whose copy failed is left out)."""
    directory = store_path(data_dir, lost)
    copied = []
    for vhost, name in queues:
        try:
            if os.path.isdir(directory):  # a worker that never stored a message has no store
                await node.classic.adopt(directory, store_key(vhost, name))
        except Exception:
            log.exception("copying queue '%s' in vhost '%s' from lost worker %d failed", name, vhost, lost)
        else:
            copied.append([vhost, name])
    return json.dumps(copied)


def moved(node: _Node, slots: Slots, vhost: str, name: str, worker: int) -> None:
    """Step 2 on every worker: the queue runs on `worker` from now on."""
    slots.placed(vhost, name, worker)
    node.local_queues.moved(vhost, name)


class LostWorkers:
    """Worker 0's side: which workers are lost, and their queues moved to the others."""

    def __init__(self, node: _Node, data_dir: str, slots: Slots, feed: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._node = node
        self._data_dir = data_dir
        self._slots = slots
        self._feed = feed  # metadata_follow.py MetadataFeed: ask one worker, tell them all
        self._tasks = BackgroundTasks(loop, log)
        self._busy = False  # a pass is running
        self._again = False  # the list changed during that pass

    def check(self) -> None:
        """The supervisor's list may have grown (at start, and on its SIGUSR2): move what is placed
        on a lost worker. One pass at a time; a pass finds what an earlier one left."""
        self._slots.lost = read_lost(self._data_dir)
        if not self._slots.lost:
            return
        self._again = self._busy
        if not self._busy:
            self._busy = True
            self._tasks.spawn(self._passes(), "moving a lost worker's queues")

    def close(self) -> None:
        self._tasks.cancel()

    async def _passes(self) -> None:
        """Passes until nothing placed on a lost worker is left: a target not connected yet (a
        worker 0 restarted mid-move asks before the others are back) is asked again later."""
        wait = RETRY[0]
        try:
            while await self._take_over() or self._again:
                if not self._again:
                    await asyncio.sleep(wait)
                    wait = min(wait * 2, RETRY[1])
                self._again = False
        finally:
            self._busy = False

    async def _take_over(self) -> int:
        """One pass; how many queues it could not move."""
        slots = self._slots
        live = [w for w in range(slots.workers) if w not in slots.lost]
        moves = moves_off(slots.places, slots.lost, live)
        by_target: dict[tuple[int, int], list] = {}
        for vhost, name, source, target in moves:
            by_target.setdefault((target, source), []).append([vhost, name])
        done = []
        for (target, source), queues in by_target.items():
            if target == 0:
                answer = await adopt(self._node, self._data_dir, source, queues)
            else:
                answers = await self._feed.ask(["adopt", target, source, queues], ADOPT_TIMEOUT)
                answer = next((a for a in answers if a is not None), "[]")
            copied = {tuple(q) for q in json.loads(answer)}
            done += [(v, n, s, t) for v, n, s, t in moves if t == target and s == source and (v, n) in copied]
        if len(done) < len(moves):
            log.warning("%d of the %d queue(s) of lost worker(s) %s could not be moved yet", len(moves) - len(done),
                        len(moves), sorted(slots.lost))  # fmt: skip
        if not done:
            return len(moves)
        slots.moved(done)  # on disk before any worker serves a queue from its new place
        for vhost, name, _, target in done:
            self._feed.notify(["moved", vhost, name, target])
            moved(self._node, slots, vhost, name, target)
        log.warning("%d queue(s) of lost worker(s) %s moved to workers %s", len(done), sorted(slots.lost),
                    sorted({m[3] for m in done}))  # fmt: skip
        return len(moves) - len(done)
