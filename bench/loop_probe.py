"""Times a Warren node's event loop from outside, for bench/hostile.py.

Every `--interval` seconds it opens a TCP connection to the AMQP port, sends
the SASL protocol header and times the node's 8-byte header reply, which the
node writes from its event loop: a probe that waits is a loop that is busy
(or a node that no longer accepts). Runs until its standard input closes or
`--limit` seconds pass, then prints one JSON line:

    {"probes": N, "max_ms": ..., "p99_ms": ..., "unanswered": N}

`unanswered` counts probes that got no header within `--timeout` (their wait
counts in max_ms as the timeout) or could not connect at all.

    .venv/bin/python bench/loop_probe.py --port 5672 < /dev/null
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time

HEADER = b"AMQP\x03\x01\x00\x00"


def probe_once(host: str, port: int, timeout: float) -> float | None:
    """Seconds from connect to the node's 8-byte reply; None when none came."""
    start = time.monotonic()
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(HEADER)
            got = b""
            while len(got) < 8:
                left = timeout - (time.monotonic() - start)
                if left <= 0:
                    return None
                s.settimeout(left)
                chunk = s.recv(8 - len(got))
                if not chunk:
                    return None
                got += chunk
    except OSError:
        return None
    return time.monotonic() - start


def run(host: str, port: int, interval: float, timeout: float, limit: float, stop: threading.Event) -> dict:
    waits: list[float] = []
    unanswered = 0
    deadline = time.monotonic() + limit
    while not stop.is_set() and time.monotonic() < deadline:
        began = time.monotonic()
        took = probe_once(host, port, timeout)
        if took is None:
            unanswered += 1
            took = time.monotonic() - began
        waits.append(took)
        stop.wait(max(0.0, interval - (time.monotonic() - began)))
    waits.sort()
    return {
        "probes": len(waits),
        "max_ms": round(waits[-1] * 1000, 1) if waits else None,
        "p99_ms": round(waits[int(len(waits) * 0.99)] * 1000, 1) if waits else None,
        "unanswered": unanswered,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--interval", type=float, default=0.02)
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds a probe waits for the reply")
    ap.add_argument("--limit", type=float, default=600.0, help="seconds before the probe stops by itself")
    args = ap.parse_args(argv)
    stop = threading.Event()

    def watch_stdin() -> None:
        sys.stdin.read()  # returns at EOF: the driver is done with us
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    print(json.dumps(run(args.host, args.port, args.interval, args.timeout, args.limit, stop)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
