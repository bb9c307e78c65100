"""What the workers of one node say to each other besides queue traffic, and
where they listen (issue 36, docs/architecture.md "Workers").

The control link between the node worker (worker 0) and each other worker is
a `WorkerLink` with the `CONTROL` codec: each frame is one AMQP-encoded list
of items, each item a list `[name, field, ...]` of AMQP values (explicit,
never pickled). Control items are rare next to messages (a metadata change, a
proposal, a question from the HTTP API), so no layout of their own is worth
having.

Workers reach each other at abstract Unix socket names (Linux: no file, no
108-byte path limit, gone with the process), derived from the node's data
directory so two nodes on one host never meet. The sockets are made here and
handed to the loop: uvloop refuses an abstract name given as a path.

An abstract name has no file permissions: any local process could dial it and
speak as a worker (propose metadata, publish into any queue). So a listener
takes only peers of the node's own user, as the kernel vouches for them
(SO_PEERCRED), and hangs up on anyone else; that user can read the data
directory anyway."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import socket
import struct
from collections.abc import Callable

from amqp import codec
from amqp.errors import DecodeError

from .link import LinkCodec

__all__ = ["CONTROL", "address", "dial", "listen", "same_user"]

log = logging.getLogger("warren.workers")
_UCRED = struct.Struct("3i")  # pid, uid, gid


def _encode(items: list) -> bytes:
    return codec.dumps(items)


def _decode(data: bytes) -> list:
    try:
        items = codec.loads(data)
    except DecodeError as e:
        raise ValueError(f"a control frame that is not AMQP: {e}") from None
    if not isinstance(items, list) or not all(isinstance(it, list) and it and isinstance(it[0], str) for it in items):
        raise ValueError("a control frame that is not a list of named items")
    return items


CONTROL = LinkCodec(_encode, _decode)


def address(data_dir: str, name: str) -> str:
    """The abstract socket name of `name` ("control", "worker-1", ...) for the node in `data_dir`."""
    node = hashlib.sha256(os.path.realpath(data_dir).encode()).hexdigest()[:20]
    return f"\0warren-{node}-{name}"


def same_user(uid: int) -> bool:
    """Whether a peer the kernel says runs as `uid` may speak as a worker of this node."""
    return uid == os.geteuid()


def _peer_uid(transport: asyncio.BaseTransport) -> int | None:
    sock = transport.get_extra_info("socket")
    if sock is None:
        return None
    _pid, uid, _gid = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    return uid


def _own_user_only(factory: Callable[[], asyncio.Protocol], where: str) -> Callable[[], asyncio.Protocol]:
    def make() -> asyncio.Protocol:
        protocol = factory()
        made = protocol.connection_made

        def connection_made(transport: asyncio.BaseTransport) -> None:
            uid = _peer_uid(transport)
            if uid is None or not same_user(uid):
                log.warning("%s: refused a peer running as uid %s, not this node's user", where[1:], uid)
                transport.abort()
                return
            made(transport)

        protocol.connection_made = connection_made  # type: ignore[method-assign]
        return protocol

    return make


async def listen(loop: asyncio.AbstractEventLoop, factory: Callable[[], asyncio.Protocol],
                 where: str) -> asyncio.AbstractServer:  # fmt: skip
    """A listener at `where` for peers of this node's user only (see the module docstring)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(where)
        sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return await loop.create_unix_server(_own_user_only(factory, where), sock=sock)


async def dial(loop: asyncio.AbstractEventLoop, factory: Callable[[], asyncio.Protocol],
               where: str) -> asyncio.Protocol:  # fmt: skip
    """The protocol of a new connection to `where`; OSError when nothing listens there."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        await loop.sock_connect(sock, where)
    except OSError:
        sock.close()
        raise
    _, protocol = await loop.create_unix_connection(factory, sock=sock)
    return protocol
