"""node/workers/handover.py: a connection's socket travels between two workers' handover
ends (real Unix datagram sockets, real TCP connections): the receiving end gets the very
connection with what travelled with it; a send to a worker that is not there, or with
more kept than a datagram takes, fails and leaves the connection with its sender."""

from __future__ import annotations

import asyncio
import socket

import uvloop
from eventually import until  # tests/support/

from node.workers.handover import MAX_REPLAY, Handover, TakenOver


def ends(data_dir: str, got: list) -> tuple[Handover, Handover]:
    loop = asyncio.get_running_loop()
    queues = {("/", "q"): 0}
    receiving = Handover(loop, data_dir, 0, lambda sock, taken: got.append((sock, taken)),
                         lambda vhost, name: queues.get((vhost, name)))  # fmt: skip
    sending = Handover(loop, data_dir, 1, lambda sock, taken: None, lambda vhost, name: queues.get((vhost, name)))
    receiving.start()
    sending.start()
    return receiving, sending


def tcp_pair() -> tuple[socket.socket, socket.socket]:
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    listener.close()
    return client, server


def test_a_socket_handed_over_is_the_same_connection_with_its_bytes_and_counters(tmp_path):
    async def main():
        got: list[tuple[socket.socket, TakenOver]] = []
        receiving, sending = ends(str(tmp_path), got)
        client, server = tcp_pair()
        assert sending.worker_of("/", "q") == 0 and receiving.worker_of("/", "q") is None
        assert sending.worker_of("/", "elsewhere") is None
        assert sending.send(0, server.fileno(), "alice", b"AMQP\x03\x01\x00\x00...", [1, 2, 3, 4, 5])
        server.close()  # the sender's descriptor goes; the connection does not
        await until(lambda: got, "the handover")
        moved, taken = got[0]
        assert (taken.user, taken.replay, taken.counters) == ("alice", b"AMQP\x03\x01\x00\x00...", [1, 2, 3, 4, 5])
        assert moved.getpeername() == client.getsockname()
        moved.setblocking(True)
        client.sendall(b"ping")
        assert moved.recv(4) == b"ping"
        moved.sendall(b"pong")
        assert client.recv(4) == b"pong"
        assert (sending.handed, receiving.taken) == (1, 1)
        moved.close()
        client.close()
        receiving.close()
        sending.close()

    uvloop.run(main())


def test_a_send_nobody_can_take_fails_and_leaves_the_connection_with_its_sender(tmp_path):
    async def main():
        got: list = []
        receiving, sending = ends(str(tmp_path), got)
        client, server = tcp_pair()
        assert not sending.send(2, server.fileno(), "alice", b"x", [0] * 5)  # no worker 2 listens
        assert not sending.send(0, server.fileno(), "alice", b"x" * (MAX_REPLAY + 1), [0] * 5)
        receiving.close()  # worker 0 restarting
        assert not sending.send(0, server.fileno(), "alice", b"x", [0] * 5)
        assert got == [] and sending.handed == 0  # a failed send leaves nothing in flight
        client.sendall(b"still here")
        assert server.recv(10) == b"still here"
        client.close()
        server.close()
        sending.close()

    uvloop.run(main())
