"""The records of the cross-node queue path (remote_queue.py), in a binary,
versioned layout instead of one AMQP-encoded list per message.

What one node sends another on channel "queue.data" during a loop turn goes
as one record `queue.proxy` version 1 of raft/records.py (its binary form:
0xff, the kind, the version, then this layout), a batch of items

    count: u32, count x (item code: u8, the item's fields)

Each item is one of the messages listed in remote_queue.py's docstring:
its code, then one fixed-width header with every fixed-width field and the
length of every variable one, then the variable fields' bytes in order (so
a decode is one struct unpack and a slice per variable field). Big-endian,
by field type:

    type                   in the header                       after it
    q  int                 i64
    ?  bool                u8
    n  int or None         u8 (0: None), i64
    s  str                 len: u32                            UTF-8
    b  bytes               len: u32                            the bytes as they are (a message: never re-encoded)
    S  list of str         count: u32                          count x (len: u32, UTF-8)
    L  list of int         count: u32                          count x i64
    a  AMQP value or None  len: u32 (0: None)                  its AMQP encoding (annotations: rare)

A layout never changes under the same version: a new one is `queue.proxy`
version 2, decoded beside version 1. A node sends this form only once the
cluster enabled feature flag `queue_proxy_records` (every member reads it);
before that, and from a node of an older version, the items come one per
node message as AMQP lists, which `decode_message` reads too. The encoder
and decoder of each item are generated from its field types once, at import
(`_compile`): the per-field interpretation costs nothing per message.
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
    "sattach": (14, "qssq?a"),  # a replicated stream's reader with its filter set (sent only with stream_replication)
}

_U32 = struct.Struct(">I")
_HEADER = {"q": "q", "?": "?", "n": "?q", "s": "I", "b": "I", "S": "I", "L": "I", "a": "I"}


def _pack_strs(values: list) -> bytes:
    if len(values) == 1:  # a message's routing keys: nearly always one
        data = values[0].encode()
        return _U32.pack(len(data)) + data
    out = []
    for v in values:
        data = v.encode()
        out.append(_U32.pack(len(data)))
        out.append(data)
    return b"".join(out)


def _unpack_strs(data: bytes, pos: int, count: int) -> tuple[list, int]:
    if count == 1:
        (n,) = _U32.unpack_from(data, pos)
        end = pos + 4 + n
        return [data[pos + 4 : end].decode()], end
    out = []
    for _ in range(count):
        (n,) = _U32.unpack_from(data, pos)
        pos += 4
        out.append(data[pos : pos + n].decode())
        pos += n
    return out, pos


def _pack_ints(values: list) -> bytes:
    return struct.pack(f">{len(values)}q", *values)


def _pack_amqp(value: Any) -> bytes:
    return b"" if value is None else codec.dumps(value)


def _compile(name: str, code: int, fields: str) -> tuple[Any, Any]:
    """The encoder `item -> tuple of bytes` and decoder `(data, pos) -> (item, next pos)`
    of one item, generated from its field types (see the module docstring)."""
    args = [f"a{i}" for i in range(len(fields))]
    pre, head, tails = [], [str(code)], []  # encoder: statements, header values, tail parts
    dec = ["h = H.unpack_from(data, pos)", "p = pos + H.size"]
    out = []  # decoder: each field's value
    k = 1  # index in the header
    for a, t in zip(args, fields, strict=True):
        if t in "q?":
            head.append(a)
            out.append(f"h[{k}]")
        elif t == "n":
            head += [f"{a} is not None", f"{a} or 0"]
            out.append(f"(h[{k + 1}] if h[{k}] else None)")
        elif t in "sb":
            if t == "s":
                pre.append(f"{a} = {a}.encode()")
            head.append(f"len({a})")
            tails.append(a)
            dec += [f"v{k} = data[p : p + h[{k}]]", f"p += h[{k}]"]
            out.append(f"v{k}.decode()" if t == "s" else f"v{k}")
        elif t == "S":
            head.append(f"len({a})")
            tails.append(f"_pack_strs({a})")
            dec.append(f"v{k}, p = _unpack_strs(data, p, h[{k}])")
            out.append(f"v{k}")
        elif t == "L":
            head.append(f"len({a})")
            tails.append(f"_pack_ints({a})")
            dec += [f"v{k} = list(struct.unpack_from(f'>{{h[{k}]}}q', data, p))", f"p += 8 * h[{k}]"]
            out.append(f"v{k}")
        elif t == "a":
            pre.append(f"{a} = _pack_amqp({a})")
            head.append(f"len({a})")
            tails.append(a)
            dec += [f"v{k} = codec.loads(data[p : p + h[{k}]]) if h[{k}] else None", f"p += h[{k}]"]
            out.append(f"v{k}")
        else:
            raise ValueError(f"{name}: unknown field type {t!r}")
        k += 2 if t == "n" else 1
    fmt = ">B" + "".join(_HEADER[t] for t in fields)
    src = "\n".join([
        "def encode(item):",
        f"    _, {', '.join(args)}, = item",
        *(f"    {line}" for line in pre),
        f"    return (H.pack({', '.join(head)}), {''.join(t + ', ' for t in tails)})",
        "def decode(data, pos):",
        *(f"    {line}" for line in dec),
        "    if p > len(data):",
        f"        raise ValueError('truncated {name}')",
        f"    return [{name!r}, {', '.join(out)}], p",
    ])  # fmt: skip
    scope = {"H": struct.Struct(fmt), "struct": struct, "codec": codec, "_pack_strs": _pack_strs,
             "_unpack_strs": _unpack_strs, "_pack_ints": _pack_ints, "_pack_amqp": _pack_amqp}  # fmt: skip
    exec(compile(src, f"<queue.proxy {name}>", "exec"), scope)  # our own source, from KINDS above
    return scope["encode"], scope["decode"]


_ENCODERS = {}
_DECODERS = {}
for _name, (_code, _fields) in KINDS.items():
    _ENCODERS[_name], _DECODERS[_code] = _compile(_name, _code, _fields)


def pack_item(item: list | tuple) -> tuple:
    """One item `[name, field, ...]` as the parts of its layout."""
    try:
        return _ENCODERS[item[0]](item)
    except ValueError as e:  # unpacking the wrong number of fields
        raise ValueError(f"{item[0]!r}: {e}") from None


def unpack_item(data: bytes, pos: int) -> tuple[list, int]:
    """The item at data[pos] as `[name, field, ...]`, and where the next one starts."""
    decoder = _DECODERS.get(data[pos])
    if decoder is None:
        raise ValueError(f"unknown item code {data[pos]}")
    return decoder(data, pos)


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
