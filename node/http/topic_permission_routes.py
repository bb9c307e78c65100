"""Management API handlers for topic permissions, with RabbitMQ's paths
and JSON ({"user", "vhost", "exchange", "write", "read"}), administrators
only:

    GET    /api/topic-permissions
    GET    /api/topic-permissions/{vhost}/{user}
    PUT    /api/topic-permissions/{vhost}/{user}     {"exchange", "write", "read"}
    DELETE /api/topic-permissions/{vhost}/{user}     every exchange (?exchange=X: one)
    GET|PUT|DELETE /api/topic-permissions/{vhost}/{user}/{exchange}   that exchange's only
    GET    /api/users/{user}/topic-permissions
    GET    /api/vhosts/{vhost}/topic-permissions

They live in the metadata store; routing/topic_permissions.py enforces
them on publishes to and bindings from topic exchanges.
"""

from __future__ import annotations

from aiohttp import web

from metadata import commands as mc
from node.http.route_kit import (
    ADMIN,
    access,
    api_of,
    bad_request,
    created_or_updated,
    json_response,
    no_content,
    not_found,
    read_body,
)
from node.vhosts.metadata_store import new_key
from routing import permissions


def _listing(request: web.Request, user: str | None = None, vhost: str | None = None) -> list[dict]:
    entries = api_of(request).node.projections.topic_permissions
    return [{"user": u, "vhost": v, "exchange": x, "write": w, "read": r}
            for (u, v, x), (w, r) in sorted(entries.items(), key=lambda e: (e[0][1], e[0][0], e[0][2]))  # as RabbitMQ
            if (user is None or u == user) and (vhost is None or v == vhost)]  # fmt: skip


def _user_and_vhost(request: web.Request) -> tuple[str, str]:
    api = api_of(request)
    user = request.match_info["user"]
    if user not in api.node.auth.users:
        raise not_found(f"no user '{user}'")
    return user, api.vhost(request.match_info["vhost"]).name


@access(ADMIN)
async def list_all(request: web.Request) -> web.Response:
    return json_response(request, _listing(request))


@access(ADMIN)
async def of_user(request: web.Request) -> web.Response:
    user = request.match_info["user"]
    if user not in api_of(request).node.auth.users:
        raise not_found()
    return json_response(request, _listing(request, user=user))


@access(ADMIN)
async def of_vhost(request: web.Request) -> web.Response:
    vhost = api_of(request).vhost(request.match_info["vhost"]).name
    return json_response(request, _listing(request, vhost=vhost))


@access(ADMIN)
async def get_one(request: web.Request) -> web.Response:
    user, vhost = _user_and_vhost(request)
    found = _listing(request, user, vhost)
    exchange = request.match_info.get("exchange")
    if exchange is not None:  # /api/topic-permissions/{vhost}/{user}/{exchange}
        found = [e for e in found if e["exchange"] == exchange]
    if not found:
        raise not_found()
    return json_response(request, found)


@access(ADMIN)
async def put_one(request: web.Request) -> web.Response:
    user, vhost = _user_and_vhost(request)
    body = await read_body(request)
    exchange = body.get("exchange")
    in_path = request.match_info.get("exchange")
    if in_path is not None:
        if exchange not in (None, in_path):
            raise bad_request(f"the body's exchange '{exchange}' is not the path's '{in_path}'")
        exchange = in_path
    if not isinstance(exchange, str) or not exchange:
        raise bad_request("'exchange' is mandatory (the topic exchange the patterns apply to)")
    patterns = []
    for kind in ("write", "read"):
        pattern = body.get(kind, ".*")
        if not isinstance(pattern, str):
            raise bad_request(f"'{kind}' must be a string (a regular expression)")
        try:
            permissions.validate_pattern(pattern)
        except ValueError as e:
            raise bad_request(str(e)) from None
        patterns.append(pattern)
    created = await api_of(request).node.metadata.created(mc.SetTopicPermissions(new_key(), user, vhost, exchange,
                                                                                  *patterns))  # fmt: skip
    return created_or_updated(created)


@access(ADMIN)
async def delete_one(request: web.Request) -> web.Response:
    user, vhost = _user_and_vhost(request)
    exchange = request.match_info.get("exchange") or request.query.get("exchange", "")
    if not _listing(request, user, vhost) or (exchange and not any(
            e["exchange"] == exchange for e in _listing(request, user, vhost))):  # fmt: skip
        raise not_found()
    await api_of(request).node.metadata.run(mc.ClearTopicPermissions(new_key(), user, vhost, exchange))
    return no_content()


ROUTES = [
    ("GET", "/api/topic-permissions", list_all),
    ("GET", "/api/topic-permissions/{vhost}/{user}", get_one),
    ("PUT", "/api/topic-permissions/{vhost}/{user}", put_one),
    ("DELETE", "/api/topic-permissions/{vhost}/{user}", delete_one),
    ("GET", "/api/topic-permissions/{vhost}/{user}/{exchange}", get_one),
    ("PUT", "/api/topic-permissions/{vhost}/{user}/{exchange}", put_one),
    ("DELETE", "/api/topic-permissions/{vhost}/{user}/{exchange}", delete_one),
    ("GET", "/api/users/{user}/topic-permissions", of_user),
    ("GET", "/api/vhosts/{vhost}/topic-permissions", of_vhost),
]
