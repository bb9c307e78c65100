"""What the memory alarm measures: the bytes the node holds, not its RSS.

Process RSS does not fall after a backlog drains (the allocator keeps freed
pages), so an alarm raised on RSS never cleared (issue 15). Instead the node
counts what it holds, once per alarm check:

- every classic queue's `held_bytes` (bodies in its memory window, page
  copies not yet durable, unsettled deliveries, a per-message overhead, the
  paged tail's positions);
- every quorum replica on this node: bodies kept until their write is
  flushed, and an index entry per message in the machine's state;
- connections: what they hold to send (transport and protocol engine);
- RocksDB: table readers and block cache of the message store and of the
  Raft log (not the memtables: bounded by their settings, 2 x 32 MiB for the
  message store, and freed at a flush RocksDB times, they would keep the
  alarm up after a drain);
- the interpreter's baseline: RSS when the node finished starting (code,
  libraries, threads, empty structures), taken once.

When what the node holds has fallen by more than TRIM_AFTER since its last
peak, `malloc_trim(0)` hands glibc's free pages back to the OS, so RSS
follows the accounting down (a no-op where glibc is not the allocator).

The limit: memory_high_watermark <= 1 is a fraction of the memory the node
may use, the cgroup's limit when it runs in a container that sets one
(v2 memory.max, v1 memory.limit_in_bytes), else the machine's RAM; > 1 is
bytes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import psutil

from node.vhosts.quorum_groups import group_name
from queues.classic import ClassicQueue

if TYPE_CHECKING:
    from node.cluster.cluster import Cluster
    from storage.message_store import MessageStore

log = logging.getLogger("warren.alarms")

QUORUM_INDEX_BYTES = 128  # per message in a quorum queue's machine state (issue 15's measurement)
TRIM_AFTER = 32 * 1024 * 1024
_CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def available_memory(cgroup_files: tuple[str, ...] = _CGROUP_LIMITS) -> tuple[int, str]:
    """(bytes the node may use, where that figure comes from): a cgroup limit
    below the machine's RAM, else the RAM."""
    total = psutil.virtual_memory().total
    for path in cgroup_files:
        try:
            with open(path) as f:
                text = f.read().strip()
        except (FileNotFoundError, PermissionError):  # not this cgroup version; EMFILE and the like propagate
            continue
        if text.isdigit() and 0 < int(text) < total:  # "max" or v1's huge number: no limit
            return int(text), path
    return total, "ram"


def memory_limit(watermark: float) -> int:
    """The alarm's limit in bytes for a memory_high_watermark setting."""
    if watermark > 1:
        return int(watermark)
    return int(watermark * available_memory()[0])


def _load_malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim  # glibc only
    except (OSError, AttributeError, TypeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_malloc_trim = _load_malloc_trim()


def malloc_trim() -> bool:
    """Give the allocator's free pages back to the OS; False where unsupported."""
    if _malloc_trim is None:
        return False
    _malloc_trim(0)
    return True


class QuorumReplicas(Protocol):
    queues: dict[str, Any]  # node/vhosts/quorum_groups.py: this node's replicas by group


class MemoryNode(Protocol):
    """What the account reads of its node at each `held()` (node/broker.py provides it);
    `cluster` is None before the node has started."""

    vhosts: dict[str, Any]  # node/vhosts/vhost.py: each with its queues
    quorum: QuorumReplicas
    connections: set[Any]  # node/client/connection.py: each with buffered_bytes
    store: MessageStore
    cluster: Cluster | None  # its Raft log's store


class MemoryAccount:
    """Sums what the node holds (module docstring)."""

    def __init__(self, node: MemoryNode) -> None:
        self.node = node
        self._process = psutil.Process()
        self.baseline = self._process.memory_info().rss
        self.trims = 0
        self._peak = 0  # highest held() since the last trim

    def set_baseline(self) -> None:
        """RSS now, less what is already accounted: call once the node has started."""
        self.baseline = max(0, self._process.memory_info().rss - self._accounted())

    def held(self) -> int:
        held = self.baseline + self._accounted()
        self._peak = max(self._peak, held)
        if self._peak - held > TRIM_AFTER:
            if malloc_trim():
                self.trims += 1
                log.info("released %d MB since the peak: malloc_trim", (self._peak - held) >> 20)
            self._peak = held
        return held

    def breakdown(self) -> dict[str, int]:
        node = self.node
        return {
            "baseline": self.baseline,
            "classic_queues": sum(q.held_bytes for q in self._classic_queues()),
            "quorum_queues": sum(_quorum_held(q) for q in node.quorum.queues.values()),
            "connections": sum(_write_buffered(c) for c in node.connections),
            "stores": self._store_bytes(),
        }

    def held_by(self, queue: Any) -> int:
        """What one queue holds here (a queue led elsewhere: 0), as `breakdown` counts it."""
        if isinstance(queue, ClassicQueue):
            return queue.held_bytes
        if self.node.quorum.queues.get(group_name(queue.vhost, queue.name)) is queue:
            return _quorum_held(queue)
        return 0

    def _accounted(self) -> int:
        parts = self.breakdown()
        return sum(parts.values()) - parts["baseline"]

    def _classic_queues(self) -> list[Any]:
        return [q for vhost in self.node.vhosts.values() for q in vhost.queues.values()
                if isinstance(q, ClassicQueue)]  # fmt: skip

    def _store_bytes(self) -> int:
        total = 0
        store = self.node.store
        if store is not None and not store.closed:
            total += store.memory_bytes()
        cluster = self.node.cluster
        if cluster is not None and cluster.log is not None:  # the Raft log's store
            total += cluster.log.memory_bytes()
        return total


def _quorum_held(queue: Any) -> int:
    return queue.bodies.held_bytes + (queue.message_count + queue.unacked_count) * QUORUM_INDEX_BYTES


def _write_buffered(conn: Any) -> int:
    try:
        return conn.buffered_bytes  # node/client/connection.py: transport and engine
    except (AttributeError, RuntimeError):  # a transport already closed
        return 0
