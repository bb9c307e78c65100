"""A node of several workers as a Prometheus scrape and the HTTP API's overview read it
(issue 36): worker 0's
parts (its queues, alarms, memory, Raft groups, which hold every quorum queue and stream
and, through the queue proxy, every classic queue's counts) with the counters and open
connections of every worker added, so the node's families count the whole node (its
memory and file descriptors too: every worker's summed, as are the memory limits of
their shares); `warren_worker_connections{worker="K"}`, the connections each worker
holds, `warren_worker_resident_memory_bytes{worker}` and
`warren_worker_cpu_seconds_total{worker}`, what each uses; and `warren_workers_lost`,
how many workers stay down until the node restarts (lost_workers.py).

Worker 0 asks the others when Prometheus scrapes (the control link's questions,
metadata_follow.py); each answers `summary()`."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import psutil

from node.ops.metrics import NodeMetrics

from .slots import running

__all__ = ["WorkersView", "resources", "scraped", "summary"]


def resources(alarms: Any) -> dict:
    """This process's memory (resident, and what its memory alarm counts and allows), CPU
    seconds and open file descriptors."""
    process = psutil.Process()
    cpu = process.cpu_times()
    return {"pid": process.pid, "rss": process.memory_info().rss, "memory_used": alarms.memory_used,
            "memory_limit": alarms.memory_limit, "cpu": cpu.user + cpu.system, "fds": process.num_fds()}  # fmt: skip


def summary(index: int, metrics: NodeMetrics, connections: Any, alarms: Any) -> str:
    """What worker `index` answers worker 0's scrape: its counters, its resources, and per
    open connection its vhost, sessions, publishers and consumers."""
    return json.dumps({"worker": index, "metrics": metrics.to_json(), "resources": resources(alarms),
                       "connections": [[c.vhost.name, len(c.engine.sessions), *c.link_counts()]
                                       for c in connections if c.vhost is not None]})  # fmt: skip


class CountedConnection:
    """Another worker's open connection, as far as a scrape counts it."""

    __slots__ = ("vhost", "engine", "_links")

    def __init__(self, vhost: str, sessions: int, publishers: int, consumers: int) -> None:
        self.vhost = SimpleNamespace(name=vhost)  # open: past its OPEN
        self.engine = SimpleNamespace(sessions=dict.fromkeys(range(sessions)))
        self._links = (publishers, consumers)

    def link_counts(self) -> tuple[int, int]:
        return self._links


class WorkersView:
    """Worker 0's node with every worker's counters and connections (see the module docstring)."""

    def __init__(self, node: Any, answers: list[dict]) -> None:
        self._node = node
        self.metrics = node.metrics.plus([a["metrics"] for a in answers])
        others = [CountedConnection(*c) for a in answers for c in a["connections"]]
        self.connections = [*node.connections, *others]
        self.worker_connections = {0: sum(1 for c in node.connections if c.vhost is not None)}
        self.worker_connections.update({a["worker"]: len(a["connections"]) for a in answers})
        self.workers_lost = len(node.node_worker.slots.lost)
        self.worker_resources = {0: resources(node.alarms), **{a["worker"]: a["resources"] for a in answers}}

    def workers_json(self) -> list[dict]:
        """Each worker as `GET /api/nodes` shows it: running (with what it uses), lost (down until
        the node restarts) or down (restarting, or not answering)."""
        slots = self._node.node_worker.slots
        queues = running(slots.places, list(range(slots.workers)))
        out = []
        for worker in range(slots.workers):
            used = self.worker_resources.get(worker)
            state = "running" if used is not None else "lost" if worker in slots.lost else "down"
            shown = {"worker": worker, "state": state, "classic_queues": queues[worker]}
            if used is not None:
                shown.update(pid=used["pid"], connections=self.worker_connections.get(worker, 0), memory=used["rss"],
                             cpu_seconds=round(used["cpu"], 3))  # fmt: skip
            out.append(shown)
        return out

    def total(self, resource: str) -> float:
        """A resource summed over every worker ("rss", "memory_used", "memory_limit", "cpu", "fds")."""
        return sum(r[resource] for r in self.worker_resources.values())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._node, name)


async def scraped(node: Any) -> Any:
    """What a scrape of `node` reads: the node itself, or with several workers a WorkersView."""
    node_worker = getattr(node, "node_worker", None)
    if node_worker is None:
        return node
    return WorkersView(node, await node_worker.scrape())
