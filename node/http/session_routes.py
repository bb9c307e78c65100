"""Management API handlers for what lives inside a client connection, as
RabbitMQ 4.2 shows an AMQP 1.0 connection:

    GET /api/connections/{name}/sessions   its sessions, each with its incoming (publishing)
                                           and outgoing (consuming) links
    GET /api/connections/username/{user}   the connections of one user
    DELETE /api/connections/username/{user}  closes them (X-Reason: the description)
    GET /api/channels, /api/vhosts/{vhost}/channels, /api/connections/{name}/channels
                                           AMQP 0-9-1 channels: [] on an AMQP 1.0 broker, as
                                           RabbitMQ 4 answers when no 0-9-1 client is connected
    GET /api/channels/{channel}            404: no channel exists
"""

from __future__ import annotations

from aiohttp import web

from node.http.client_views import session_json
from node.http.node_routes import DEFAULT_CLOSE_REASON, close_named, open_connections
from node.http.route_kit import (
    MGMT,
    USER,
    VHOST,
    access,
    api_of,
    is_admin,
    is_monitor,
    json_response,
    list_response,
    no_content,
    not_found,
    refused,
)


async def _sessions(request: web.Request) -> list[dict]:
    """The sessions of the connection named in the path, on whichever worker holds it, if the
    user may see it."""
    name, user = request.match_info["name"], request[USER]
    node = api_of(request).node
    local = next((c for c in node.connections if c.name == name and c.vhost is not None), None)
    if local is not None:
        found = {"user": local.user, "sessions": [session_json(s) for _, s in sorted(local.engine.sessions.items())]}
    else:
        found = await node.node_worker.sessions(name) if node.node_worker is not None else None
    if found is None:
        raise not_found(f"no connection '{name}'")
    if not is_monitor(user) and found["user"] != user.name:
        raise refused("User not authorised to access object")
    return found["sessions"]


@access(MGMT)
async def connection_sessions(request: web.Request) -> web.Response:
    return json_response(request, await _sessions(request))


async def _of_user(request: web.Request) -> list[dict]:
    """The open connections of the user named in the path, as the API shows them."""
    name, user = request.match_info["username"], request[USER]
    if not is_monitor(user) and name != user.name:
        raise refused("User not authorised to access object")
    return [c for c in await open_connections(api_of(request), None) if c["user"] == name]


@access(MGMT)
async def user_connections(request: web.Request) -> web.Response:
    return list_response(request, await _of_user(request))


@access(MGMT)
async def close_user_connections(request: web.Request) -> web.Response:
    user = request[USER]
    if not is_admin(user) and request.match_info["username"] != user.name:
        raise refused("User not authorised to access object")
    reason = request.headers.get("X-Reason") or DEFAULT_CLOSE_REASON
    for conn in await _of_user(request):
        await close_named(api_of(request), conn["name"], reason)
    return no_content()


@access(MGMT)
async def channels(request: web.Request) -> web.Response:
    return list_response(request, [])


@access(VHOST)
async def vhost_channels(request: web.Request) -> web.Response:
    api_of(request).vhost(request.match_info["vhost"])
    return list_response(request, [])


@access(MGMT)
async def connection_channels(request: web.Request) -> web.Response:
    await _sessions(request)  # a 404 or 401 as for its sessions
    return json_response(request, [])


@access(MGMT)
async def channel(request: web.Request) -> web.Response:
    raise not_found()


ROUTES = [
    ("GET", "/api/connections/username/{username}", user_connections),
    ("DELETE", "/api/connections/username/{username}", close_user_connections),
    ("GET", "/api/connections/{name}/sessions", connection_sessions),
    ("GET", "/api/connections/{name}/channels", connection_channels),
    ("GET", "/api/channels", channels),
    ("GET", "/api/channels/{channel}", channel),
    ("GET", "/api/vhosts/{vhost}/channels", vhost_channels),
]
