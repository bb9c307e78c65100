"""Where each section of an encoded AMQP message lies [3.2], found without
decoding it.

A message on the wire is a run of described sections, in this order:

    header? delivery-annotations? message-annotations?
    [ properties? application-properties? body? ]   <- the bare message
    footer?

`_scan` reads each section's descriptor and the constructor and size of its
value, checks the order, and skips the value by size (a 100 MB data section
costs the same as a 10 byte one); it returns the section bounds that
message.py's `Message` decodes from lazily. `splice` builds a payload with a
new header and message annotations in front of the same bare message.
"""

from __future__ import annotations

from typing import NamedTuple

from . import codec, structs
from .definitions import SECTIONS
from .errors import DecodeError

# Section ranks, in wire order [3.2]. The three body kinds share one rank.
HEADER, DELIVERY_ANNOTATIONS, MESSAGE_ANNOTATIONS, PROPERTIES, APPLICATION_PROPERTIES, BODY, FOOTER = range(7)
_RANK_NAMES = (
    "header", "delivery-annotations", "message-annotations", "properties",
    "application-properties", "body", "footer",
)  # fmt: skip

DATA, AMQP_SEQUENCE, AMQP_VALUE = 0x75, 0x76, 0x77  # body section descriptors

_RANK = {0x70: 0, 0x71: 1, 0x72: 2, 0x73: 3, 0x74: 4, 0x75: 5, 0x76: 5, 0x77: 5, 0x78: 6}
_CODE_BY_NAME = {cls.NAME: cls.CODE for cls in SECTIONS}
_NAME_BY_CODE = {cls.CODE: cls.NAME.split(":")[1] for cls in SECTIONS} | {0x77: "amqp-value"}

_LISTS = frozenset((0x45, 0xC0, 0xD0))
_MAPS = frozenset((0xC1, 0xD1))
_ANY = frozenset(range(256))  # amqp-value: _skip rejects what is no constructor
# The constructors each section's value may have.
_ALLOWED = {
    0x70: _LISTS, 0x71: _MAPS, 0x72: _MAPS, 0x73: _LISTS, 0x74: _MAPS,
    0x75: frozenset((0xA0, 0xB0)), 0x76: _LISTS, 0x77: _ANY, 0x78: _MAPS,
}  # fmt: skip
# descriptor code -> (rank, allowed constructors), a list for the hot path
_SECTION: list[tuple[int, frozenset[int]] | None] = [None] * 256
for _code, _rank in _RANK.items():
    _SECTION[_code] = (_rank, _ALLOWED[_code])

# How to skip a value from its constructor [1.2]: the subcategory (high
# nibble) fixes the width. >= 0: that many fixed bytes; -1 / -4: a 1 or 4
# byte size follows; _DESCRIBED: a descriptor and a value follow; _INVALID:
# not a constructor of AMQP 1.0.
_INVALID, _DESCRIBED = -9, -8
_WIDTH = [_INVALID] * 256
_WIDTH[0x00] = _DESCRIBED
for _codes, _w in (
    ((0x40, 0x41, 0x42, 0x43, 0x44, 0x45), 0),
    ((0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56), 1),
    ((0x60, 0x61), 2),
    ((0x70, 0x71, 0x72, 0x73, 0x74), 4),
    ((0x80, 0x81, 0x82, 0x83, 0x84), 8),
    ((0x94, 0x98), 16),
    ((0xA0, 0xA1, 0xA3, 0xC0, 0xC1, 0xE0), -1),
    ((0xB0, 0xB1, 0xB3, 0xD0, 0xD1, 0xF0), -4),
):
    for _c in _codes:
        _WIDTH[_c] = _w
del _codes, _w, _c, _code, _rank

_u32 = structs.U32.unpack_from
_u64 = structs.U64.unpack_from


class Sizes(NamedTuple):
    """Encoded size in bytes of each part of a message; 0 when absent."""

    header: int
    delivery_annotations: int
    message_annotations: int
    properties: int
    application_properties: int
    body: int
    footer: int
    bare: int  # properties through the end of the body


# ---------------------------------------------------------------- scanning


def _skip(data: bytes, p: int, n: int, depth: int) -> int:
    """Returns the end of the value at `p` without decoding it."""
    if p >= n:
        raise DecodeError("value truncated")
    c = data[p]
    w = _WIDTH[c]
    if w >= 0:
        end = p + 1 + w
    elif w == -1:
        if p + 2 > n:
            raise DecodeError("value truncated")
        end = p + 2 + data[p + 1]
    elif w == -4:
        if p + 5 > n:
            raise DecodeError("value truncated")
        end = p + 5 + _u32(data, p + 1)[0]
    elif w == _DESCRIBED:
        if depth >= codec.MAX_NESTING:
            raise DecodeError("values nested too deeply")
        return _skip(data, _skip(data, p + 1, n, depth + 1), n, depth + 1)
    else:
        raise DecodeError(f"invalid constructor 0x{c:02x} at offset {p}")
    if end > n:
        raise DecodeError("value truncated")
    return end


def _descriptor(data: bytes, p: int, n: int) -> tuple[int, int]:
    """Reads a section descriptor other than smallulong: (code, next pos)."""
    c = data[p]
    if c == 0x80:
        if p + 9 > n:
            raise DecodeError("section descriptor truncated")
        code, end = _u64(data, p + 1)[0], p + 9
    elif c == 0x44:
        code, end = 0, p + 1
    elif c in (0xA3, 0xB3):
        end = _skip(data, p, n, 0)
        name = bytes(data[p + 2 if c == 0xA3 else p + 5 : end])
        code = _CODE_BY_NAME.get(name.decode("ascii", "replace"), -1)
        if code < 0:
            raise DecodeError(f"section descriptor {name!r} is not a message section [3.2]")
    else:
        raise DecodeError(f"a section descriptor is a ulong or a symbol, not constructor 0x{c:02x} [1.5]")
    if code not in _RANK:
        raise DecodeError(f"descriptor 0x{code:x} is not a message section [3.2]")
    return code, end


