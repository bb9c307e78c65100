"""Memory and disk alarms. While either is raised no publisher link has
credit (node/client/links.py `Publisher.hold`), so publishers stop, attached,
while consumers go on, as in RabbitMQ 4; credit is granted again when it
clears, on the same links: publishers resume without reconnecting.

Memory: what the node holds (node/ops/memory.py counts it: queues, buffers,
RocksDB, the interpreter's baseline), against `memory_limit`, so the alarm
clears once a backlog drains. Disk: free space on the data directory's
filesystem below `disk_free_limit`, or a store write that failed with ENOSPC
(or EDQUOT) and waits for space (`any_store_full`): the message store's or the
Raft log's (storage/group_commit.py, raft/journal.py; the alarm stays raised
until that write went through) or a stream's (queues/stream/disk.py: until a
check sees room for it).

Alarms are cluster-wide, as in RabbitMQ: an alarm of any member blocks the
publishers of every member. Each node tells the others its own alarms
(node/cluster/alarm_gossip.py); `remote` holds what they told, and a member that
becomes unreachable no longer counts. On a node of several workers
(node/workers/) each worker checks its own memory and disk; worker 0 holds the
others' as `siblings` (they are the node's alarms, which it tells the cluster),
and tells each worker every other alarm in effect, which that worker holds as
`remote`."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from typing import Protocol

import psutil

from node.ops.memory import memory_limit

log = logging.getLogger("warren.alarms")


class Alarms:
    """`memory_used()` is the figure compared with the memory limit (default:
    process RSS); `store_full()` says a store write is waiting for space."""

    def __init__(self, data_dir: str, memory_high_watermark: float, disk_free_limit: int,
                 on_change: Callable[[bool], None], *, memory_used: Callable[[], int] | None = None,
                 store_full: Callable[[], bool] | None = None):  # fmt: skip
        self.memory_high_watermark = memory_high_watermark
        self.memory_limit = memory_limit(memory_high_watermark)
        self.disk_free_limit = disk_free_limit
        self.data_dir = data_dir
        self.on_change = on_change
        self.memory = False
        self.disk = False
        self.memory_used = 0  # at the last check
        self.disk_free: int | None = None  # at the last check
        self.forced: set[str] = set()  # alarms raised by an operator or a test
        self.remote: dict[str, tuple[str, ...]] = {}  # member -> the alarms it reported
        self.siblings: dict[str, tuple[str, ...]] = {}  # worker 0: the node's other workers' own alarms
        self.on_update: Callable[[], None] | None = None  # after each check or change (node/workers/)
        self._memory_used = memory_used or (lambda: psutil.Process().memory_info().rss)
        self._store_full = store_full or (lambda: False)

    @property
    def local_active(self) -> bool:
        return self.memory or self.disk or bool(self.forced) or any(self.siblings.values())

    @property
    def active(self) -> bool:
        return self.local_active or any(self.remote.values())

    def set_remote(self, member: str, alarms: list[str] | tuple[str, ...]) -> None:
        self._set(self.remote, member, alarms)

    def set_sibling(self, worker: str, alarms: list[str] | tuple[str, ...]) -> None:
        """Worker 0: another worker of the node reported its own alarms (none: it is gone)."""
        self._set(self.siblings, worker, alarms)

    def _set(self, table: dict[str, tuple[str, ...]], member: str, alarms: list[str] | tuple[str, ...]) -> None:
        before = self.active
        if alarms:
            table[member] = tuple(alarms)
        else:
            table.pop(member, None)
        self._changed(before)

    def replace_remote(self, remote: dict[str, tuple[str, ...]]) -> None:
        """Worker K: every alarm in effect elsewhere, as worker 0 knows them."""
        before = self.active
        self.remote = {member: tuple(alarms) for member, alarms in remote.items() if alarms}
        self._changed(before)

    def check(self) -> None:
        before = self.active
        # a fraction follows the memory available, which a container's limit can change while the node runs
        self.memory_limit = memory_limit(self.memory_high_watermark)
        self.memory_used = self._memory_used()
        self.memory = self.memory_used > self.memory_limit
        self.disk_free = shutil.disk_usage(self.data_dir).free
        self.disk = self.disk_free < self.disk_free_limit or self._store_full()
        self._changed(before)

    def force(self, name: str, on: bool) -> None:
        before = self.active
        (self.forced.add if on else self.forced.discard)(name)
        self._changed(before)

    def _changed(self, before: bool) -> None:
        if self.active != before:
            log.warning("resource alarm %s (memory=%s: %d of %d bytes; disk=%s: %s free, limit %d; forced=%s"
                        " remote=%s)", "set" if self.active else "cleared", self.memory, self.memory_used,
                        self.memory_limit, self.disk, self.disk_free, self.disk_free_limit, sorted(self.forced),
                        self.remote)  # fmt: skip
            self.on_change(self.active)
        if self.on_update is not None:
            self.on_update()

    def own(self) -> list[str]:
        """This process's own alarms."""
        return (["memory"] if self.memory else []) + (["disk"] if self.disk else []) + sorted(self.forced)

    def describe(self) -> list[str]:
        """This node's own alarms: this process's, and on worker 0 its other workers'."""
        raised = self.own()
        return raised + sorted({a for alarms in self.siblings.values() for a in alarms} - set(raised))

    def raised(self, resource: str) -> bool:
        """Whether this node has the alarm `resource` ("memory", "disk")."""
        return resource in self.describe()

    def cluster_wide(self, this_node: str) -> list[tuple[str, str]]:
        """(node, resource) for every alarm in effect, this node's first."""
        return [(this_node, a) for a in self.describe()] + [
            (member, a) for member, alarms in sorted(self.remote.items()) for a in alarms
        ]


class _Committer(Protocol):
    @property
    def out_of_space(self) -> bool: ...


class _StreamsDisk(Protocol):
    def out_of_space(self, free: int | None) -> bool: ...


def any_store_full(messages: _Committer, raft_log: _Committer | None, streams: _StreamsDisk, free: int | None) -> bool:
    """The disk alarm's second input: a write of the message store, the Raft log (the
    cluster, once started) or a stream failed for want of space and waits for it."""
    streams_full = streams.out_of_space(free)  # asked every check: it clears waits that now fit
    return messages.out_of_space or (raft_log is not None and raft_log.out_of_space) or streams_full
