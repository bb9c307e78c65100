"""Screenshots of the web console's pages for docs/console/ (PNG), taken in
headless Debian chromium (scripts/ensure-browser.sh) from a fresh node with a
little traffic: queues of each type, a client connection with a publisher
and a consumer, messages flowing while the overview's chart fills.

    .venv/bin/python scripts/console_screenshots.py [--out docs/console] [--flow-seconds 40]

A page added to the console adds its line to SHOTS (a file name and the
hash route); `{connection}` in a route is the client connection's name.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from base64 import b64encode
from pathlib import Path
from urllib.parse import quote

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "support"))

from mgmt_client import NodeProcess  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402
from proton import Message  # noqa: E402
from proton.utils import BlockingConnection  # noqa: E402

SHOTS = [
    ("login.png", None),
    ("overview.png", "#/overview"),
    ("connections.png", "#/connections"),
    ("connection.png", "#/connection/{connection}"),
    ("queues.png", "#/queues"),
    ("queue-quorum.png", "#/queue/%2F/orders"),
    ("queue-stream.png", "#/queue/%2F/events"),
    ("exchanges.png", "#/exchanges"),
    ("exchange.png", "#/exchange/%2F/shop"),
    ("admin-users.png", "#/admin/users"),
    ("admin-vhosts.png", "#/admin/vhosts"),
    ("admin-permissions.png", "#/admin/permissions"),
    ("admin-policies.png", "#/admin/policies"),
    ("admin-feature-flags.png", "#/admin/feature-flags"),
    ("cluster.png", "#/cluster"),
    ("raft.png", "#/raft"),
    ("audit.png", "#/audit/15"),
]
AUTH = "Basic " + b64encode(b"guest:guest").decode()


def call(port: int, method: str, path: str, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": AUTH, "Content-Type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(req, timeout=30) as r:
        raw = r.read()
        return json.loads(raw) if raw else None


def browser() -> str:
    out = subprocess.run(["bash", str(REPO / "scripts" / "ensure-browser.sh")], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(out.stderr)
    return out.stdout.strip().splitlines()[-1].removeprefix("browser: ")


def flow(amqp_url: str, stop: threading.Event) -> None:
    """A steady trickle: publish to orders and events, consume half of orders."""
    conn = BlockingConnection(amqp_url, timeout=10)
    orders, events = conn.create_sender("/queues/orders"), conn.create_sender("/queues/events")
    receiver = conn.create_receiver("/queues/orders", credit=10)
    n = 0
    while not stop.is_set():
        orders.send(Message(body=f"order {n}"))
        events.send(Message(body=f"event {n}"))
        if n % 2:
            receiver.receive(timeout=5)
            receiver.accept()
        n += 1
        stop.wait(0.05)
    conn.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(REPO / "docs" / "console"))
    ap.add_argument("--flow-seconds", type=float, default=40.0, help="traffic before the first shot: chart points")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        node = NodeProcess(Path(tmp) / "data")
        stop = threading.Event()
        traffic = None
        try:
            port = node.http_port
            call(port, "PUT", "/api/queues/%2F/orders", {"arguments": {"x-queue-type": "quorum"}})
            call(port, "PUT", "/api/queues/%2F/events", {"arguments": {"x-queue-type": "stream"}})
            for name in ("audit-log", "billing", "emails", "invoices"):
                call(port, "PUT", f"/api/queues/%2F/{name}", {})
            call(port, "PUT", "/api/exchanges/%2F/shop", {"type": "topic"})  # the exchange and admin pages
            call(port, "POST", "/api/bindings/%2F/e/shop/q/invoices", {"routing_key": "invoice.*"})
            call(port, "POST", "/api/bindings/%2F/e/shop/q/emails", {"routing_key": "*.created"})
            call(port, "PUT", "/api/vhosts/staging", {"description": "pre-production", "default_queue_type": "quorum"})
            call(port, "PUT", "/api/vhost-limits/staging/max-queues", {"value": 500})
            call(port, "PUT", "/api/users/ops", {"password": "ops-secret", "tags": "monitoring"})
            call(port, "PUT", "/api/permissions/staging/ops", {"configure": "^$", "write": "^$", "read": ".*"})
            call(port, "PUT", "/api/policies/%2F/orders-cap", {"pattern": "^orders$", "apply-to": "quorum_queues",
                                                               "definition": {"max-length": 100000}})  # fmt: skip
            traffic = threading.Thread(target=flow, args=(node.url, stop), daemon=True)
            traffic.start()
            with sync_playwright() as pw:
                b = pw.chromium.launch(executable_path=browser(), headless=True, args=["--no-sandbox"])
                page = b.new_page(viewport={"width": 1366, "height": 860})
                page.goto(f"http://127.0.0.1:{port}/")
                page.screenshot(path=str(out / "login.png"))
                page.get_by_label("Username").fill("guest")
                page.get_by_label("Password").fill("guest")
                page.get_by_role("button", name="Log in", exact=True).click()
                page.wait_for_selector('[data-page="overview"] svg')
                time.sleep(args.flow_seconds)  # the chart's history is the open page's: let it fill
                connection = quote(call(port, "GET", "/api/connections")[0]["name"], safe="")
                for file, route in SHOTS:
                    if route is None:
                        continue
                    page.evaluate("h => { location.hash = h; }", route.format(connection=connection))
                    page.wait_for_load_state("networkidle")
                    time.sleep(1.0)  # a page's first refresh drawn
                    page.screenshot(path=str(out / file), full_page=True)
                    print(out / file)
                b.close()
        finally:
            stop.set()
            if traffic is not None:
                traffic.join(15)  # its connection closes before the node stops
            node.stop()


if __name__ == "__main__":
    main()
