"""Cluster-state snapshots, the node's side: one JSON line per node per period, for the audit.

Every `interval` seconds a node appends one record of what it sees (its Raft
groups, who it reaches, its queues and their counters) to
`<data_dir>/snapshots/snapshots-<n>.ndjson`. The files of every node, copied
or mounted side by side, are what the Spark jobs of `audit/` read
(docs/audit.md). The record layout, its validation and reading live in
audit/schema.py; docs/snapshot-schema.md describes every field.

    writer = SnapshotWriter(data_dir, lambda: collect(broker), interval=5.0)
    await writer.start()        # one record now, then one per interval
    ...
    await writer.stop()

`collect(broker)` builds a record from a running Broker; it only reads
attributes and never blocks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from audit.schema import COUNTERS, SCHEMA_VERSION, SNAPSHOT_DIR, SNAPSHOT_FILE_NAME, snapshot_files

log = logging.getLogger("warren.snapshots")

# ---------------------------------------------------------------------------------------- collect


def _int(value: Any) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


def _int_or_none(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def group_record(status: Mapping[str, Any], name: str | None = None) -> dict:
    """A `groups[]` entry from a status dict shaped like node/cluster/cluster.py `Cluster.status()`:
    node, group, role, term, leader, commit_index, last_applied, and members as a list of
    {"node": id, "reachable": bool} (or of plain ids, with `reachable` a list of ids)."""
    me = status.get("node")
    members: list[str] = []
    reachable: list[str] = []
    raw_reach = status.get("reachable")
    for m in status.get("members") or []:
        if isinstance(m, Mapping):
            mid = str(m.get("node"))
            members.append(mid)
            if m.get("reachable") and mid != me:
                reachable.append(mid)
        else:
            members.append(str(m))
    if isinstance(raw_reach, list):  # the plain form
        reachable = [str(r) for r in raw_reach if r != me]
    leader = status.get("leader")
    return {
        "name": str(name or status.get("group") or "metadata"),
        "role": str(status.get("role") or "unknown"),
        "term": _int_or_none(status.get("term")),
        "leader": None if leader is None else str(leader),
        "commit_index": _int_or_none(status.get("commit_index")),
        "last_applied": _int_or_none(status.get("last_applied")),
        "members": members,
        "reachable": reachable,
    }


def _counter_source(queue: Any) -> Any:
    src = getattr(queue, "counters", None)
    if src is None:
        src = getattr(queue, "stats", None)  # ClassicQueue
    if src is None:
        src = getattr(getattr(queue, "state", None), "counters", None)  # QuorumQueue's replicated state
    if src is not None and not isinstance(src, Mapping) and hasattr(src, "as_dict"):
        src = src.as_dict()
    return src


def _overview(queue: Any) -> Mapping | None:
    """`queue.overview()` when the queue has it; for a quorum queue, queues/quorum's
    overview of its replicated state (depth, checked_out, counters)."""
    with contextlib.suppress(Exception):
        fn = getattr(queue, "overview", None)
        if callable(fn):
            return fn()
        if getattr(queue, "type_name", "") == "quorum" and getattr(queue, "state", None) is not None:
            from queues.quorum import overview

            return overview(queue.state)
    return None


def queue_record(queue: Any, leader: bool = True, group: str | None = None) -> dict:
    """A `queues[]` entry from a queue object (queues/base.py). Counters come from
    `queue.counters` (a dict or an object), else `queue.stats` (classic), else
    `queue.state.counters` (quorum), zeros where absent; a source that counts
    `enqueued` (accepted) instead of `published` gets published = enqueued + rejected.
    The depth is `queue.depth` when the queue has one, else ready + unacked."""
    ready = _int(getattr(queue, "message_count", 0))
    unacked = _int(getattr(queue, "unacked_count", 0))
    depth = getattr(queue, "depth", None)
    depth = _int(depth) if isinstance(depth, int) and not isinstance(depth, bool) else ready + unacked
    src = _counter_source(queue)
    ov = _overview(queue)
    if ov:  # a quorum queue also holds the messages waiting for their dead-letter settlement
        depth, unacked = _int(ov.get("depth", depth)), _int(ov.get("checked_out", unacked))
        src = ov.get("counters", src)

    def get(name: str) -> Any:
        return src.get(name) if isinstance(src, Mapping) else getattr(src, name, None)

    counters = {c: _int(get(c)) for c in COUNTERS}
    if get("published") is None and get("enqueued") is not None:
        counters["published"] = _int(get("enqueued")) + counters["rejected"]
    return {
        "vhost": str(getattr(queue, "vhost", "/")),
        "name": str(getattr(queue, "name", "")),
        "type": str(getattr(queue, "type_name", "") or "classic"),
        "durable": bool(getattr(queue, "durable", False)),
        "leader": bool(leader),
        "group": group,
        "depth": max(depth, unacked),
        "unacked": unacked,
        "consumers": _int(getattr(queue, "consumer_count", 0)),
        "counters": counters,
    }


def _flag_names(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, Mapping):
        value = value.keys()
    names = []
    for v in value:
        names.append(str(v if isinstance(v, str) else getattr(v, "name", v)))
    return sorted(set(names))


def _feature_flags(broker: Any) -> dict:
    registry = getattr(broker, "feature_flags", None)
    supported: list[str] = []
    with contextlib.suppress(Exception):
        sup = registry.supported() if hasattr(registry, "supported") else registry
        supported = _flag_names(sup)
    enabled: list[str] = []
    with contextlib.suppress(Exception):
        machine = getattr(broker, "metadata_machine", None) or broker.cluster_machine.metadata
        enabled = _flag_names(machine.state.feature_flags)
    return {"supported": supported, "enabled": enabled}


def _groups(broker: Any) -> list[dict]:
    out = []
    cluster = getattr(broker, "cluster", None)
    if cluster is not None:
        statuses: Any = None
        with contextlib.suppress(Exception):
            statuses = cluster.statuses() if hasattr(cluster, "statuses") else [cluster.status()]
        for st in statuses or []:
            with contextlib.suppress(Exception):
                if st is not None and st.get("role") != "stopped":
                    out.append(group_record(st))
    return out


def raft_group_status(cluster: Any, name: str, members: Any) -> dict | None:
    """A Cluster.status()-shaped dict for any Raft group `cluster` hosts (a quorum
    queue's), from the group's `status()` (raft/status.py GroupStatus); None when
    the group is not open here."""
    g = (getattr(cluster, "groups", None) or {}).get(name)
    if g is None:
        return None
    st = g.status()
    me = getattr(cluster, "node_id", None)
    reach = getattr(cluster, "is_reachable", lambda m: False)
    return {"node": me, "group": name, "role": st.role.value, "term": st.term, "leader": st.leader,
            "commit_index": st.commit_index, "last_applied": st.last_applied,
            "members": [{"node": m, "reachable": m != me and reach(m)} for m in members or ()]}  # fmt: skip


def _queue_group(broker: Any, queue: Any) -> tuple[bool, str | None, dict | None]:
    """(leader, group name, group record) for a queue. A queue with a Raft group (a
    quorum queue: `queue.group` names it) leads when its group says so; any other
    queue is its node's own. `queue.raft_status()`, when a queue has it, gives the
    group's status directly."""
    name = getattr(queue, "group", None)
    status_of = getattr(queue, "raft_status", None)
    if not isinstance(name, str) and status_of is None:
        return True, None, None
    st = None
    with contextlib.suppress(Exception):
        if status_of is not None:
            st = status_of()
        else:
            st = raft_group_status(getattr(broker, "cluster", None), name, getattr(queue, "members", ()))
    if not st:
        return False, name if isinstance(name, str) else None, None
    g = group_record(st, name if isinstance(name, str) else None)
    return g["role"] == "leader", g["name"], g


def collect(broker: Any, now_ms: int | None = None, mono_ms: int | None = None) -> dict:
    """A snapshot record of `broker` (node/broker.py) as it is now. Parts the broker
    lacks come out empty or zero; nothing here raises for a missing attribute.
    `boot_id`, `seq` and `interval_ms` are left to the SnapshotWriter."""
    cfg = getattr(broker, "config", None)
    cluster = getattr(broker, "cluster", None)
    groups = _groups(broker)
    connections = sessions = links = 0
    for conn in list(getattr(broker, "connections", ()) or ()):
        connections += 1
        engine_sessions = getattr(getattr(conn, "engine", None), "sessions", None) or {}
        with contextlib.suppress(Exception):
            for s in list(engine_sessions.values()):
                sessions += 1
                links += len(getattr(s, "links", None) or ())
    queues = []
    for vhost in list((getattr(broker, "vhosts", None) or {}).values()):
        for queue in list((getattr(vhost, "queues", None) or {}).values()):
            if getattr(queue, "deleted", False) or getattr(queue, "remote", False):
                continue  # a RemoteQueue is the proxy of a queue another node hosts
            with contextlib.suppress(Exception):
                leader, gname, grec = _queue_group(broker, queue)
                queues.append(queue_record(queue, leader, gname))
                if grec is not None:
                    groups.append(grec)
    seen: set[str] = set()
    groups = [g for g in groups if not (g["name"] in seen or seen.add(g["name"]))]  # once each
    alarms: list[str] = []
    with contextlib.suppress(Exception):
        alarms = [str(a) for a in broker.alarms.describe()]
    version = "unknown"
    with contextlib.suppress(Exception):
        from node import __version__ as version
    wall = int(time.time() * 1000) if now_ms is None else now_ms
    return {
        "schema_version": SCHEMA_VERSION,
        "node": str(getattr(cfg, "node_name", None) or "unknown"),
        "member_id": None if cluster is None else str(getattr(cluster, "node_id", None) or "") or None,
        "wall_ms": wall,
        "mono_ms": int(time.monotonic() * 1000) if mono_ms is None else mono_ms,
        "version": str(version),
        "feature_flags": _feature_flags(broker),
        "groups": groups,
        "connections": connections,
        "sessions": sessions,
        "links": links,
        "queues": queues,
        "alarms": alarms,
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
