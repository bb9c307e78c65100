"""Wire codec for the message dicts pysyncobj 0.3.17 sends between nodes.

pysyncobj's own TCP transport pickles whole messages, so any peer that can
reach the port can run code. The gRPC transport never pickles or unpickles
anything that crosses the wire: every message is one of the shapes below,
written field by field in a fixed binary layout, and anything else is refused
with `MessageError` on both sides (an unknown key or type when encoding, an
unknown tag, a bad length or trailing bytes when decoding).

The shapes, exactly as syncobj.py builds and reads them (`type` is implied by
the tag; `?` marks a key that may be absent; ints are >= 0 and < 2**64):

  tag 1 request_vote            term, last_log_index, last_log_term
  tag 2 response_vote           term
  tag 3 append_entries          term, commit_index, prevLogIdx, prevLogTerm
                                (int or None), entries: [(bytes, idx, term)]
  tag 4 append_entries snapshot term, commit_index,
                                serialized: (bytes, isFirst, isLast) | None | False
  tag 5 next_node_idx           next_node_idx, reset: bool, success: bool
  tag 6 apply_command           command: bytes, request_id?
  tag 7 apply_command_response  request_id, error?, log_idx? + log_term?
  tag 8 timeout_now             term
  tag 9 pre_vote                term, last_log_index, last_log_term
                                (raft/prevote.py, not pysyncobj's)
  tag 10 pre_vote_response      term, granted: bool
  tag 11 newer_term             term (raft/prevote.py: the answer to a
                                stale leader's AppendEntries)

pysyncobj's third append_entries form, `transmission` chunks of one pickled
log entry too large for a batch, never reaches this codec: the sending
GroupTransport reassembles the chunks of its own pickle and sends the entry
as a regular tag-3 message (see `reassemble_entry`).

Payload bytes (commands, snapshot chunks) are carried as opaque bytes; what
they mean is up to the state machines and the journal, not the transport.
Layout: a tag byte, then big-endian u64 ints, u32 length prefixes and u8
flags (presence bits for optional keys, 0/1 for bools).
"""

from __future__ import annotations

import io
import pickle
import struct
from collections.abc import Callable
from typing import Any

__all__ = ["CODEC_VERSION", "MessageError", "decode", "encode", "reassemble_entry"]

# Sent in the stream metadata; a peer with another version is refused.
CODEC_VERSION = 1

_U64_MAX = 2**64 - 1

_B = struct.Struct("!B")
_Q = struct.Struct("!Q")
_QQ = struct.Struct("!QQ")
_QQQ = struct.Struct("!QQQ")
_BQQ = struct.Struct("!BQQ")
_ENTRY = struct.Struct("!IQQ")  # len(command), idx, term
_COUNT = struct.Struct("!I")
_NEXT = struct.Struct("!QBB")
_SNAP = struct.Struct("!BBI")  # isFirst, isLast, len(data)


class MessageError(ValueError):
    """A message dict or a payload that is not one of the known shapes."""


# -- encoding ---------------------------------------------------------------
#
# The checks are written inline on the hot paths (append_entries and
# next_node_idx are most of the traffic). Ranges are left to struct.pack,
# which refuses negative and too large ints (`encode` turns that into a
# MessageError); `type(v) is int` refuses bools, floats and the rest.


def _bad(m: dict, what: str) -> MessageError:
    return MessageError(f"{m.get('type')!r}: {what}")


def _check_keys(m: dict, required: frozenset[str], optional: frozenset[str] = frozenset()) -> None:
    keys = m.keys()
    if keys == required:
        return
    missing = required - keys
    extra = keys - required - optional
    if missing or extra:
        raise _bad(m, f"missing keys {sorted(missing)}, unexpected keys {sorted(extra)}")


def _ints(m: dict, *keys: str) -> list[int]:
    values = [m[k] for k in keys]
    for k, v in zip(keys, values, strict=True):
        if type(v) is not int:
            raise _bad(m, f"{k} must be an int, got {v!r:.40}")
    return values


