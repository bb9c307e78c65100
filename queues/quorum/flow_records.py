"""The node-to-node messages of quorum queue publisher flow (publish_hold.py),
one fixed binary layout, versioned:

    u8 version (1), u8 kind, u16 count, then `count` entries
    kind APPLIED (a replica with consumers -> the group's leader):
        u8 group length, group (ASCII), u64 raft index applied, u64 messages applied, u8 hosts consumers
    kind HOLD (the leader -> the group's other members):
        u8 group length, group (ASCII), u8 held

One message carries every group one node has to tell one peer at that
moment. A reader refuses a version or kind it does not know (ValueError).
"""

from __future__ import annotations

import struct

__all__ = ["APPLIED", "HOLD", "VERSION", "decode", "encode_applied", "encode_hold"]

VERSION = 1
APPLIED, HOLD = 1, 2
_HEAD = struct.Struct(">BBH")
_APPLIED = struct.Struct(">QQB")
_HELD = struct.Struct(">B")
MAX_ENTRIES = 0xFFFF


def encode_applied(entries: list[tuple[str, int, int, bool]]) -> bytes:
    """(group, index, messages applied, hosts consumers) each."""
    out = [_HEAD.pack(VERSION, APPLIED, len(entries))]
    for group, index, applied, consumers in entries:
        name = group.encode("ascii")
        out.append(bytes([len(name)]) + name + _APPLIED.pack(index, applied, 1 if consumers else 0))
    return b"".join(out)


def encode_hold(entries: list[tuple[str, bool]]) -> bytes:
    """(group, held) each."""
    out = [_HEAD.pack(VERSION, HOLD, len(entries))]
    for group, held in entries:
        name = group.encode("ascii")
        out.append(bytes([len(name)]) + name + _HELD.pack(1 if held else 0))
    return b"".join(out)


def decode(data: bytes) -> tuple[int, list[tuple]]:
    """(kind, entries): APPLIED entries as encode_applied takes them, HOLD ones as encode_hold."""
    try:
        version, kind, count = _HEAD.unpack_from(data, 0)
        if version != VERSION:
            raise ValueError(f"quorum flow record version {version}, this node reads {VERSION}")
        tail = {APPLIED: _APPLIED, HOLD: _HELD}.get(kind)
        if tail is None:
            raise ValueError(f"unknown quorum flow record kind {kind}")
        pos, entries = _HEAD.size, []
        for _ in range(count):
            n = data[pos]
            group = data[pos + 1:pos + 1 + n].decode("ascii")
            fields = tail.unpack_from(data, pos + 1 + n)
            pos += 1 + n + tail.size
            if kind == APPLIED:
                entries.append((group, fields[0], fields[1], bool(fields[2])))
            else:
                entries.append((group, bool(fields[0])))
    except (struct.error, IndexError, UnicodeDecodeError) as e:
        raise ValueError(f"malformed quorum flow record: {e}") from e
    if pos != len(data):
        raise ValueError("malformed quorum flow record: trailing bytes")
    return kind, entries
