"""Cluster-state snapshots, the node's side: one JSON line per node per period, for the audit.

Every `interval` seconds a node appends one record of what it sees (its Raft
groups, who it reaches, its queues and their counters) to
`<data_dir>/snapshots/snapshots-<n>.ndjson`. The files of every node, copied
or mounted side by side, are what the Spark jobs of `audit/` read
(docs/audit.md). The record layout, its validation and reading live in
audit/schema.py; docs/snapshot-schema.md describes every field.

    writer = SnapshotWriter(data_dir, lambda: collect(node), interval=5.0)
    await writer.start()        # one record now, then one per interval
    ...
    await writer.stop()

`collect(node)` builds a record from a started node (a SnapshotSource); it
only reads, and never blocks.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from audit.schema import COUNTERS, SCHEMA_VERSION, SNAPSHOT_DIR, SNAPSHOT_FILE_NAME, snapshot_files
from node import __version__
from queues.quorum.machine import overview as quorum_overview

if TYPE_CHECKING:
    from metadata.feature_flags import FeatureFlagRegistry
    from metadata.machine import MetadataMachine
    from node.cluster.cluster import Cluster
    from node.config import Config
    from node.ops.alarms import Alarms
    from node.vhosts.vhost import VHost
    from queues.base import Queue

log = logging.getLogger("warren.snapshots")

# ---------------------------------------------------------------------------------------- collect


def group_record(status: Mapping[str, Any], name: str | None = None) -> dict:
    """A `groups[]` entry from a status dict shaped like `Cluster.status()` (node/cluster/cluster.py):
    node, group, role, term, leader, commit_index, last_applied, and members as a list of
    {"node": id, "reachable": bool}."""
    me = status["node"]
    members = [str(m["node"]) for m in status["members"]]
    reachable = [str(m["node"]) for m in status["members"] if m["reachable"] and m["node"] != me]
    leader = status["leader"]
    return {
        "name": str(name or status["group"]),
        "role": str(status["role"]),
        "term": status["term"],
        "leader": None if leader is None else str(leader),
        "commit_index": status["commit_index"],
        "last_applied": status["last_applied"],
        "members": members,
        "reachable": reachable,
    }


def queue_record(queue: Queue, leader: bool = True, group: str | None = None) -> dict:
    """A `queues[]` entry for a classic or a quorum queue.

    A classic queue counts in `queue.stats`; a quorum queue in its replicated
    state, whose overview (queues/quorum/machine.py) also gives a depth that
    holds the messages waiting for their dead-letter settlement. The quorum
    counters count `enqueued` (accepted) rather than `published`: published =
    enqueued + rejected. Counters a queue type does not keep are 0."""
    unacked = queue.unacked_count
    if queue.type_name == "quorum":
        ov = quorum_overview(queue.state)
        depth, kept = ov["depth"], ov["counters"]
    else:
        depth, kept = queue.message_count + unacked, dataclasses.asdict(queue.stats)
    counters = {c: kept.get(c, 0) for c in COUNTERS}
    if "published" not in kept:
        counters["published"] = kept["enqueued"] + kept["rejected"]
    return {
        "vhost": queue.vhost,
        "name": queue.name,
        "type": queue.type_name,
        "durable": queue.durable,
        "leader": leader,
        "group": group,
        "depth": max(depth, unacked),
        "unacked": unacked,
        "consumers": queue.consumer_count,
        "counters": counters,
    }


class SnapshotSource(Protocol):
    """What `collect` reads of the node (node/broker.py provides it); `cluster` is None before it starts."""

    config: Config
    cluster: Cluster | None
    connections: set[Any]  # node/client/connection.py: each with its engine's sessions
    vhosts: dict[str, VHost]
    feature_flags: FeatureFlagRegistry  # this node's
    metadata_machine: MetadataMachine  # the cluster's enabled flags
    alarms: Alarms


def _feature_flags(node: SnapshotSource) -> dict:
    return {
        "supported": list(node.feature_flags.supported()),
        "enabled": list(node.metadata_machine.state.feature_flags),
    }


def raft_group_status(cluster: Cluster, name: str, members: Iterable[str]) -> dict | None:
    """A Cluster.status()-shaped dict for any Raft group `cluster` hosts (a quorum
    queue's), from the group's typed status (raft/status.py); None when the group
    is not open here."""
    g = cluster.groups.get(name)
    if g is None:
        return None
    st = g.status()
    me = cluster.node_id
    return {"node": me, "group": name, "role": st.role.value, "term": st.term, "leader": st.leader,
            "commit_index": st.commit_index, "last_applied": st.last_applied,
            "members": [{"node": m, "reachable": m != me and cluster.is_reachable(m)} for m in members]}  # fmt: skip


def _queue_group(cluster: Cluster | None, queue: Queue) -> tuple[bool, str | None, dict | None]:
    """(leader, group name, group record) for a queue. A quorum queue leads when its
    Raft group says so; a classic queue is its node's own."""
    if queue.type_name != "quorum":
        return True, None, None
    name = queue.group
    st = raft_group_status(cluster, name, queue.members) if cluster is not None else None
    if st is None:
        return False, name, None
    g = group_record(st, name)
    return g["role"] == "leader", name, g


def client_counts(connections: Iterable[Any]) -> tuple[int, int, int]:
    """(connections, sessions, links) of these client connections."""
    conns = sessions = links = 0
    for conn in list(connections):
        conns += 1
        for s in list(conn.engine.sessions.values()):
            sessions += 1
            links += len(s.links)
    return conns, sessions, links


def queue_records(vhosts: Iterable[VHost], cluster: Cluster | None, worker: int | None = None) -> tuple[list, list]:
    """(queues[], the quorum queues' groups[]) of the queues these vhosts host here; each queue
    names its `worker` on a node of several workers."""
    queues, groups = [], []
    for vhost in list(vhosts):
        for queue in list(vhost.queues.values()):
            if queue.deleted or queue.remote:
                continue  # a RemoteQueue is the proxy of a queue another node (or worker) hosts
            leader, gname, grec = _queue_group(cluster, queue)
            record = queue_record(queue, leader, gname)
            queues.append(record if worker is None else record | {"worker": worker})
            if grec is not None:
                groups.append(grec)
    return queues, groups


def collect(node: SnapshotSource, now_ms: int | None = None, mono_ms: int | None = None,
            workers: list[dict] | None = None) -> dict:  # fmt: skip
    """A snapshot record of a started `node` (node/broker.py) as it is now.
    `boot_id`, `seq` and `interval_ms` are left to the SnapshotWriter. `workers`: on a node of
    several workers, what the others last said of theirs (node/workers/questions.py
    "snapshot"), counted as the node's."""
    cluster = node.cluster
    groups = []
    if cluster is not None:
        status = cluster.status()
        if status["role"] != "stopped":
            groups.append(group_record(status))
    connections, sessions, links = client_counts(node.connections)
    queues, queue_groups = queue_records(node.vhosts.values(), cluster, None if workers is None else 0)
    groups += queue_groups
    for part in workers or ():
        connections, sessions, links = connections + part["connections"], sessions + part["sessions"], links + part["links"]
        queues += part["queues"]
    seen: set[str] = set()
    groups = [g for g in groups if not (g["name"] in seen or seen.add(g["name"]))]  # once each
    wall = int(time.time() * 1000) if now_ms is None else now_ms
    return {
        "schema_version": SCHEMA_VERSION,
        "node": node.config.node_name,
        "member_id": None if cluster is None else cluster.node_id,
        "wall_ms": wall,
        "mono_ms": int(time.monotonic() * 1000) if mono_ms is None else mono_ms,
        "version": __version__,
        "feature_flags": _feature_flags(node),
        "groups": groups,
        "connections": connections,
        "sessions": sessions,
        "links": links,
        "queues": queues,
        "alarms": node.alarms.describe(),
    }


# ---------------------------------------------------------------------------------------- writer

@dataclass
class SnapshotWriter:
    """Appends `source()` to `<data_dir>/snapshots/snapshots-<n>.ndjson` every `interval`
    seconds. A new file is begun at every start and whenever the current one would pass
    `max_bytes`; beyond `keep_files` files the oldest are deleted. Each line is flushed
    to the OS as written (fsync only when a file is closed: a crash of the machine may
    lose the last lines, which the audit tolerates). A record `source` fails to build
    is logged and skipped; a write error (disk full) too, and the file is reopened."""

    data_dir: str
    source: Callable[[], dict]
    prepare: Callable[[], Awaitable[None]] | None = None  # awaited before each record is built
    interval: float = 5.0
    max_bytes: int = 16 * 1024 * 1024
    keep_files: int = 8
    directory: str = field(init=False)
    boot_id: str = field(init=False)
    seq: int = field(init=False, default=0)
    written: int = field(init=False, default=0)  # records
    _file: Any = field(init=False, default=None, repr=False)
    _index: int = field(init=False, default=0)
    _size: int = field(init=False, default=0)
    _task: asyncio.Task | None = field(init=False, default=None, repr=False)
    _failures: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        if self.interval <= 0:
            raise ValueError("interval must be positive")
        if self.keep_files < 1 or self.max_bytes < 1:
            raise ValueError("keep_files and max_bytes must be at least 1")
        self.directory = os.path.join(self.data_dir, SNAPSHOT_DIR)
        self.boot_id = uuid.uuid4().hex

    # -- lifecycle

    async def start(self) -> None:
        """Writes one record now, then one every `interval` until `stop()`."""
        if self._task is not None:
            return
        self._open_next()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="snapshot-writer")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._close()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            if self.prepare is not None:
                try:
                    await self.prepare()
                except Exception:  # the record is still written, with what the node has
                    self._failed("preparing a snapshot record failed")
            self.tick()
            due += self.interval
            now = loop.time()
            if due < now:  # the loop was stalled: skip the periods missed, keep the phase
                due += ((now - due) // self.interval + 1) * self.interval
            await asyncio.sleep(due - now)

    def tick(self) -> bool:
        """Builds and appends one record now; False when it could not."""
        try:
            record = self.source()
        except Exception:
            self._failed("building a snapshot record failed")
            return False
        try:
            self.append(record)
        except OSError:
            self._failed(f"writing a snapshot record to {self.directory} failed")
            self._close()
            return False
        self._failures = 0
        return True

    def _failed(self, what: str) -> None:
        self._failures += 1
        if self._failures == 1 or self._failures % 100 == 0:  # not once per period for ever
            log.exception("%s (%d in a row)", what, self._failures)

    # -- writing

    def append(self, record: dict) -> None:
        """Stamps `record` (schema_version, boot_id, seq, interval_ms, wall_ms, mono_ms
        where absent) and appends it as one line, rotating first when it would not fit."""
        record.setdefault("schema_version", SCHEMA_VERSION)
        record.setdefault("boot_id", self.boot_id)
        record.setdefault("seq", self.seq)
        record.setdefault("interval_ms", int(round(self.interval * 1000)))
        record.setdefault("wall_ms", int(time.time() * 1000))
        record.setdefault("mono_ms", int(time.monotonic() * 1000))
        line = (json.dumps(record, separators=(",", ":"), default=str) + "\n").encode()
        if self._file is None:
            self._open_next()
        elif self._size and self._size + len(line) > self.max_bytes:
            self._open_next()
        self._file.write(line)
        self._file.flush()
        self._size += len(line)
        self.seq += 1
        self.written += 1

    def _open_next(self) -> None:
        self._close()
        os.makedirs(self.directory, exist_ok=True)
        existing = snapshot_files(self.directory)
        last = int(SNAPSHOT_FILE_NAME.match(os.path.basename(existing[-1])).group(1)) if existing else 0
        self._index = max(last, self._index) + 1
        path = os.path.join(self.directory, f"snapshots-{self._index}.ndjson")
        self._file = open(path, "ab")  # noqa: SIM115 (kept open across periods)
        self._size = self._file.tell()
        for old in snapshot_files(self.directory)[: -self.keep_files]:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(old)

    def _close(self) -> None:
        f, self._file = self._file, None
        if f is not None:
            with contextlib.suppress(OSError):
                f.flush()
                os.fsync(f.fileno())
            with contextlib.suppress(OSError):
                f.close()

    @property
    def current_path(self) -> str | None:
        return None if self._file is None else self._file.name
