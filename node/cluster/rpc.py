"""Request/response between nodes over the cluster transport's node messages.

The cluster's own calls (join_cluster asks a seed for its members, then to
add this node) need no extra port: a request is a node message on channel
"cluster.rpc", its reply one on "cluster.rpc.reply", both JSON objects

    {"v": 1, "id": N, "method": "members", "args": {...}}
    {"v": 1, "id": N, "ok": true, "result": {...}}   /   {"v": 1, "id": N, "ok": false, "error": "...", "status": 409}

(explicit and versioned, never pickled). The sender of a node message is
the peer that opened the stream with the cluster secret, so a handler can
trust `peer`. Node messages go out only on this node's own stream to a peer,
so both sides keep ("pin") a stream to the other while a call is open;
pins are counted, and a peer is released when its last call ends (a Raft
group that shares the peer keeps the stream anyway).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from raft.transport import NodeTransport

__all__ = ["NodeRpc", "RpcError", "RpcUnreachable"]

log = logging.getLogger("warren.cluster")

CHANNEL = "cluster.rpc"
REPLY_CHANNEL = "cluster.rpc.reply"
VERSION = 1
REPLY_LINGER = 0.1  # seconds a reply's stream stays pinned after the send, so the flush takes it

Handler = Callable[[str, str, dict], Awaitable[dict]]  # (peer, method, args) -> result


class RpcError(Exception):
    """The peer answered with an error; `status` is the HTTP-like status it gave."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class RpcUnreachable(Exception):
    """No stream to the peer, or no answer, within the deadline."""


class NodeRpc:
    """Calls to peers and answers to theirs; `handler` serves incoming calls."""

    def __init__(self, transport: NodeTransport, handler: Handler) -> None:
        self._nt = transport
        self._handler = handler
        self._loop = asyncio.get_running_loop()
        self._calls: dict[int, asyncio.Future] = {}
        self._ids = 0
        self._pins: dict[str, int] = {}
        self._tasks: set[asyncio.Task] = set()
        self._closed = False
        # other users of node messages, by channel: handler(peer, payload)
        self.channels: dict[str, Callable[[str, bytes], None]] = {}
        transport.on_node_message = self._on_message

    async def call(self, peer: str, method: str, args: dict, deadline: float) -> dict:
        """The peer's result for `method(args)`; raises RpcError or RpcUnreachable."""
        self._ids += 1
        call_id = self._ids
        fut = self._calls[call_id] = self._loop.create_future()
        try:
            async with self._pinned(peer):
                await self._until_connected(peer, deadline)
                self._send(peer, CHANNEL, {"id": call_id, "method": method, "args": args})
                try:  # timeout_at, not wait_for: see Proposer.submit (a cancellation is never lost)
                    async with asyncio.timeout_at(deadline):
                        reply = await fut
                except TimeoutError:
                    raise RpcUnreachable(f"{peer} did not answer {method!r} in time") from None
        finally:
            self._calls.pop(call_id, None)
        if not reply.get("ok"):
            raise RpcError(f"{peer}: {reply.get('error')}", int(reply.get("status", 400)))
        return reply.get("result") or {}

    async def close(self) -> None:
        self._closed = True
        for fut in self._calls.values():
            if not fut.done():
                fut.set_exception(RpcUnreachable("the node is stopping"))
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- internals ----------------------------------------------------------------

    def _send(self, peer: str, channel: str, msg: dict) -> None:
        self._nt.send_node_message(peer, channel, json.dumps({"v": VERSION, **msg}).encode())

    @contextlib.asynccontextmanager
    async def _pinned(self, peer: str):
        self._pins[peer] = self._pins.get(peer, 0) + 1
        if self._pins[peer] == 1:
            self._nt.add_peer(peer)
        try:
            yield
        finally:
            self._pins[peer] -= 1
            if not self._pins[peer]:
                del self._pins[peer]
                if not self._closed:
                    self._nt.remove_peer(peer)

    async def _until_connected(self, peer: str, deadline: float) -> None:
        while not self._nt.is_connected(peer):
            if self._loop.time() >= deadline:
                raise RpcUnreachable(f"cannot reach {peer} (is it running, and does it share this node's"
                                     " cluster secret?)")  # fmt: skip
            await asyncio.sleep(0.02)

    def _on_message(self, peer: str, channel: str, payload: bytes) -> None:
        other = self.channels.get(channel)
        if other is not None:
            other(peer, payload)
            return
        try:
            msg = json.loads(payload)
            if not isinstance(msg, dict) or msg.get("v") != VERSION:
                raise ValueError(f"not a version {VERSION} cluster message")
        except ValueError as e:
            log.warning("dropped a %r message from %s: %s", channel, peer, e)
            return
        if channel == REPLY_CHANNEL:
            fut = self._calls.get(msg.get("id"))
            if fut is not None and not fut.done():
                fut.set_result(msg)
        elif channel == CHANNEL and not self._closed:
            task = self._loop.create_task(self._serve(peer, msg), name=f"warren-cluster-rpc-{peer}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            log.warning("dropped a message from %s on unknown channel %r", peer, channel)

    async def _serve(self, peer: str, msg: dict) -> None:
        method = msg.get("method")
        reply: dict[str, Any] = {"id": msg.get("id"), "ok": True}
        try:
            reply["result"] = await self._handler(peer, str(method), msg.get("args") or {})
        except asyncio.CancelledError:
            raise
        except Exception as e:
            reply.update(ok=False, error=str(e), status=getattr(e, "status", 503))
        try:
            async with self._pinned(peer):
                await self._until_connected(peer, self._loop.time() + 10.0)
                self._send(peer, REPLY_CHANNEL, reply)
                await asyncio.sleep(REPLY_LINGER)
        except RpcUnreachable as e:
            log.warning("could not answer %s's %r: %s", peer, method, e)