def _bytes(v: Any, what: str) -> bytes:
    if type(v) is bytes:
        return v
    if isinstance(v, bytes | bytearray | memoryview):
        return bytes(v)
    raise MessageError(f"{what} must be bytes, got {type(v).__name__}")


_K_VOTE = frozenset({"type", "term", "last_log_index", "last_log_term"})
_K_TERM = frozenset({"type", "term"})
_K_PRE_VOTE_RESP = frozenset({"type", "term", "granted"})
_K_AE = frozenset({"type", "term", "commit_index", "entries", "prevLogIdx", "prevLogTerm"})
_K_SNAP = frozenset({"type", "term", "commit_index", "serialized"})
_K_NEXT = frozenset({"type", "next_node_idx", "reset", "success"})
_K_APPLY = frozenset({"type", "command"})
_K_REQ = frozenset({"request_id"})
_K_RESP = frozenset({"type", "request_id"})
_K_RESP_OPT = frozenset({"error", "log_idx", "log_term"})


def _enc_request_vote(m: dict) -> bytes:
    _check_keys(m, _K_VOTE)
    return b"\x01" + _QQQ.pack(*_ints(m, "term", "last_log_index", "last_log_term"))


def _enc_pre_vote(m: dict) -> bytes:
    _check_keys(m, _K_VOTE)
    return b"\x09" + _QQQ.pack(*_ints(m, "term", "last_log_index", "last_log_term"))


def _enc_pre_vote_response(m: dict) -> bytes:
    _check_keys(m, _K_PRE_VOTE_RESP)
    granted = m["granted"]
    if type(granted) is not bool:
        raise _bad(m, "granted must be a bool")
    return b"\x0a" + _Q.pack(*_ints(m, "term")) + (b"\x01" if granted else b"\x00")


def _enc_response_vote(m: dict) -> bytes:
    _check_keys(m, _K_TERM)
    return b"\x02" + _Q.pack(*_ints(m, "term"))


def _enc_timeout_now(m: dict) -> bytes:
    _check_keys(m, _K_TERM)
    return b"\x08" + _Q.pack(*_ints(m, "term"))


def _enc_append_entries(m: dict) -> bytes:
    if m.keys() != _K_AE:
        if "transmission" in m:
            raise _bad(m, "transmission chunks are reassembled before encoding")
        if "serialized" in m:
            return _enc_snapshot(m)
        _check_keys(m, _K_AE)
    term, commit, prev_idx, prev_term, entries = (
        m["term"], m["commit_index"], m["prevLogIdx"], m["prevLogTerm"], m["entries"]
    )  # fmt: skip
    if type(term) is not int or type(commit) is not int:
        raise _bad(m, "term and commit_index must be ints")
    # flags: bit 0 prevLogIdx present, bit 1 prevLogTerm present (pysyncobj may send None)
    flags = 0
    tail = []
    if prev_idx is not None:
        if type(prev_idx) is not int:
            raise _bad(m, "prevLogIdx must be an int or None")
        flags = 1
        tail.append(_Q.pack(prev_idx))
    if prev_term is not None:
        if type(prev_term) is not int:
            raise _bad(m, "prevLogTerm must be an int or None")
        flags |= 2
        tail.append(_Q.pack(prev_term))
    if type(entries) is not list and type(entries) is not tuple:
        raise _bad(m, "entries must be a list")
    parts = [b"\x03", _BQQ.pack(flags, term, commit), *tail, _COUNT.pack(len(entries))]
    append = parts.append
    pack = _ENTRY.pack
    for entry in entries:
        if (type(entry) is not tuple and type(entry) is not list) or len(entry) != 3:
            raise _bad(m, f"a log entry must be (command, idx, term), got {entry!r:.60}")
        command, idx, log_term = entry
        if type(command) is not bytes:
            command = _bytes(command, "a log entry's command")
        if type(idx) is not int or type(log_term) is not int:
            raise _bad(m, "a log entry's idx and term must be ints")
        append(pack(len(command), idx, log_term))
        append(command)
    return b"".join(parts)


