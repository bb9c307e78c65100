"""Broker memory per idle connection with two sessions.

Starts a Warren node (or measures a running broker given its PID), opens N
connections from one asyncio process with Warren's own engine in client role
(SASL ANONYMOUS, OPEN, two BEGINs each), and reports the growth of the broker's
resident memory divided by N.

    .venv/bin/python bench/connections.py --count 5000
    .venv/bin/python bench/connections.py --count 400 --port 5682 --pid $(pidof beam.smp)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from amqp import events as ev  # noqa: E402
from amqp.connection import CLIENT, Connection  # noqa: E402


async def open_idle_connection(port: int, sessions: int, user: str, password: str):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    engine = Connection(CLIENT, container_id="bench")
    engine.start()
    begun = 0

    async def pump():
        writer.write(engine.data_to_send())
        data = await reader.read(65536)
        if not data:
            raise ConnectionError("broker closed the connection")
        return engine.receive_data(data)

    opened = False
    while begun < sessions:
        for e in await pump():
            if isinstance(e, ev.SaslMechanismsReceived):
                if user:
                    engine.sasl_init("PLAIN", f"\0{user}\0{password}".encode())
                else:
                    engine.sasl_init("ANONYMOUS", b"")
            elif isinstance(e, ev.SaslOutcomeReceived):
                engine.open(hostname="localhost")
            elif isinstance(e, ev.ConnectionOpened) and not opened:
                opened = True
                for _ in range(sessions):
                    engine.create_session().begin()
            elif isinstance(e, ev.SessionBegun):
                begun += 1
            elif isinstance(e, ev.ConnectionClosed):
                raise ConnectionError(f"closed: {e.error}")
    return reader, writer


def start_warren() -> tuple[subprocess.Popen, int]:
    data = tempfile.mkdtemp(prefix="warren-conn-bench-")
    proc = subprocess.Popen(
        [sys.executable, "-m", "node.cli", "server", "--data-dir", data, "--amqp-port", "0",
         "--listen-host", "127.0.0.1", "--http-port", "0", "--metrics-port", "0", "--grpc-port", "0"],
        cwd=Path(__file__).resolve().parent.parent, stdout=subprocess.PIPE, text=True,
        env=dict(os.environ, WARREN_IDLE_TIMEOUT="0", WARREN_WORKERS="1"),
    )  # fmt: skip
    port = int(re.search(r"listening on amqp://[^:]+:(\d+)", proc.stdout.readline()).group(1))
    return proc, port


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=5000)
    ap.add_argument("--sessions", type=int, default=2)
    ap.add_argument("--port", type=int, help="measure an already running broker on this port")
    ap.add_argument("--pid", type=int, help="PID of that broker (for its memory)")
    ap.add_argument("--user", default="")
    ap.add_argument("--password", default="")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, args.count + 100)), hard))
    proc = None
    if args.port:
        port, pid = args.port, args.pid
    else:
        proc, port = start_warren()
        pid = proc.pid
    try:
        broker = psutil.Process(pid)
        await open_idle_connection(port, args.sessions, args.user, args.password)  # warm up
        before = broker.memory_info().rss
        conns = []
        for i in range(0, args.count, 200):
            batch = [open_idle_connection(port, args.sessions, args.user, args.password)
                     for _ in range(min(200, args.count - i))]  # fmt: skip
            conns += await asyncio.gather(*batch)
        await asyncio.sleep(1)
        after = broker.memory_info().rss
        per = (after - before) / args.count
        print(f"connections={args.count} sessions_each={args.sessions} rss_before={before / 2**20:.1f}MiB "
              f"rss_after={after / 2**20:.1f}MiB per_connection={per / 1024:.1f}KiB")  # fmt: skip
        for _, w in conns:
            w.close()
    finally:  # never leave the node we started behind
        if proc is not None:
            proc.terminate()
            proc.wait(20)


if __name__ == "__main__":
    asyncio.run(main())
