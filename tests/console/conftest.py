"""Fixtures for the web console's browser tests: Debian's chromium, headless,
driven by Playwright for Python (launched with executable_path: Playwright's
own browser download is never used; scripts/ensure-browser.sh installs the
browser when it is missing), against a real node in this process.

    chromium        (session) one launched browser for the whole run: launches are the slow part
    open_console    a factory: open_console(user, password, login=True, port=None) -> Console, a
                    fresh browser context (own sessionStorage) on the `node` fixture's console,
                    or on the node listening on HTTP `port` (a node of a cluster)
    console         open_console() as guest, logged in, the overview drawn

The node fixtures (`node`, `api`, `broker_factory`, ...) are tests/node/conftest.py's,
imported here so that these tests run real nodes the same way."""

from __future__ import annotations

import importlib.util
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENSURE_BROWSER = REPO / "scripts" / "ensure-browser.sh"
BROWSERS = ("/usr/lib/chromium/chromium", "/usr/bin/chromium")
TIMEOUT_MS = 15_000  # any wait on the page: far above what a step takes, so a failure is a failure

_spec = importlib.util.spec_from_file_location("warren_node_fixtures", REPO / "tests" / "node" / "conftest.py")
_node_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_node_fixtures)
broker_factory = _node_fixtures.broker_factory
node = _node_fixtures.node
api = _node_fixtures.api
certs = _node_fixtures.certs
own_certs = _node_fixtures.own_certs
BrokerThread = _node_fixtures.BrokerThread


def browser_path() -> str:
    """Debian's chromium binary, installed by scripts/ensure-browser.sh when it is missing."""
    for path in BROWSERS:
        if Path(path).exists():
            return path
    out = subprocess.run(["bash", str(ENSURE_BROWSER)], capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        pytest.fail(f"scripts/ensure-browser.sh failed:\n{out.stderr}")
    return out.stdout.strip().splitlines()[-1].removeprefix("browser: ")


@pytest.fixture(scope="module")
def chromium():
    """One browser per test module, not per session: Playwright's sync API runs an
    asyncio loop on the main thread while it is open, and every asyncio test after
    the console's would then fail ("cannot be called from a running event loop")."""
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=TIMEOUT_MS)
    with sync_playwright() as pw:
        # --no-sandbox: the tests run as root here and in CI, where Chromium's sandbox refuses to start
        browser = pw.chromium.launch(executable_path=browser_path(), headless=True, args=["--no-sandbox"])
        yield browser
        browser.close()


@dataclass
class Console:
    page: object  # playwright.sync_api.Page
    url: str  # the console's root, "http://127.0.0.1:PORT/"
    errors: list  # uncaught JavaScript errors and requests to other origins; the fixture fails a test with any

    def go(self, hash_route: str) -> None:
        """Navigates in the page, as a click on a link would: "#/queues"."""
        self.page.evaluate("h => { location.hash = h; }", hash_route)

    def test_id(self, name: str):
        return self.page.locator(f'[data-test="{name}"]')


def log_in(page, user: str, password: str) -> None:
    page.get_by_label("Username").fill(user)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in", exact=True).click()


@pytest.fixture
def open_console(chromium, request):
    """open_console(user="guest", password="guest", login=True, port=None) -> Console on the
    console of the `node` fixture's node, or of the node whose HTTP port is `port` (a cluster's)."""
    from playwright.sync_api import expect

    contexts = []
    consoles = []

    def open_(user: str = "guest", password: str = "guest", login: bool = True, port: int | None = None) -> Console:
        if port is None:
            port = request.getfixturevalue("node").broker.http_port
        context = chromium.new_context(viewport={"width": 1366, "height": 800})
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        page = context.new_page()
        console = Console(page, f"http://127.0.0.1:{port}/", [])
        page.on("pageerror", lambda e: console.errors.append(str(e)))
        # offline by design: a request to any other origin (a CDN, a web font) is an error too
        page.on("request", lambda r, c=console: None if r.url.startswith((c.url, "data:")) else
                c.errors.append(f"request to another origin: {r.url}"))  # fmt: skip
        page.on("dialog", lambda d: d.accept())  # confirm() of delete, purge, close: yes
        consoles.append(console)
        page.goto(console.url)
        if login:
            log_in(page, user, password)
            expect(page.locator('[data-page="overview"] h1')).to_have_text("Overview")
        return console

    yield open_
    errors = [e for c in consoles for e in c.errors]
    for context in contexts:
        context.close()
    assert not errors, f"uncaught JavaScript errors or foreign requests in the console: {errors}"


@pytest.fixture
def console(open_console) -> Console:
    return open_console()