def _enc_snapshot(m: dict) -> bytes:
    _check_keys(m, _K_SNAP)
    head = _QQ.pack(*_ints(m, "term", "commit_index"))
    s = m["serialized"]
    if s is None:
        return b"\x04" + head + b"\x00"
    if s is False:
        return b"\x04" + head + b"\x01"
    if type(s) is not tuple and type(s) is not list or len(s) != 3:
        raise _bad(m, f"serialized must be (bytes, bool, bool), None or False, got {s!r:.60}")
    data, first, last = s
    data = _bytes(data, "serialized data")
    if type(first) is not bool or type(last) is not bool:
        raise _bad(m, "serialized flags must be bools")
    return b"\x04" + head + b"\x02" + _SNAP.pack(first, last, len(data)) + data


def _enc_next_node_idx(m: dict) -> bytes:
    if m.keys() != _K_NEXT:
        _check_keys(m, _K_NEXT)
    nxt, reset, success = m["next_node_idx"], m["reset"], m["success"]
    if type(nxt) is not int or type(reset) is not bool or type(success) is not bool:
        raise _bad(m, "next_node_idx must be an int, reset and success bools")
    return b"\x05" + _NEXT.pack(nxt, reset, success)


def _enc_apply_command(m: dict) -> bytes:
    _check_keys(m, _K_APPLY, _K_REQ)
    command = _bytes(m["command"], "apply_command's command")
    if "request_id" in m:
        return b"\x06\x01" + _Q.pack(*_ints(m, "request_id")) + command
    return b"\x06\x00" + command


def _enc_apply_command_response(m: dict) -> bytes:
    _check_keys(m, _K_RESP, _K_RESP_OPT)
    has_log = "log_idx" in m
    if has_log != ("log_term" in m):
        raise _bad(m, "log_idx and log_term go together")
    parts = [b"\x07", _Q.pack(*_ints(m, "request_id"))]
    flags = 0
    tail = []
    if "error" in m:
        flags |= 1
        tail.append(_Q.pack(*_ints(m, "error")))
    if has_log:
        flags |= 2
        tail.append(_QQ.pack(*_ints(m, "log_idx", "log_term")))
    parts.append(bytes((flags,)))
    parts.extend(tail)
    return b"".join(parts)


def _enc_newer_term(m: dict) -> bytes:
    _check_keys(m, _K_TERM)
    return b"\x0b" + _Q.pack(*_ints(m, "term"))


_ENCODERS: dict[str, Callable[[dict], bytes]] = {
    "request_vote": _enc_request_vote,
    "response_vote": _enc_response_vote,
    "append_entries": _enc_append_entries,
    "next_node_idx": _enc_next_node_idx,
    "apply_command": _enc_apply_command,
    "apply_command_response": _enc_apply_command_response,
    "timeout_now": _enc_timeout_now,
    "pre_vote": _enc_pre_vote,
    "pre_vote_response": _enc_pre_vote_response,
    "newer_term": _enc_newer_term,
}


def encode(message: Any) -> bytes:
    """Encode one pysyncobj message dict; raise `MessageError` for any other shape."""
    if type(message) is not dict:
        raise MessageError(f"a message must be a dict, got {type(message).__name__}")
    kind = message.get("type")
    encoder = _ENCODERS.get(kind) if type(kind) is str else None
    if encoder is None:
        raise MessageError(f"unknown message type {kind!r:.40}")
    try:
        return encoder(message)
    except struct.error as e:  # an int out of range, a length past u32
        raise MessageError(f"{kind}: {e}") from None


# -- decoding ---------------------------------------------------------------
#
# Each decoder takes the payload and returns (message, end); `decode` checks
# that end is the payload's length. struct.error (reading past the end) and
# bad flag bytes become MessageError.


