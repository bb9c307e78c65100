"""The web console's static files (node/http/console/, shipped as package
data), served on the management ports beside the API it is built on:

    GET /                   index.html: the single page; hash routes pick the view
    GET /{asset}            a file under node/http/console/ (.js, .css, .html, .svg, .png, .ico)

The assets need no login (they hold no data; every data call the page makes
goes to /api/ with the user's credentials, checked by the API). A path is
looked up in a table of the directory's files made once at import, so no
request can name a file outside it ("..", links, hidden files). Answers
carry an explicit Content-Type (ES modules need a JavaScript one, whatever
the host's mime.types says), `Cache-Control: no-cache` with an ETag and
Last-Modified (the browser revalidates, so a node upgrade is seen at the
next load without a stale module graph), and a Content-Security-Policy that
keeps the page to its own origin: nothing from a CDN could load even if a
page tried.
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from node.http.route_kit import not_found

ROOT = Path(__file__).resolve().parent / "console"

CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
}

HEADERS = {
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # 'self' only: no CDN, no inline script; inline style attributes stay allowed
    # for small layout tweaks in the page modules' templates.
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
}


def _files(root: Path) -> dict[str, Path]:
    """Every servable file under `root` by its URL path ("/app.js", "/pages/queues.js")."""
    table = {}
    if root.is_dir():
        for path in root.rglob("*"):
            rel = path.relative_to(root)
            hidden = any(part.startswith(".") for part in rel.parts)
            if path.is_file() and not path.is_symlink() and not hidden and path.suffix in CONTENT_TYPES:
                table["/" + rel.as_posix()] = path
    return table


FILES = _files(ROOT)


def _file_response(path: Path) -> web.FileResponse:
    return web.FileResponse(path, headers={**HEADERS, "Content-Type": CONTENT_TYPES[path.suffix]})


async def index(request: web.Request) -> web.StreamResponse:
    path = FILES.get("/index.html")
    if path is None:
        raise not_found("the console is not installed")
    return _file_response(path)


async def asset(request: web.Request) -> web.StreamResponse:
    path = FILES.get("/" + request.match_info["asset"])
    if path is None:
        raise not_found()
    return _file_response(path)


# No `access` mark on these handlers: the API's middleware asks no login for them.
# The asset pattern never starts with "api/", so the API's own 404s and 405s stay its own.
ROUTES = [
    ("GET", "/", index),
    ("GET", r"/{asset:(?!api/)[A-Za-z0-9_\-/]+\.(?:html|js|css|svg|png|ico)}", asset),
]
