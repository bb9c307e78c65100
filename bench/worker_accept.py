#!/usr/bin/env python3
"""How a node with N worker processes could spread client connections
(issue 36's design), measured two ways:

1. `SO_REUSEPORT`: N processes each bind and listen on the same port; the
   kernel hashes each new connection (source address and port) to one of the
   listeners. The table gives how many of C connections each worker got
   (evenness) and the connect rate.
2. One acceptor passing each accepted socket to a worker over a Unix socket
   (`SCM_RIGHTS`, socket.send_fds): the acceptor's CPU per connection passed
   and the worker's per connection received, with round-robin spreading (even
   by construction).

    .venv/bin/python bench/worker_accept.py [--workers 2,4,16] [--connections 2000]

Linux only (SO_REUSEPORT's balancing and SCM_RIGHTS are Linux behaviours here).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from multiprocessing import Event, Process, Queue


def reuseport_worker(port: int, ready, stop, out: Queue, index: int) -> None:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind(("127.0.0.1", port))
    s.listen(4096)
    s.settimeout(0.05)
    ready.set()
    held = []
    while not stop.is_set():
        try:
            c, _ = s.accept()
            held.append(c)
        except TimeoutError:
            pass
    # drain what the backlog still holds
    s.setblocking(False)
    try:
        while True:
            c, _ = s.accept()
            held.append(c)
    except BlockingIOError:
        pass
    out.put((index, len(held)))


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def reuseport(workers: int, connections: int) -> tuple[list[int], float]:
    port = free_port()
    out: Queue = Queue()
    stop = Event()
    procs = []
    for i in range(workers):
        ready = Event()
        p = Process(target=reuseport_worker, args=(port, ready, stop, out, i))
        p.start()
        ready.wait()
        procs.append(p)
    clients = []
    t0 = time.perf_counter()
    for _ in range(connections):
        c = socket.create_connection(("127.0.0.1", port))
        clients.append(c)
    wall = time.perf_counter() - t0
    time.sleep(0.3)  # the workers' accept loops poll every 50 ms; no event to await across processes here
    stop.set()
    counts = [0] * workers
    for _ in range(workers):
        i, n = out.get()
        counts[i] = n
    for p in procs:
        p.join()
    for c in clients:
        c.close()
    return counts, connections / wall


def fd_receiver(sock: socket.socket, count: int, out: Queue) -> None:
    cpu = time.process_time()
    got = 0
    while got < count:
        _, fds, _, _ = socket.recv_fds(sock, 16, 64)
        for fd in fds:
            socket.socket(fileno=fd).detach()  # adopt, as the worker's loop would, then let go
            os.close(fd)
        got += len(fds)
    out.put(time.process_time() - cpu)


def scm_rights(connections: int) -> tuple[float, float]:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    out: Queue = Queue()
    p = Process(target=fd_receiver, args=(b, connections, out))
    p.start()
    b.close()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4096)
    port = listener.getsockname()[1]
    clients = []
    accepted = []
    for _ in range(connections):
        clients.append(socket.create_connection(("127.0.0.1", port)))
        accepted.append(listener.accept()[0])
    cpu = time.process_time()
    for s in accepted:
        socket.send_fds(a, [b"c"], [s.fileno()])
        s.close()
    send_cpu = time.process_time() - cpu
    recv_cpu = out.get()
    p.join()
    for c in clients:
        c.close()
    return send_cpu / connections * 1e6, recv_cpu / connections * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", default="2,4,16")
    ap.add_argument("--connections", type=int, default=2000)
    args = ap.parse_args()
    if sys.platform != "linux":
        raise SystemExit("Linux only")
    print(f"{args.connections} connections from 127.0.0.1, load average {os.getloadavg()[0]:.1f}")
    print("| SO_REUSEPORT workers | connections per worker | max/mean | connects/s |")
    print("|---|---|---|---|")
    for n in (int(x) for x in args.workers.split(",")):
        counts, rate = reuseport(n, args.connections)
        mean = sum(counts) / n
        print(f"| {n} | {counts} | {max(counts) / mean:.2f} | {rate:,.0f} |", flush=True)
    send_us, recv_us = scm_rights(args.connections)
    print()
    print("| SCM_RIGHTS hand-off | acceptor CPU µs/connection | worker CPU µs/connection |")
    print("|---|---|---|")
    print(f"| one fd per sendmsg | {send_us:.1f} | {recv_us:.1f} |")


if __name__ == "__main__":
    main()
