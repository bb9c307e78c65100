"""The web console's files on the management ports (node/http/console_routes.py):
served without login on HTTP and HTTPS with the right content types and
cache headers, nothing outside node/http/console/ reachable, and the API's
own answers (login, 404, 405) unchanged beside them."""

from __future__ import annotations

import http.client

import pytest
from mgmt_client import Api

from node.http import console_routes


def raw_get(port: int, path: str, headers: dict | None = None) -> tuple[int, dict, bytes]:
    """A GET sent as written: urllib would normalise "/../" away before sending."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


def test_the_root_is_the_console_page_without_login(api):
    r = api.get("/", auth=False)
    assert r.status == 200
    assert r.headers["Content-Type"] == "text/html; charset=utf-8"
    assert '<script type="module" src="app.js">' in r.body
    assert r.headers["Cache-Control"] == "no-cache" and r.headers["Etag"]  # aiohttp spells it so
    assert "default-src 'self'" in r.headers["Content-Security-Policy"]


@pytest.mark.parametrize("path, ctype", [
    ("/app.js", "text/javascript; charset=utf-8"), ("/api.js", "text/javascript; charset=utf-8"),
    ("/pages/overview.js", "text/javascript; charset=utf-8"), ("/console.css", "text/css; charset=utf-8"),
    ("/favicon.svg", "image/svg+xml"),
])  # fmt: skip
def test_assets_have_their_content_type(api, path, ctype):
    r = api.get(path, auth=False)
    assert r.status == 200 and r.headers["Content-Type"] == ctype
    assert r.headers["X-Content-Type-Options"] == "nosniff"


def test_a_revalidation_with_the_etag_is_not_modified(api):
    etag = api.get("/app.js", auth=False).headers["Etag"]
    status, _, body = raw_get(api.port, "/app.js", {"If-None-Match": etag})
    assert status == 304 and body == b""


@pytest.mark.parametrize("path", [
    "/../pyproject.toml", "/pages/../../console_routes.py", "/%2e%2e/api.py", "/pages/%2e%2e/%2e%2e/api.py",
    "/..%2fapi.py", "/nothing.js", "/pages/nothing.js", "/.hidden.js", "/console_routes.py",
])  # fmt: skip
def test_nothing_outside_the_console_files_is_served(api, path):
    status, _, body = raw_get(api.port, path)
    assert status == 404, (path, body[:200])
    assert b"import" not in body and b"[build-system]" not in body


def test_every_file_in_the_table_is_under_the_console_directory():
    assert "/index.html" in console_routes.FILES and "/pages/overview.js" in console_routes.FILES
    for path in console_routes.FILES.values():
        assert path.resolve().is_relative_to(console_routes.ROOT)


def test_the_api_beside_the_console_answers_as_before(api):
    assert api.get("/api/overview", auth=False).status == 401  # the data still needs a login
    assert api.get("/api/no-such-thing.js").status == 404  # an /api/ path is never an asset
    r = api.post("/app.js", {})
    assert r.status == 405
    assert api.get("/api/overview").status == 200


def test_https_serves_the_console_too(broker_factory, own_certs):
    node = broker_factory(**own_certs.server_settings("peer"))
    tls = Api(node.broker.https_port, tls=own_certs.client_context(None), host="localhost")
    r = tls.get("/", auth=False)
    assert r.status == 200 and "app.js" in r.body
    assert tls.get("/chart.js", auth=False).headers["Content-Type"] == "text/javascript; charset=utf-8"
