"""The workers' sockets at abstract names have no file permissions, so they check who
dials them (node/workers/control.py, handover.py): a process of another user (here
`nobody`, uid 65534, a real process) is hung up on at the worker link's listener, and its
handover datagram is dropped with the socket it carried; the node's own user gets through."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest
import uvloop
from eventually import until  # tests/support/

from amqp import codec
from node.workers.control import address, listen
from node.workers.handover import Handover

NOBODY = 65534
SYSTEM_PYTHON = "/usr/bin/python3"  # the clients use the standard library only; every user may run this one
pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists(SYSTEM_PYTHON),
                                reason="needs root and the system's python3 to run a client as another user")

DIAL = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect("\0" + sys.argv[1])
s.settimeout(10)
try:
    print("closed" if s.recv(1) == b"" else "open")
except ConnectionResetError:
    print("closed")
"""

HAND = r"""
import array, socket, sys
a, b = socket.socketpair()
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
payload = bytes.fromhex(sys.argv[2])
s.sendmsg([payload], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [b.fileno()]))], 0, "\0" + sys.argv[1])
print("sent")
"""


async def run_as(uid: int | None, code: str, *args: str) -> str:
    def run() -> str:
        python = sys.executable if uid is None else SYSTEM_PYTHON
        done = subprocess.run([python, "-c", code, *args], user=uid, cwd="/", capture_output=True, text=True,
                              timeout=30)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    return await asyncio.get_running_loop().run_in_executor(None, run)


class Recorder(asyncio.Protocol):
    def __init__(self, made: list) -> None:
        self.made = made

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.made.append(transport)
        transport.close()  # the dialler reads end-of-file


def test_a_worker_link_listener_hangs_up_on_another_user(tmp_path):
    async def main():
        where = address(str(tmp_path), "link-test")
        made: list = []
        server = await listen(asyncio.get_running_loop(), lambda: Recorder(made), where)
        assert await run_as(NOBODY, DIAL, where[1:]) == "closed"  # (an abstract name: "\0" + the rest)
        assert made == []  # the protocol never saw it
        assert await run_as(None, DIAL, where[1:]) == "closed"
        assert len(made) == 1  # this user's dial reached the protocol
        server.close()

    uvloop.run(main())


def test_a_handover_datagram_from_another_user_is_dropped_with_its_socket(tmp_path):
    async def main():
        got: list = []
        receiving = Handover(asyncio.get_running_loop(), str(tmp_path), 0, lambda sock, taken: got.append(taken),
                             lambda vhost, name: None)  # fmt: skip
        receiving.start()
        where = address(str(tmp_path), "handover-0")[1:]  # (an abstract name: "\0" + the rest)
        intruder = codec.dumps(["admin", b"AMQP", [0, 0, 0, 0, 0]]).hex()
        ours = codec.dumps(["guest", b"AMQP", [0, 0, 0, 0, 0]]).hex()
        assert await run_as(NOBODY, HAND, where, intruder) == "sent"  # first: it would be taken first
        assert await run_as(None, HAND, where, ours) == "sent"
        await until(lambda: got, "this user's handover")
        assert [t.user for t in got] == ["guest"] and receiving.taken == 1
        receiving.close()

    uvloop.run(main())
