"""The records of the cross-node queue path (remote_queue.py), in a binary,
versioned layout instead of one AMQP-encoded list per message.

What one node sends another on channel "queue.data" during a loop turn goes
as one record `queue.proxy` version 1 of raft/records.py (its binary form:
0xff, the kind, the version, then this layout), a batch of items

    count: u32, count x (item code: u8, the item's fields)

Each item is one of the messages listed in remote_queue.py's docstring, its
fields in that order, each field in a fixed encoding (big-endian):

    q  int                 i64
    ?  bool                u8
    n  int or None         u8 (0: None) [, i64]
    s  str                 len: u32, UTF-8
    b  bytes               len: u32, the bytes as they are (a message's payload: never re-encoded)
    S  list of str         count: u32, count x s
    L  list of int         count: u32, count x i64
    a  an AMQP value/None  u8 (0: None) [, len: u32, AMQP encoding]  (annotations: rare)

Runs of fixed-width fields are packed with one struct each. A layout never
changes under the same version: a new one is `queue.proxy` version 2,
decoded beside version 1. A node sends this form only once the cluster
enabled feature flag `queue_proxy_records` (every member reads it); before
that, and from a node of an older version, the items come one per node
message as AMQP lists, which `decode_message` reads too.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from amqp import codec
from raft import records

__all__ = ["KINDS", "ProxyBatch", "decode_message", "encode_batch"]

# Each item: its code on the wire and its fields (see the module docstring).
# Append only: a code and its fields never change within version 1.
KINDS: dict[str, tuple[int, str]] = {
    "pub": (1, "ssqb?nsSa"),
    "attach": (2, "qssq?"),
    "credit": (3, "qqq??"),
    "settle": (4, "qLs??a"),
    "detach": (5, "q"),
    "count": (6, "qss"),
    "purge": (7, "qss"),
    "counts": (8, "qnqq"),
    "purged": (9, "qn"),
    "conf": (10, "qs"),
    "deliver": (11, "qqbq??sSa"),
    "flow": (12, "qqqq?"),
    "gone": (13, "qss"),
}

_FIXED = {"q": "q", "?": "?"}
_U8 = struct.Struct(">B")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_OPT_INT = struct.Struct(">Bq")


def _compile(fields: str) -> tuple[tuple[Any, int], ...]:
    """Fields as segments: (struct, n) for a run of n fixed-width fields, (code, 1) for a variable one."""
    segments: list[tuple[Any, int]] = []
    run = ""
    for code in fields:
        if code in _FIXED:
            run += _FIXED[code]
            continue
        if run:
            segments.append((struct.Struct(">" + run), len(run)))
            run = ""
        segments.append((code, 1))
    if run:
        segments.append((struct.Struct(">" + run), len(run)))
    return tuple(segments)


_BY_NAME = {name: (bytes((code,)), _compile(fields)) for name, (code, fields) in KINDS.items()}
_BY_CODE = {code: (name, _compile(fields)) for name, (code, fields) in KINDS.items()}


def _pack_var(code: str, value: Any, out: list) -> None:
    if code == "s":
        data = value.encode()
        out.append(_U32.pack(len(data)))
        out.append(data)
    elif code == "b":
        out.append(_U32.pack(len(value)))
        out.append(value)
    elif code == "n":
        out.append(b"\x00" if value is None else _OPT_INT.pack(1, value))
    elif code == "S":
        out.append(_U32.pack(len(value)))
        for s in value:
            data = s.encode()
            out.append(_U32.pack(len(data)))
            out.append(data)
    elif code == "L":
        out.append(_U32.pack(len(value)))
        out.append(struct.pack(f">{len(value)}q", *value))
    elif code == "a":
        if value is None:
            out.append(b"\x00")
        else:
            data = codec.dumps(value)
            out.append(b"\x01" + _U32.pack(len(data)))
            out.append(data)
    else:
        raise ValueError(f"unknown field code {code!r}")


def _unpack_var(code: str, data: bytes, pos: int) -> tuple[Any, int]:
    if code == "s" or code == "b":
        (n,) = _U32.unpack_from(data, pos)
        pos += 4
        end = pos + n
        if end > len(data):
            raise ValueError("truncated field")
        raw = data[pos:end]
        return (raw.decode() if code == "s" else raw), end
    if code == "n":
        if data[pos] == 0:
            return None, pos + 1
        return _OPT_INT.unpack_from(data, pos)[1], pos + _OPT_INT.size
    if code == "S":
        (count,) = _U32.unpack_from(data, pos)
        pos += 4
        out = []
        for _ in range(count):
            (n,) = _U32.unpack_from(data, pos)
            pos += 4
            out.append(data[pos : pos + n].decode())
            pos += n
        if pos > len(data):
            raise ValueError("truncated string list")
        return out, pos
    if code == "L":
        (count,) = _U32.unpack_from(data, pos)
        pos += 4
        return list(struct.unpack_from(f">{count}q", data, pos)), pos + 8 * count
    if code == "a":
        if data[pos] == 0:
            return None, pos + 1
        (n,) = _U32.unpack_from(data, pos + 1)
        pos += 5
        if pos + n > len(data):
            raise ValueError("truncated annotations")
        return codec.loads(data[pos : pos + n]), pos + n
    raise ValueError(f"unknown field code {code!r}")


def pack_item(item: list | tuple) -> list[bytes]:
    """One item `[name, field, ...]` as the parts of its layout."""
    code, segments = _BY_NAME[item[0]]
    out = [code]
    i = 1
    for seg, n in segments:
        if n == 1 and type(seg) is str:
            _pack_var(seg, item[i], out)
        else:
            out.append(seg.pack(*item[i : i + n]))
        i += n
    if i != len(item):
        raise ValueError(f"{item[0]!r} has {len(item) - 1} fields, its layout {i - 1}")
    return out


def unpack_item(data: bytes, pos: int) -> tuple[list, int]:
    """The item at data[pos] as `[name, field, ...]`, and where the next one starts."""
    entry = _BY_CODE.get(data[pos])
    if entry is None:
        raise ValueError(f"unknown item code {data[pos]}")
    name, segments = entry
    item: list[Any] = [name]
    pos += 1
    for seg, n in segments:
        if n == 1 and type(seg) is str:
            value, pos = _unpack_var(seg, data, pos)
            item.append(value)
        else:
            item.extend(seg.unpack_from(data, pos))
            pos += seg.size
    return item, pos


class _BatchCodec:
    """raft/records.py's binary codec of `ProxyBatch`."""

    def encode(self, record: ProxyBatch) -> list[bytes]:
        parts = [_U32.pack(len(record.items))]
        for item in record.items:
            parts.extend(pack_item(item))
        return parts

    def decode(self, data: bytes, pos: int) -> ProxyBatch:
        (count,) = _U32.unpack_from(data, pos)
        pos += 4
        items = []
        for _ in range(count):
            item, pos = unpack_item(data, pos)
            items.append(tuple(item))
        if pos != len(data):
            raise ValueError(f"{len(data) - pos} trailing bytes after a queue.proxy batch")
        return ProxyBatch(tuple(items))


@records.command("queue.proxy", version=1, binary=_BatchCodec())
@dataclass(frozen=True)
class ProxyBatch:
    """What one node sends another on "queue.data" in one loop turn, in order."""

    items: tuple  # of (name, field, ...), as listed in remote_queue.py


def encode_batch(items: list) -> bytes:
    """One node message carrying `items` (lists `[name, field, ...]`) in order."""
    return records.encode(ProxyBatch(tuple(items)))


def decode_message(payload: bytes) -> list:
    """The items of one "queue.data" node message, in either form: a batch
    (first byte 0xff) or, from a node without the flag, one AMQP list."""
    if payload[:1] == b"\xff":
        return list(records.decode(payload).items)
    return [codec.loads(payload)]
