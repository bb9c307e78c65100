"""Warren's snapshot file: the state machine's own bytes plus pysyncobj's tail.

pysyncobj calls a custom `serializer(path, (last, prev, cluster))` when it
compacts the log and `deserializer(path)` when it loads a snapshot (at start,
or one received from the leader); raft/group.py plugs these functions in, so
the file holds the machine's explicit snapshot (`Machine.snapshot()`) instead
of pysyncobj's pickle of Python objects. pysyncobj writes to `<file>.tmp` and
renames it; raft/patches.py makes that rename durable (fsync the file, rename,
fsync the directory), so the file is either the old snapshot or the new one.

Layout, format version 1 (integers big-endian):

    offset size field
    0      7    magic b"WRNSNAP"
    7      1    format version, 1
    8      4    CRC-32 of everything after this field
    12     4    header length H
    16     H    header: AMQP list [last, prev, cluster]; last and prev are the
                log entries the snapshot ends with, each [command, index, term];
                cluster is the list of member node ids (strings)
    16+H   ...  the machine's snapshot bytes
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

from amqp import codec

__all__ = ["FORMAT_VERSION", "Snapshot", "SnapshotError", "read_snapshot", "read_snapshot_end", "write_snapshot"]

MAGIC = b"WRNSNAP"
FORMAT_VERSION = 1
_HEAD = struct.Struct(">7sBII")

Entry = tuple[bytes, int, int]


class SnapshotError(Exception):
    """A snapshot file that is damaged or in a format this Warren cannot read."""


class Snapshot(NamedTuple):
    last: Entry
    prev: Entry
    cluster: list[str]
    machine: bytes


def write_snapshot(path: str, last: Entry, prev: Entry, cluster: list[str], machine: bytes) -> None:
    """Write a snapshot file (not fsynced: the durable rename that follows does that)."""
    header = codec.dumps([list(last), list(prev), list(cluster)])
    body = struct.pack(">I", len(header)) + header + machine
    with open(path, "wb") as f:
        f.write(_HEAD.pack(MAGIC, FORMAT_VERSION, zlib.crc32(body), len(header)))
        f.write(header)
        f.write(machine)


def read_snapshot(path: str) -> Snapshot:
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < _HEAD.size:
        raise SnapshotError(f"{path}: {len(data)} bytes is too short for a snapshot")
    magic, version, crc, hlen = _HEAD.unpack_from(data)
    if magic != MAGIC:
        raise SnapshotError(f"{path}: not a Warren snapshot")
    if version != FORMAT_VERSION:
        raise SnapshotError(f"{path}: snapshot format {version}, this Warren reads {FORMAT_VERSION}")
    if zlib.crc32(memoryview(data)[12:]) != crc:
        raise SnapshotError(f"{path}: checksum mismatch")
    end = _HEAD.size + hlen
    if end > len(data):
        raise SnapshotError(f"{path}: header runs past the end of the file")
    try:
        last, prev, cluster = codec.loads(data[_HEAD.size : end])
        last_e = (bytes(last[0]), int(last[1]), int(last[2]))
        prev_e = (bytes(prev[0]), int(prev[1]), int(prev[2]))
        ids = [str(n) for n in cluster]
    except Exception as e:
        raise SnapshotError(f"{path}: malformed header: {e}") from None
    return Snapshot(last_e, prev_e, ids, bytes(data[end:]))


def read_snapshot_end(path: str) -> Entry:
    """The log entry a snapshot file ends with (its `last`), from the header alone: enough to
    tell whether a snapshot is needed at all before it is read whole (`read_snapshot` checks it)."""
    with open(path, "rb") as f:
        head = f.read(_HEAD.size)
        if len(head) < _HEAD.size:
            raise SnapshotError(f"{path}: {len(head)} bytes is too short for a snapshot")
        magic, version, _crc, hlen = _HEAD.unpack(head)
        if magic != MAGIC or version != FORMAT_VERSION:
            raise SnapshotError(f"{path}: not a Warren snapshot of format {FORMAT_VERSION}")
        header = f.read(hlen)
    try:
        last = codec.loads(header)[0]
        return bytes(last[0]), int(last[1]), int(last[2])
    except Exception as e:
        raise SnapshotError(f"{path}: malformed header: {e}") from None
