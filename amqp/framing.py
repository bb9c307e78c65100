"""Protocol headers and frames [2.2], [2.3], parsed incrementally from a byte
stream that may be cut anywhere.

A frame is: size (4), doff (1), type (1), channel (2), extended header
(doff * 4 - 8 bytes, ignored), then the body: one performative and, for a
transfer, the payload. A frame of size 8 with no body is a heartbeat.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import codec, structs
from .definitions import Error, Transfer
from .errors import DecodeError, FramingError
from .fastpath import decode_transfer

# the table's layouts, assigned and not imported (amqp/structs.py says why)
_frame_header = structs.FRAME_HEADER

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_HEADER = b"AMQP\x03\x01\x00\x00"
TLS_HEADER = b"AMQP\x02\x01\x00\x00"

FRAME_AMQP = 0x00
FRAME_SASL = 0x01
MIN_MAX_FRAME_SIZE = 512  # [2.7.1]


@dataclass(slots=True)
class ProtocolHeader:
    """The 8 bytes a peer opened with [2.2] (the connection decides whether it speaks them)."""

    raw: bytes


@dataclass(slots=True)
class Frame:
    type: int
    channel: int
    performative: Any  # None for a heartbeat
    payload: bytes = b""


def encode_frame(
    channel: int, performative: Any, payload: bytes | memoryview = b"", type_: int = FRAME_AMQP
) -> bytes:
    buf = bytearray(8)
    performative.encode_into(buf)
    if payload:
        buf += payload
    _frame_header.pack_into(buf, 0, len(buf), 2, type_, channel)
    return bytes(buf)


HEARTBEAT = b"\x00\x00\x00\x08\x02\x00\x00\x00"


class FrameParser:
    """Turns a byte stream into ProtocolHeader and Frame items.

    `expect_header` is set by the connection when the next bytes must be a
    protocol header (at the start, and after a successful SASL outcome [5.3.2]).
    `buf` and `pos` (the bytes not yet taken start there) are public for
    amqp/transfer_run.py, which takes a publisher's frames where they lie and
    moves `pos` past them.
    """

    def __init__(self, max_frame_size: int = 0xFFFFFFFF):
        self.buf = bytearray()
        self.pos = 0
        self.max_frame_size = max_frame_size
        self.expect_header = True

    def feed(self, data: bytes) -> None:
        if self.pos and self.pos == len(self.buf):
            self.buf.clear()
            self.pos = 0
        elif self.pos > 65536:
            del self.buf[: self.pos]
            self.pos = 0
        self.buf += data

    @property
    def buffered(self) -> int:
        return len(self.buf) - self.pos

    def next(self) -> ProtocolHeader | Frame | None:
        """The next complete item, or None when more bytes are needed."""
        buf, pos = self.buf, self.pos
        avail = len(buf) - pos
        if self.expect_header:
            if avail < 8:
                if avail and bytes(buf[pos : pos + min(avail, 4)]) != b"AMQP"[: min(avail, 4)]:
                    raise FramingError("expected an AMQP protocol header")
                return None
            raw = bytes(buf[pos : pos + 8])
            self.pos = pos + 8
            if raw[:4] != b"AMQP":
                raise FramingError("expected an AMQP protocol header")
            self.expect_header = False
            return ProtocolHeader(raw)
        if avail < 8:
            return None
        size, doff, type_, channel = _frame_header.unpack_from(buf, pos)
        if size < 8 or doff < 2 or doff * 4 > size:
            raise FramingError(f"malformed frame header (size {size}, doff {doff})")
        if size > self.max_frame_size:
            raise FramingError(f"frame of {size} bytes exceeds max-frame-size {self.max_frame_size}")
        if type_ not in (FRAME_AMQP, FRAME_SASL):
            raise FramingError(f"unknown frame type {type_}")
        if avail < size:
            return None
        body_start = pos + doff * 4
        end = pos + size
        self.pos = end
        if body_start == end:
            return Frame(type_, channel, None)
        body = bytes(buf[body_start:end])
        fast = decode_transfer(body) if body[2:3] == b"\x14" else None
        if fast is not None:
            return Frame(type_, channel, fast[0], body[fast[1] :])
        performative, after = codec.decode(body)
        if not hasattr(performative, "FIELDS"):
            raise DecodeError("frame body is not a performative")
        return Frame(type_, channel, performative, body[after:])


MAX_DESCRIPTION = 256  # UTF-8 bytes; keeps CLOSE/END/DETACH within a 512-byte frame


def bounded_error(condition: str, description: str | None = None) -> Any:
    """The error field of a CLOSE, END or DETACH. Descriptions may quote peer
    input (a decode error shows the bad value), so they are cut short: the
    frame must fit the peer's max-frame-size, which may be 512 [2.7.1]."""
    if description is not None:
        raw = description.encode("utf-8", "replace")
        if len(raw) > MAX_DESCRIPTION:
            description = raw[: MAX_DESCRIPTION - 3].decode("utf-8", "ignore") + "..."
    return Error(condition=condition, description=description)


def transfer_frames(channel: int, first: Transfer, payload: bytes, limit: int) -> list[bytes] | None:
    """The frames of one delivery under the peer's max-frame-size `limit`:
    one frame, or [2.6.14] the TRANSFER `first` with more=true and as much
    payload as fits, then continuation frames that repeat only the handle.
    None when not even the performative fits."""
    frame = encode_frame(channel, first, payload)
    if len(frame) <= limit:
        return [frame]
    if limit - (len(frame) - len(payload)) <= 0:
        return None
    first.more = True
    view = memoryview(payload)
    chunk_room = limit - len(encode_frame(channel, Transfer(handle=first.handle, more=True)))
    head_room = limit - len(encode_frame(channel, first))
    frames = [encode_frame(channel, first, view[:head_room])]
    pos = head_room
    while pos < len(payload):
        end = pos + chunk_room
        frames.append(encode_frame(channel, Transfer(handle=first.handle, more=end < len(payload)), view[pos:end]))
        pos = end
    return frames