def _flag(v: int, allowed: int) -> int:
    if v > allowed:
        raise MessageError(f"bad flag byte {v}")
    return v


def _bool_of(v: int) -> bool:
    if v > 1:
        raise MessageError(f"bad bool byte {v}")
    return v == 1


def _dec_request_vote(d: bytes) -> tuple[dict, int]:
    term, idx, log_term = _QQQ.unpack_from(d, 1)
    return {"type": "request_vote", "term": term, "last_log_index": idx, "last_log_term": log_term}, 25


def _dec_pre_vote(d: bytes) -> tuple[dict, int]:
    term, idx, log_term = _QQQ.unpack_from(d, 1)
    return {"type": "pre_vote", "term": term, "last_log_index": idx, "last_log_term": log_term}, 25


def _dec_pre_vote_response(d: bytes) -> tuple[dict, int]:
    (term,) = _Q.unpack_from(d, 1)
    return {"type": "pre_vote_response", "term": term, "granted": _bool_of(_B.unpack_from(d, 9)[0])}, 10


def _dec_response_vote(d: bytes) -> tuple[dict, int]:
    return {"type": "response_vote", "term": _Q.unpack_from(d, 1)[0]}, 9


def _dec_timeout_now(d: bytes) -> tuple[dict, int]:
    return {"type": "timeout_now", "term": _Q.unpack_from(d, 1)[0]}, 9


def _dec_append_entries(d: bytes) -> tuple[dict, int]:
    flags, term, commit = _BQQ.unpack_from(d, 1)
    pos = 18
    prev_idx = prev_term = None
    if flags & 1:
        prev_idx = _Q.unpack_from(d, pos)[0]
        pos += 8
    if flags & 2:
        prev_term = _Q.unpack_from(d, pos)[0]
        pos += 8
    _flag(flags, 3)
    (count,) = _COUNT.unpack_from(d, pos)
    pos += 4
    size = len(d)
    if count * _ENTRY.size > size - pos:  # each entry has a 20-byte header: refuse absurd counts early
        raise MessageError("truncated message")
    entries = []
    append = entries.append
    unpack = _ENTRY.unpack_from
    for _ in range(count):
        n, idx, log_term = unpack(d, pos)
        pos += 20
        end = pos + n
        if end > size:
            raise MessageError("truncated message")
        append((d[pos:end], idx, log_term))
        pos = end
    message = {
        "type": "append_entries",
        "term": term,
        "commit_index": commit,
        "entries": entries,
        "prevLogIdx": prev_idx,
        "prevLogTerm": prev_term,
    }
    return message, pos


def _dec_snapshot(d: bytes) -> tuple[dict, int]:
    term, commit = _QQ.unpack_from(d, 1)
    kind = _flag(_B.unpack_from(d, 17)[0], 2)
    pos = 18
    serialized: Any
    if kind == 0:
        serialized = None
    elif kind == 1:
        serialized = False
    else:
        first, last, n = _SNAP.unpack_from(d, pos)
        pos += _SNAP.size
        if pos + n > len(d):
            raise MessageError("truncated message")
        serialized = (d[pos : pos + n], _bool_of(first), _bool_of(last))
        pos += n
    return {"type": "append_entries", "term": term, "commit_index": commit, "serialized": serialized}, pos


def _dec_next_node_idx(d: bytes) -> tuple[dict, int]:
    nxt, reset, success = _NEXT.unpack_from(d, 1)
    message = {"type": "next_node_idx", "next_node_idx": nxt, "reset": _bool_of(reset), "success": _bool_of(success)}
    return message, 11


def _dec_apply_command(d: bytes) -> tuple[dict, int]:
    m: dict[str, Any] = {"type": "apply_command"}
    pos = 2
    if _flag(_B.unpack_from(d, 1)[0], 1):
        m["request_id"] = _Q.unpack_from(d, pos)[0]
        pos += 8
    m["command"] = d[pos:]
    return m, len(d)


