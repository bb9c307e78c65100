"""One worker-to-worker link of a node with several worker processes (issue
36): a Unix stream socket carrying, per loop turn, the items the queue proxy
sends a peer (`["pub", ...]`, `["conf", ...]`, node/vhosts/remote_queue.py)
as length-prefixed `queue.proxy` batch records (node/vhosts/proxy_records.py).

Batching per turn is what makes the hop cheap: bench/worker_hop.py measured
15 µs of CPU (both processes) for a record sent alone and 3-4 µs for one in a
batch of 16 or more. Items arrive in the order they were sent; when the
socket ends (the peer exited, or was killed), `on_lost` is told once and
what was queued but not written is dropped: the proxy fails what it carried,
as it does when a stream to another node ends.

A link carries another codec's records when given one: the control link
between the node worker and each other worker (node/workers/control.py)
carries AMQP-encoded lists, rare next to the proxy's items.

Not wired into the node yet: `warren server` is one process until the
supervisor and the per-slot stores exist (docs/architecture.md)."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from typing import NamedTuple

from node.vhosts import proxy_records

__all__ = ["FRAME_BYTES", "PROXY_RECORDS", "LinkCodec", "WorkerLink"]

FRAME_BYTES = 256 << 10  # a turn's items are cut into frames of about this size, as between nodes
MAX_FRAME = 64 << 20  # a longer length prefix is a broken peer, not a frame
_LEN = struct.Struct(">I")


class LinkCodec(NamedTuple):
    """How a frame's items become bytes and back; `decode` raises ValueError on bytes it cannot read."""

    encode: Callable[[list], bytes]
    decode: Callable[[bytes], list]


PROXY_RECORDS = LinkCodec(proxy_records.encode_batch, proxy_records.decode_message)


class WorkerLink(asyncio.Protocol):
    """Both directions of one worker pair's socket; `on_items(items)` gets each
    received frame's items, `on_lost(reason)` the end of the socket."""

    def __init__(self, loop: asyncio.AbstractEventLoop, on_items: Callable[[list], None],
                 on_lost: Callable[[Exception | None], None], codec: LinkCodec = PROXY_RECORDS) -> None:  # fmt: skip
        self._loop = loop
        self._codec = codec
        self._on_items = on_items
        self._on_lost = on_lost
        self._transport: asyncio.Transport | None = None
        self._outbox: list[list] = []
        self._outbox_bytes = 0
        self._frames: list[bytes] = []
        self._flush_scheduled = False
        self._buffer = bytearray()
        self._lost = False
        self.frames_sent = 0  # for tests and the bench: how many frames the items went in

    @property
    def lost(self) -> bool:
        return self._lost

    # -- sending ---------------------------------------------------------------
    def send(self, item: list) -> bool:
        """Queue `item` for the end of this loop turn; False once the link is lost."""
        if self._lost:
            return False
        self._outbox.append(item)
        self._outbox_bytes += _size(item)
        if self._outbox_bytes >= FRAME_BYTES:
            self._cut()
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)
        return True

    def _cut(self) -> None:
        record = self._codec.encode(self._outbox)
        self._frames.append(_LEN.pack(len(record)))
        self._frames.append(record)
        self._outbox = []
        self._outbox_bytes = 0

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._outbox:
            self._cut()
        if self._transport is None:  # items sent before the socket is up leave once it is
            return
        frames, self._frames = self._frames, []
        if self._lost or not frames:
            return
        self.frames_sent += len(frames) // 2
        self._transport.write(b"".join(frames))  # one write per turn

    # -- asyncio.Protocol ------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        if self._frames:
            self._flush()

    def data_received(self, data: bytes) -> None:
        buf = self._buffer
        buf += data
        pos = 0
        end = len(buf)
        try:
            while end - pos >= 4:
                (n,) = _LEN.unpack_from(buf, pos)
                if n > MAX_FRAME:
                    raise ValueError(f"worker link frame of {n} bytes (at most {MAX_FRAME})")
                if end - pos - 4 < n:
                    break
                items = self._codec.decode(bytes(buf[pos + 4 : pos + 4 + n]))
                pos += 4 + n
                self._on_items(items)
        except ValueError as e:  # a frame this build cannot read: the link is unusable
            del buf[:pos]
            self._lose(e)
            if self._transport is not None:
                self._transport.abort()
            return
        del buf[:pos]

    def connection_lost(self, exc: Exception | None) -> None:
        self._lose(exc)

    def _lose(self, reason: Exception | None) -> None:
        if self._lost:
            return
        self._lost = True
        self._outbox = []
        self._frames = []
        self._on_lost(reason)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


def _size(item: list) -> int:
    """Roughly the bytes `item` takes in a record: its bytes fields, and a few per other field."""
    return sum(len(f) if isinstance(f, bytes) else 8 for f in item)