def _order_error(code: int, last: int, last_code: int) -> DecodeError:
    name = _NAME_BY_CODE[code]
    if last == FOOTER:
        return DecodeError(f"{name} section after the footer [3.2]")
    if code == last_code:
        if code == AMQP_VALUE:
            return DecodeError("a body holds at most one amqp-value section [3.2]")
        return DecodeError(f"more than one {name} section [3.2]")
    if last == BODY and _RANK[code] == BODY:
        return DecodeError(f"{name} section in a body of {_NAME_BY_CODE[last_code]} sections [3.2]")
    return DecodeError(f"{name} section after {_NAME_BY_CODE[last_code]} [3.2]")


# The layout of the last message scanned, when its first bytes fix it:
# (size, those bytes, bounds, body code). A publisher's messages repeat one layout
# (the same header, properties and a body of one size): see _scan.
_last_layout: tuple = (-1, b"", (), 0)


def _scan(data: bytes) -> tuple[tuple[int, ...], int]:
    """Finds the sections of a message.

    Returns (bounds, body_code): the sections of rank r occupy
    data[bounds[r]:bounds[r + 1]] (empty when absent), and body_code is the
    descriptor of the body sections, or 0 without a body. The bounds are a
    tuple: one may serve many messages.

    The scan reads each section's descriptor, constructor and size, never
    its value (but for amqp-value, skipped by walking it). When it walks
    nothing, what it reads lies before the last section's value: a message
    of the same size that starts with the same bytes up to there has the
    same bounds, and is answered from `_last_layout` without a scan.
    """
    global _last_layout
    n = len(data)
    last_layout = _last_layout
    if last_layout[0] == n and data.startswith(last_layout[1]):
        return last_layout[2], last_layout[3]
    bounds = [0, 0, 0, 0, 0, 0, 0, n]
    fixed = True  # all read so far lies before `value_start`
    value_start = 0
    pos = 0
    last = -1  # rank of the previous section
    last_code = 0
    body_code = 0
    while pos < n:
        if data[pos]:
            raise DecodeError(f"expected a described section at offset {pos}, got 0x{data[pos]:02x} [3.2]")
        if pos + 4 > n:  # 0x00, a descriptor and a value take at least 4 bytes
            raise DecodeError(f"message section truncated at offset {pos}")
        if data[pos + 1] == 0x53:  # smallulong: what every client sends
            code = data[pos + 2]
            p = pos + 3
        else:
            code, p = _descriptor(data, pos + 1, n)
            if p >= n:
                raise DecodeError("message section truncated")
            fixed = False
        section = _SECTION[code]
        if section is None:
            raise DecodeError(f"descriptor 0x{code:x} is not a message section [3.2]")
        rank, allowed = section
        if rank > last:
            while last < rank:  # ranks skipped over are empty
                last += 1
                bounds[last] = pos
            last_code = code
            if rank == 5:  # BODY (literals: this loop is the hot path)
                body_code = code
        elif rank != 5 or code != last_code or code == 0x77:  # only data and amqp-sequence repeat
            raise _order_error(code, last, last_code)
        c = data[p]
        if c not in allowed:
            raise DecodeError(f"{_NAME_BY_CODE[code]} section holds constructor 0x{c:02x} [3.2]")
        # skip the value by its size: _skip inlined for the sized
        # constructors that all sections but amqp-value have
        w = _WIDTH[c]
        if w == -1:
            if p + 2 > n:
                raise DecodeError("message section truncated")
            value_start = p + 2
            pos = value_start + data[p + 1]
        elif w == -4:
            if p + 5 > n:
                raise DecodeError("message section truncated")
            value_start = p + 5
            pos = value_start + _u32(data, p + 1)[0]
        elif w >= 0:  # fixed width (a list0 properties section, a bare amqp-value)
            value_start = p + 1
            pos = value_start + w
        else:
            pos = _skip(data, p, n, 0)
            fixed = False
        if pos > n:
            raise DecodeError("message section truncated")
    while last < 6:  # FOOTER
        last += 1
        bounds[last] = n
    layout = tuple(bounds)
    if fixed and n:
        _last_layout = (n, data[:value_start], layout, body_code)
    return layout, body_code


def splice(payload: bytes, bounds: tuple[int, ...], header: bytes | None, annotations: bytes | None,
           keep_da: bool) -> tuple[bytes, tuple[int, ...]]:  # fmt: skip
    """New payload and bounds: header (new, or the old one when None), the
    delivery annotations if kept, message annotations (new or old), then the
    rest of `payload` unchanged."""
    b = bounds
    mv = memoryview(payload)
    h = mv[b[0] : b[1]] if header is None else header
    da = mv[b[1] : b[2]] if keep_da else b""
    ma = mv[b[2] : b[3]] if annotations is None else annotations
    out = b"".join((h, da, ma, mv[b[3] :]))
    b1 = len(h)
    b2 = b1 + len(da)
    b3 = b2 + len(ma)
    shift = b3 - b[3]
    return out, (0, b1, b2, b3, b[4] + shift, b[5] + shift, b[6] + shift, b[7] + shift)
