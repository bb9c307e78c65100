"""Management API handlers for vhost and user limits, as RabbitMQ's:

    GET    /api/vhost-limits                     every vhost's limits
    GET    /api/vhost-limits/{vhost}
    PUT    /api/vhost-limits/{vhost}/{name}      body {"value": N}
    DELETE /api/vhost-limits/{vhost}/{name}
    GET    /api/user-limits                      every user's limits
    GET    /api/user-limits/{user}
    PUT    /api/user-limits/{user}/{name}        body {"value": N}
    DELETE /api/user-limits/{user}/{name}

A listing is [{"vhost" | "user": name, "value": {limit: N}}]. The limits are
cluster metadata (metadata/machine.py SetLimit, ClearLimit); the node
enforces them when a client opens a connection (node/client/connection.py).
"""

from __future__ import annotations

from aiohttp import web

from metadata import commands as mc
from node.http.route_kit import ADMIN, access, api_of, bad_request, json_response, no_content, not_found, read_body
from node.vhosts.metadata_store import new_key

_MAX_VALUE = 2**31 - 1


def _listing(request: web.Request, scope: str, name: str | None = None) -> list[dict]:
    by_name: dict[str, dict[str, int]] = {}
    for (s, owner, limit), value in sorted(api_of(request).node.projections.limits.items()):
        if s == scope and (name is None or owner == name):
            by_name.setdefault(owner, {})[limit] = value
    return [{scope: owner, "value": limits} for owner, limits in by_name.items()]


def _handlers(scope: str, key: str):
    @access(ADMIN)
    async def list_all(request: web.Request) -> web.Response:
        return json_response(request, _listing(request, scope))

    @access(ADMIN)
    async def list_one(request: web.Request) -> web.Response:
        name = request.match_info[key]
        _exists(request, name)
        return json_response(request, _listing(request, scope, name))

    @access(ADMIN)
    async def put(request: web.Request) -> web.Response:
        name, limit = request.match_info[key], request.match_info["name"]
        body = await read_body(request)
        value = body.get("value")
        if type(value) is not int or not -_MAX_VALUE <= value <= _MAX_VALUE:
            raise bad_request(f"{scope} limit '{limit}': 'value' must be an integer (a negative one means no limit), "
                              f"got {value!r}")
        await api_of(request).node.metadata.run(mc.SetLimit(new_key(), scope, name, limit, value))
        return no_content()

    @access(ADMIN)
    async def delete(request: web.Request) -> web.Response:
        name, limit = request.match_info[key], request.match_info["name"]
        await api_of(request).node.metadata.run(mc.ClearLimit(new_key(), scope, name, limit))
        return no_content()

    def _exists(request: web.Request, name: str) -> None:
        node = api_of(request).node
        if name not in (node.vhosts if scope == "vhost" else node.auth.users):
            raise not_found()

    base = f"/api/{scope}-limits"
    return [
        ("GET", base, list_all),
        ("GET", f"{base}/{{{key}}}", list_one),
        ("PUT", f"{base}/{{{key}}}/{{name}}", put),
        ("DELETE", f"{base}/{{{key}}}/{{name}}", delete),
    ]


ROUTES = _handlers("vhost", "vhost") + _handlers("user", "user")