def _dec_apply_command_response(d: bytes) -> tuple[dict, int]:
    m: dict[str, Any] = {"type": "apply_command_response", "request_id": _Q.unpack_from(d, 1)[0]}
    flags = _flag(_B.unpack_from(d, 9)[0], 3)
    pos = 10
    if flags & 1:
        m["error"] = _Q.unpack_from(d, pos)[0]
        pos += 8
    if flags & 2:
        m["log_idx"], m["log_term"] = _QQ.unpack_from(d, pos)
        pos += 16
    return m, pos


def _dec_newer_term(d: bytes) -> tuple[dict, int]:
    (term,) = _Q.unpack_from(d, 1)
    return {"type": "newer_term", "term": term}, 9


_DECODERS: dict[int, Callable[[bytes], tuple[dict, int]]] = {
    1: _dec_request_vote,
    2: _dec_response_vote,
    3: _dec_append_entries,
    4: _dec_snapshot,
    5: _dec_next_node_idx,
    6: _dec_apply_command,
    7: _dec_apply_command_response,
    8: _dec_timeout_now,
    9: _dec_pre_vote,
    10: _dec_pre_vote_response,
    11: _dec_newer_term,
}


def decode(payload: bytes) -> dict:
    """Decode one payload made by `encode`; raise `MessageError` for anything else."""
    if not payload:
        raise MessageError("empty message")
    decoder = _DECODERS.get(payload[0])
    if decoder is None:
        raise MessageError(f"unknown message tag {payload[0]}")
    data = payload if type(payload) is bytes else bytes(payload)
    try:
        message, end = decoder(data)
    except struct.error:
        raise MessageError("truncated message") from None
    if end != len(data):
        raise MessageError(f"{len(data) - end} trailing bytes" if end < len(data) else "truncated message")
    return message


# -- pysyncobj's chunked large entries ----------------------------------------


def _latin1(text: Any, encoding: Any) -> bytes:
    if type(text) is not str or encoding != "latin1":
        raise pickle.UnpicklingError("only _codecs.encode(str, 'latin1') is allowed")
    return text.encode("latin1")


def _empty_bytes(*args: Any) -> bytes:
    if args:
        raise pickle.UnpicklingError("only bytes() is allowed")
    return b""


# Protocol 2 (pysyncobj's) has no bytes opcode: it writes bytes as
# `_codecs.encode(text, 'latin1')` and b'' as `bytes()`. Those two calls are
# the only globals a pickled log entry needs, so they are the only ones given.
_GLOBALS = {
    ("_codecs", "encode"): _latin1,
    ("__builtin__", "bytes"): _empty_bytes,
    ("builtins", "bytes"): _empty_bytes,
}


class _EntryUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        try:
            return _GLOBALS[module, name]
        except KeyError:
            raise pickle.UnpicklingError(f"global {module}.{name} refused") from None

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("persistent ids refused")


def reassemble_entry(pickled: bytes) -> tuple[bytes, int, int]:
    """The log entry in the concatenated `data` of a transmission's chunks.

    Called by the SENDING node on the pickle its own pysyncobj just made of its
    own log entry (`pickle.dumps((command, idx, term))`), never on wire bytes;
    even so it refuses any pickle that needs more than bytes, ints and tuples.
    """
    try:
        entry = _EntryUnpickler(io.BytesIO(pickled)).load()
    except Exception as e:  # any malformed pickle
        raise MessageError(f"transmission does not hold a log entry: {e}") from None
    if (type(entry) is not tuple and type(entry) is not list) or len(entry) != 3:
        raise MessageError(f"transmission holds {type(entry).__name__}, not a log entry")
    command, idx, term = entry
    if type(command) is not bytes or type(idx) is not int or type(term) is not int:
        raise MessageError("a log entry is (bytes, int, int)")
    if not (0 <= idx <= _U64_MAX and 0 <= term <= _U64_MAX):
        raise MessageError("a log entry's idx and term must be in [0, 2**64)")
    return command, idx, term
