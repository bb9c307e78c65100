#!/usr/bin/env python3
"""Cost of one cross-worker hop (issue 36's design): records sent in batches
from one process to another over a Unix stream socket, by encoding and batch
size.

A sender process encodes publish items (`["pub", vhost, queue, id, message
bytes, durable, ...]`, the cross-node proxy's item, node/vhosts/remote_queue.py)
into batches, writes each batch length-prefixed on a socketpair; the receiver
reads, decodes every item and answers one confirm batch per batch (as the
owning worker would), which the sender reads and decodes. Both sides measure
their own CPU (time.process_time); the table gives wall records/s and the CPU
per record of each side and of both together (the hop's price, to add to the
per-message cost of the path it replaces).

Encodings:
- `records`: the cross-node `queue.proxy` batch record (node/vhosts/proxy_records.py)
- `pickle`: the list of items pickled (protocol 5); only between processes of
  one build that trust each other, which workers of one node are
- `struct`: a fixed header per item (`>BHQ?I`, queue index not name) and the
  message bytes: the floor, what a purpose-built worker frame could cost
- `amqp`: one AMQP-encoded list per item (amqp/codec.py), the proxy's old form

- `link`: node/workers/link.py under uvloop in both processes (records codec,
  a turn's items in one frame, the receiver answering each with a confirm
  that its own turn batches): the hop as the node would pay it, event loop
  included

The other encodings use blocking sockets, no event loop: the loop's cost per
read (uvloop, one data_received per read) is paid per batch and comes on top;
`link` shows how much.

    .venv/bin/python bench/worker_hop.py [--records 200000] [--body 12] [--batches 1,16,256]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pickle
import socket
import struct
import sys
import time
from multiprocessing import Process, Queue

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from amqp import codec  # noqa: E402
from node.vhosts import proxy_records  # noqa: E402

_LEN = struct.Struct(">I")
_HDR = struct.Struct(">BHQ?I")  # kind, queue index, publish id, durable, body length


def payload(body: int) -> bytes:
    data = b"x" * body
    return b"\x00Sp\xc0\x01\x00\x00Su\xb0" + len(data).to_bytes(4, "big") + data


def pub_item(i: int, msg: bytes) -> list:
    return ["pub", "/", "q1", i, msg, True, None, "", ["q1"], None]


def conf_item(i: int) -> list:
    return ["conf", i, "accepted"]


# each encoding: (encode list of items -> bytes, decode bytes -> list of items)
def _struct_enc(items: list) -> bytes:
    parts = []
    for it in items:
        if it[0] == "pub":
            parts.append(_HDR.pack(1, 0, it[3], it[5], len(it[4])))
            parts.append(it[4])
        else:
            parts.append(_HDR.pack(2, 0, it[1], True, 0))
    return b"".join(parts)


def _struct_dec(data: bytes) -> list:
    out = []
    pos = 0
    end = len(data)
    unpack = _HDR.unpack_from
    size = _HDR.size
    while pos < end:
        kind, q, ident, durable, n = unpack(data, pos)
        pos += size
        if kind == 1:
            out.append(("pub", q, ident, data[pos : pos + n], durable))
            pos += n
        else:
            out.append(("conf", ident, "accepted"))
    return out


def _amqp_enc(items: list) -> bytes:
    parts = []
    for it in items:
        one = codec.dumps(it)
        parts.append(_LEN.pack(len(one)))
        parts.append(one)
    return b"".join(parts)


def _amqp_dec(data: bytes) -> list:
    out = []
    pos = 0
    while pos < len(data):
        (n,) = _LEN.unpack_from(data, pos)
        out.append(codec.loads(data[pos + 4 : pos + 4 + n]))
        pos += 4 + n
    return out


ENCODINGS = {
    "records": (proxy_records.encode_batch, proxy_records.decode_message),
    "pickle": (lambda items: pickle.dumps(items, 5), pickle.loads),
    "struct": (_struct_enc, _struct_dec),
    "amqp": (_amqp_enc, _amqp_dec),
}


def _recv_exact(sock: socket.socket, n: int, buf: bytearray) -> bytes:
    while len(buf) < n:
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise EOFError
        buf += chunk
    data = bytes(buf[:n])
    del buf[:n]
    return data


def _read_frame(sock: socket.socket, buf: bytearray) -> bytes:
    (n,) = _LEN.unpack(_recv_exact(sock, 4, buf))
    return _recv_exact(sock, n, buf)


def receiver(sock: socket.socket, other: socket.socket, encoding: str, out: Queue) -> None:
    other.close()  # the sender's end, inherited by fork: EOF comes only once no process holds it
    enc, dec = ENCODINGS[encoding]
    buf = bytearray()
    cpu = time.process_time()
    got = 0
    try:
        while True:
            items = dec(_read_frame(sock, buf))
            got += len(items)
            conf = enc([conf_item(i) for i in range(len(items))])
            sock.sendall(_LEN.pack(len(conf)) + conf)
    except EOFError:
        pass
    out.put((got, time.process_time() - cpu))


def run(encoding: str, batch: int, records: int, body: int) -> dict:
    enc, dec = ENCODINGS[encoding]
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    out: Queue = Queue()
    proc = Process(target=receiver, args=(b, a, encoding, out))
    proc.start()
    b.close()
    msg = payload(body)
    # a distinct bytes object per message, as received off a socket (pickle would
    # otherwise store one shared body once per batch)
    items = [pub_item(i, bytes(bytearray(msg))) for i in range(batch)]
    rounds = max(1, records // batch)
    # batches in flight: bounded in frames too, since each small write costs ~1 KB of
    # the socket buffer and both sides block writing once theirs is full
    window = max(2, min(64, 1024 // batch))
    buf = bytearray()
    t0 = time.perf_counter()
    cpu = time.process_time()
    sent = acked = 0
    while acked < rounds:
        while sent < rounds and sent - acked < window:
            data = enc(items)
            a.sendall(_LEN.pack(len(data)) + data)
            sent += 1
        dec(_read_frame(a, buf))
        acked += 1
    wall = time.perf_counter() - t0
    send_cpu = time.process_time() - cpu
    a.close()
    got, recv_cpu = out.get()
    proc.join()
    n = rounds * batch
    assert got == n, (got, n)
    return {
        "encoding": encoding,
        "batch": batch,
        "records": n,
        "rate": n / wall,
        "send_us": send_cpu / n * 1e6,
        "recv_us": recv_cpu / n * 1e6,
        "bytes": len(enc(items)) / batch,
    }


def link_receiver(sock: socket.socket, other: socket.socket, out: Queue) -> None:
    import uvloop

    from node.workers.link import WorkerLink

    other.close()

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        got = 0

        def on_items(items: list) -> None:
            nonlocal got
            got += len(items)
            for it in items:
                link.send(conf_item(it[3]))

        link = WorkerLink(loop, on_items, done.set_result)  # bound before the first read can call on_items
        await loop.create_unix_connection(lambda: link, sock=sock)
        await done
        out.put((got, time.process_time() - cpu))

    cpu = time.process_time()
    uvloop.run(serve())


def run_link(batch: int, records: int, body: int) -> dict:
    import uvloop

    from node.workers.link import WorkerLink

    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    out: Queue = Queue()
    proc = Process(target=link_receiver, args=(b, a, out))
    proc.start()
    b.close()
    msg = payload(body)
    rounds = max(1, records // batch)
    n = rounds * batch
    window = max(4096, batch * 2)  # records without their confirm, as publisher credit would bound them

    async def send() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        acked = 0
        room: asyncio.Future | None = None
        finished = loop.create_future()

        def on_items(items: list) -> None:
            nonlocal acked, room
            acked += len(items)
            if room is not None and not room.done():
                room.set_result(None)
            if acked == n:
                finished.set_result(None)

        _, link = await loop.create_unix_connection(lambda: WorkerLink(loop, on_items, lambda e: None), sock=a)
        t0 = time.perf_counter()
        cpu = time.process_time()
        sent = 0
        for _ in range(rounds):
            while sent - acked > window - batch:
                room = loop.create_future()
                await room
            for _ in range(batch):
                link.send(pub_item(sent, bytes(bytearray(msg))))
                sent += 1
            await asyncio.sleep(0)  # end the loop turn: the turn's items go as one frame
        await finished
        wall = time.perf_counter() - t0
        used = time.process_time() - cpu
        link.close()
        return wall, used

    wall, send_cpu = uvloop.run(send())
    got, recv_cpu = out.get()
    proc.join()
    assert got == n, (got, n)
    return {"encoding": "link", "batch": batch, "records": n, "rate": n / wall, "send_us": send_cpu / n * 1e6,
            "recv_us": recv_cpu / n * 1e6, "bytes": len(proxy_records.encode_batch([pub_item(0, msg)] * batch)) / batch}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--body", type=int, default=12)
    ap.add_argument("--batches", default="1,16,256")
    ap.add_argument("--encodings", default=",".join([*ENCODINGS, "link"]))
    args = ap.parse_args()
    print(f"{args.body} B bodies, {args.records} records, load average {os.getloadavg()[0]:.1f}")
    print(
        "| encoding | batch | B/record | records/s (wall) | sender CPU µs/record | receiver CPU µs/record | both µs/record |"
    )
    print("|---|---|---|---|---|---|---|")
    for encoding in args.encodings.split(","):
        for batch in (int(x) for x in args.batches.split(",")):
            records = args.records if batch > 1 else min(args.records, 50_000)
            r = run_link(batch, records, args.body) if encoding == "link" else run(encoding, batch, records, args.body)
            print(
                f"| {encoding} | {batch} | {r['bytes']:.0f} | {r['rate']:,.0f} | {r['send_us']:.2f} "
                f"| {r['recv_us']:.2f} | {r['send_us'] + r['recv_us']:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
