"""node/workers/link.py: items cross a real Unix socket between two workers in
order, a turn's items in one frame, and a peer killed with -9 is reported
once with nothing more accepted."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys

from node.workers.link import WorkerLink

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def pub(i: int, body: bytes = b"x" * 12) -> list:
    return ["pub", "/", "q1", i, body, True, None, "", ["q1"], None]


class Collect:
    """Received items, and a future done once `want` of them arrived."""

    def __init__(self, loop, want: int) -> None:
        self.items: list = []
        self.want = want
        self.done = loop.create_future()

    def __call__(self, items: list) -> None:
        self.items.extend(items)
        if len(self.items) >= self.want and not self.done.done():
            self.done.set_result(None)


async def pair(loop, got: Collect, lost: list):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    _, left = await loop.create_unix_connection(lambda: WorkerLink(loop, lambda items: None, lost.append), sock=a)
    _, right = await loop.create_unix_connection(lambda: WorkerLink(loop, got, lost.append), sock=b)
    return left, right


def test_a_turns_items_cross_in_order_in_one_frame():
    async def main():
        loop = asyncio.get_running_loop()
        got = Collect(loop, 501)
        left, right = await pair(loop, got, [])
        for i in range(500):
            assert left.send(pub(i))
        left.send(["conf", 7, "accepted"])
        await got.done
        got = got.items
        assert [it[3] for it in got[:500]] == list(range(500))
        assert got[500] == ("conf", 7, "accepted")
        assert left.frames_sent == 1
        left.close()
        right.close()

    asyncio.run(asyncio.wait_for(main(), 10))


def test_a_large_turn_is_cut_into_frames():
    async def main():
        loop = asyncio.get_running_loop()
        got = Collect(loop, 10)
        left, right = await pair(loop, got, [])
        body = b"y" * (64 << 10)
        for i in range(10):  # 640 KB in one turn: cut near every 256 KB
            left.send(pub(i, body))
        await got.done
        got = got.items
        assert [it[3] for it in got] == list(range(10))
        assert all(it[4] == body for it in got)
        assert left.frames_sent == 3
        left.close()
        right.close()

    asyncio.run(asyncio.wait_for(main(), 10))


def test_a_garbled_frame_loses_the_link():
    async def main():
        loop = asyncio.get_running_loop()
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        lost = loop.create_future()
        _, link = await loop.create_unix_connection(
            lambda: WorkerLink(loop, lambda items: None, lambda e: lost.set_result(e)), sock=b
        )
        a.sendall(b"\x00\x00\x00\x03\xff\x01\x02")  # a queue.proxy record cut short
        reason = await lost
        assert isinstance(reason, ValueError)
        assert link.send(pub(1)) is False
        a.close()

    asyncio.run(asyncio.wait_for(main(), 10))


CHILD = """
import asyncio, socket, sys
from node.workers.link import WorkerLink
async def main():
    loop = asyncio.get_running_loop()
    sock = socket.socket(fileno=int(sys.argv[1]))
    done = loop.create_future()
    def on_items(items):
        for it in items:
            link.send(["conf", it[3], "accepted"])
    _, link = await loop.create_unix_connection(lambda: WorkerLink(loop, on_items, done.set_result), sock=sock)
    await done
asyncio.run(main())
"""


def test_a_peer_process_answers_and_its_kill_is_reported_once():
    async def main():
        loop = asyncio.get_running_loop()
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        # a real process on the other end (cwd: `-c` puts the repository first on its path)
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(b.fileno())], pass_fds=[b.fileno()], cwd=ROOT)
        b.close()
        confs = Collect(loop, 100)
        lost: list = []
        gone = loop.create_future()

        def on_lost(e):
            lost.append(e)
            gone.set_result(None)

        _, link = await loop.create_unix_connection(lambda: WorkerLink(loop, confs, on_lost), sock=a)
        for i in range(100):
            link.send(pub(i))
        await confs.done
        assert [c[1] for c in confs.items] == list(range(100))
        child.send_signal(signal.SIGKILL)
        await gone
        assert len(lost) == 1
        assert link.send(pub(101)) is False
        child.wait()

    asyncio.run(asyncio.wait_for(main(), 20))
