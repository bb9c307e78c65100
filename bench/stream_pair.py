"""A stream beside a durable classic queue on one Warren node, end to end
with arrow pairs (durable messages, 12 B and 1 KB). The receiver attaches
first at the default offset spec (`next`), so it gets every message sent.

    .venv/bin/python bench/stream_pair.py --arrow bench/arrow --count 100000
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import urllib.request

from pair import DEFAULT_ARROW, run_pair

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=100_000)
    ap.add_argument("--arrow", default=DEFAULT_ARROW)
    ap.add_argument("--port", type=int, default=5791)
    ap.add_argument("--http-port", type=int, default=15791)
    args = ap.parse_args()
    data = tempfile.mkdtemp(prefix="warren-stream-bench-")
    node = subprocess.Popen([sys.executable, "-m", "node.cli", "server", "--data-dir", data, "--amqp-port",
                             str(args.port), "--http-port", str(args.http_port), "--metrics-port", "0", "--grpc-port",
                             "0", "--listen-host", "127.0.0.1"], cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO, WARREN_WORKERS="1"),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)  # fmt: skip
    node.stdout.readline()  # listening
    auth = "Basic " + base64.b64encode(b"guest:guest").decode()

    def declare(name: str, arguments: dict) -> None:
        body = json.dumps({"durable": True, "arguments": arguments}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{args.http_port}/api/queues/%2F/{name}", body,
                                         {"Authorization": auth, "content-type": "application/json"}, method="PUT")
        urllib.request.urlopen(request).read()

    try:
        print(f"load average {os.getloadavg()[0]:.2f}")
        print("| durable msgs | classic durable queue msg/s (p50 / p99 ms) | stream msg/s (p50 / p99 ms) |")
        print("|---|---|---|")
        for body in (12, 1024):
            cells = []
            for kind, arguments in (("classic", {}), ("stream", {"x-queue-type": "stream"})):
                name = f"{kind}-{body}"
                declare(name, arguments)
                r = run_pair(port=args.port, address=f"/queues/{name}", count=args.count, body=body, durable=True,
                             arrow=args.arrow)  # fmt: skip
                lat = r.get("lat_ms") or {}
                cells.append(f"{r['e2e_rate']:,} ({lat.get('p50')} / {lat.get('p99')})" if r["ok"] else r["error"])
            print(f"| {body} B | {cells[0]} | {cells[1]} |")
        print(f"load average {os.getloadavg()[0]:.2f}")
    finally:
        node.terminate()
        node.wait(20)


if __name__ == "__main__":
    main()
