"""The cluster-state snapshot record: its schema, validation and reading.

A Warren node appends one JSON line per period to `<data_dir>/snapshots/snapshots-<n>.ndjson`
(node/ops/state_snapshot.py writes them); the Spark jobs of `audit/` read the files of every
node side by side. `SCHEMA` below is the one source of truth for the record layout, versioned
by `schema_version`; docs/snapshot-schema.md describes every field and audit/spark_schema.py
derives the Spark schema from it.

`validate_record(record)` raises `SnapshotSchemaError` when a record does not match the schema
(the tests check every record they write with it). `read_records(directory)` reads a node's
files back, oldest first.

This module is stdlib only: the node writes records with it and the audit reads them, on
machines with only one of the two sets of dependencies.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

SCHEMA_VERSION = 1

# ---------------------------------------------------------------------------------------- schema


@dataclass(frozen=True)
class Field:
    """One field of a record: `kind` is int, str, bool, object (with `fields`)
    or list (of `of`: a kind name, or a dict of fields for a list of objects)."""

    kind: str
    required: bool = True
    nullable: bool = False
    of: Any = None
    fields: Mapping[str, Field] | None = None
    doc: str = ""


COUNTERS = ("published", "confirmed", "rejected", "delivered", "redelivered", "acknowledged", "dead_lettered",
            "dropped", "expired", "recovered")  # fmt: skip
"""A queue's monotonic counters, in `queues[].counters`; every one is an int >= 0 that only grows
while the process (or, for a quorum queue, the replicated state) lives."""

COUNTER_DOCS = {
    "published": "messages offered to the queue (publish calls), refused ones included",
    "confirmed": "publishes confirmed to the publisher as accepted",
    "rejected": "publishes refused (x-overflow reject-publish); they never entered the queue",
    "delivered": "transfers to consumers, redeliveries included",
    "redelivered": "transfers of messages that had been delivered before",
    "acknowledged": "messages that left the queue accepted by a consumer",
    "dead_lettered": "messages that left the queue to a dead-letter exchange (any reason)",
    "dropped": "messages that left the queue otherwise: overflow, expiry or rejection without a "
    "dead-letter exchange, purge",
    "expired": "TTL expiries (each also counted in dead_lettered or dropped)",
    "recovered": "messages the queue found in its store at start (they were not published in this epoch)",
}

GROUP_FIELDS: dict[str, Field] = {
    "name": Field("str", doc="the Raft group: 'metadata', or the quorum queue's group name"),
    "role": Field("str", doc="leader, follower, candidate, joining or stopped"),
    "term": Field("int", nullable=True, doc="the current term as this node knows it"),
    "leader": Field("str", nullable=True, doc="member id of the leader this node follows (itself when leading)"),
    "commit_index": Field("int", nullable=True),
    "last_applied": Field("int", nullable=True),
    "members": Field("list", of="str", doc="member ids of the group"),
    "reachable": Field("list", of="str", doc="the other members this node currently reaches (self excluded)"),
}

QUEUE_FIELDS: dict[str, Field] = {
    "vhost": Field("str"),
    "name": Field("str"),
    "type": Field("str", doc="classic, quorum or stream"),
    "durable": Field("bool", required=False),
    "leader": Field("bool", doc="this node's counters are the queue's: the quorum queue's leader, "
                                "the classic queue's home node"),  # fmt: skip
    "group": Field("str", required=False, nullable=True, doc="the queue's Raft group, null for a classic queue"),
    "depth": Field("int", doc="messages held: ready plus delivered-unsettled"),
    "unacked": Field("int", doc="of depth: delivered to a consumer and not settled yet"),
    "consumers": Field("int"),
    "counters": Field("object", fields={c: Field("int", doc=COUNTER_DOCS[c]) for c in COUNTERS}),
    "worker": Field("int", required=False, doc="the worker process that runs the queue, on a node of several"),
}

SCHEMA: dict[str, Field] = {
    "schema_version": Field("int", doc=f"layout version of this record ({SCHEMA_VERSION})"),
    "node": Field("str", doc="the node's name (config node_name)"),
    "member_id": Field("str", nullable=True, doc="the node's cluster address host:port; null when not clustered"),
    "boot_id": Field("str", doc="random per process start: a new value means the node restarted"),
    "seq": Field("int", doc="record number since this boot, from 0"),
    "wall_ms": Field("int", doc="wall-clock time of the record, Unix ms"),
    "mono_ms": Field("int", doc="monotonic clock, ms (only differences within one boot_id mean anything)"),
    "interval_ms": Field("int", doc="the snapshot period"),
    "version": Field("str", doc="Warren version"),
    "feature_flags": Field("object", fields={
        "supported": Field("list", of="str"),
        "enabled": Field("list", of="str"),
    }),  # fmt: skip
    "groups": Field("list", of=GROUP_FIELDS, doc="one per Raft group this node is a member of"),
    "connections": Field("int"),
    "sessions": Field("int"),
    "links": Field("int"),
    "queues": Field("list", of=QUEUE_FIELDS, doc="one per queue this node hosts (a replica counts)"),
    "alarms": Field("list", of="str", doc="resource alarms in effect: memory, disk, forced ones"),
}


class SnapshotSchemaError(ValueError):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


_KINDS: dict[str, Callable[[Any], bool]] = {
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
    "bool": lambda v: isinstance(v, bool),
}


def _check(value: Any, f: Field, path: str, out: list[str]) -> None:
    if value is None:
        if not f.nullable:
            out.append(f"{path}: null")
        return
    if f.kind in _KINDS:
        if not _KINDS[f.kind](value):
            out.append(f"{path}: {type(value).__name__}, want {f.kind}")
    elif f.kind == "object":
        _check_object(value, f.fields or {}, path, out)
    elif f.kind == "list":
        if not isinstance(value, list):
            out.append(f"{path}: {type(value).__name__}, want a list")
            return
        for i, item in enumerate(value):
            if isinstance(f.of, dict):
                _check_object(item, f.of, f"{path}[{i}]", out)
            else:
                _check(item, Field(f.of), f"{path}[{i}]", out)


def _check_object(value: Any, fields: Mapping[str, Field], path: str, out: list[str]) -> None:
    if not isinstance(value, dict):
        out.append(f"{path or 'record'}: {type(value).__name__}, want an object")
        return
    for name, f in fields.items():
        where = f"{path}.{name}" if path else name
        if name not in value:
            if f.required:
                out.append(f"{where}: missing")
            continue
        _check(value[name], f, where, out)


def record_problems(record: Any) -> list[str]:
    """Everything that keeps `record` from matching the schema (empty: it matches).
    Fields the schema does not name are allowed (a newer writer may add them)."""
    out: list[str] = []
    _check_object(record, SCHEMA, "", out)
    if not out:
        if record["schema_version"] != SCHEMA_VERSION:
            out.append(f"schema_version: {record['schema_version']}, this Warren writes {SCHEMA_VERSION}")
        for name in ("seq", "interval_ms", "connections", "sessions", "links"):
            if record[name] < 0:
                out.append(f"{name}: negative")
        for i, q in enumerate(record["queues"]):
            for name in ("depth", "unacked", "consumers"):
                if q[name] < 0:
                    out.append(f"queues[{i}].{name}: negative")
            if q["unacked"] > q["depth"]:
                out.append(f"queues[{i}]: unacked {q['unacked']} > depth {q['depth']}")
            for c in COUNTERS:
                if q["counters"][c] < 0:
                    out.append(f"queues[{i}].counters.{c}: negative")
    return out


def validate_record(record: Any) -> None:
    """Raises SnapshotSchemaError unless `record` matches the schema of this version."""
    problems = record_problems(record)
    if problems:
        raise SnapshotSchemaError(problems)


SNAPSHOT_DIR = "snapshots"
SNAPSHOT_FILE_NAME = re.compile(r"^snapshots-(\d+)\.ndjson$")


def snapshot_files(directory: str) -> list[str]:
    """The snapshot files in `directory`, oldest first (by their number)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = sorted((int(m.group(1)), n) for n in names if (m := SNAPSHOT_FILE_NAME.match(n)))
    return [os.path.join(directory, n) for _, n in found]


def read_records(directory: str) -> list[dict]:
    """Every readable record of the snapshot files in `directory`, oldest first;
    lines that do not parse (a torn last line) are skipped. For tests and tools."""
    out = []
    for path in snapshot_files(directory):
        with open(path, "rb") as f:
            for line in f:
                with contextlib.suppress(ValueError):
                    out.append(json.loads(line))
    return out
