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

from typing import Any

from aiohttp import web

from amqp import definitions as d
from amqp.errors import Condition
from node.http import formats as fmt
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

DEFAULT_CLOSE_REASON = "Closed via management plugin"
_SETTLE_MODES = {d.SND_UNSETTLED: "unsettled", d.SND_SETTLED: "settled", d.SND_MIXED: "mixed"}


def _own_connection(request: web.Request) -> Any:
    """The connection named in the path, if the user may see it."""
    name, user = request.match_info["name"], request[USER]
    for conn in api_of(request).node.connections:
        if conn.name == name and conn.vhost is not None:
            if not is_monitor(user) and conn.user != user.name:
                raise refused("User not authorised to access object")
            return conn
    raise not_found(f"no connection '{name}'")


def _address(terminus: Any) -> str | None:
    return getattr(terminus, "address", None)


def _link_json(link: Any) -> dict:
    common = {"handle": link.handle, "link_name": link.name, "max_message_size": link.max_message_size or 0,
              "delivery_count": link.delivery_count, "credit": link.link_credit}  # fmt: skip
    if link.is_sender:  # we send: a consumer's link
        queue = getattr(link.context, "queue", None)
        return {**common, "source_address": _address(link.source), "queue_name": getattr(queue, "name", ""),
                "send_settled": link.snd_settle_mode == d.SND_SETTLED, "filter": [],
                "consumer_timeout": False}  # fmt: skip
    return {**common, "snd_settle_mode": _SETTLE_MODES.get(link.snd_settle_mode, "mixed"),
            "target_address": _address(link.target),
            "unconfirmed_messages": getattr(link.context, "unconfirmed", 0)}  # fmt: skip


def session_json(session: Any) -> dict:
    links = list(session.links.values())
    return {
        "channel_number": session.channel,
        "handle_max": session.handle_max,
        "next_incoming_id": session.next_incoming_id,
        "incoming_window": session.incoming_window,
        "next_outgoing_id": session.next_outgoing_id,
        "remote_incoming_window": session.remote_incoming_window,
        "remote_outgoing_window": session.remote_outgoing_window,
        "outgoing_unsettled_deliveries": len(session.outgoing_unsettled),
        "incoming_links": [_link_json(link) for link in links if not link.is_sender],
        "outgoing_links": [_link_json(link) for link in links if link.is_sender],
    }


@access(MGMT)
async def connection_sessions(request: web.Request) -> web.Response:
    conn = _own_connection(request)
    return json_response(request, [session_json(s) for _, s in sorted(conn.engine.sessions.items())])


def _of_user(request: web.Request) -> list[Any]:
    name, user = request.match_info["username"], request[USER]
    if not is_monitor(user) and name != user.name:
        raise refused("User not authorised to access object")
    return [c for c in api_of(request).node.connections if c.vhost is not None and c.user == name]


@access(MGMT)
async def user_connections(request: web.Request) -> web.Response:
    node = api_of(request).node
    rows = [fmt.connection_json(c, node.config.node_name, node.alarms.active) for c in _of_user(request)]
    return list_response(request, sorted(rows, key=lambda c: c["name"]))


@access(MGMT)
async def close_user_connections(request: web.Request) -> web.Response:
    user = request[USER]
    if not is_admin(user) and request.match_info["username"] != user.name:
        raise refused("User not authorised to access object")
    for conn in _of_user(request):
        conn.force_close(Condition.CONNECTION_FORCED, request.headers.get("X-Reason") or DEFAULT_CLOSE_REASON)
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
    _own_connection(request)
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
