"""What every route module of the management HTTP API is built from: access
levels a handler declares, errors and how they answer, JSON responses, reading
a request, and who the authenticated user is and may see.

node/http/api.py serves the route modules' tables (its `ROUTES`); the route
modules import this and not api.py (but for type hints), so no import goes
in a circle (tests/test_layout.py checks it).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from amqp.errors import Condition
from node.http import formats as fmt
from node.vhosts.metadata_store import MetadataUnavailable
from routing import permissions
from routing.errors import RoutingError
from routing.oauth import TokenUser

if TYPE_CHECKING:
    from node.http.api import ManagementAPI
    from node.http.management_node import ManagementNode

REFUSED_STATUS = 401  # RabbitMQ 4 answers 401, not 403, to an authenticated user it refuses
MANAGEMENT_TAGS = frozenset({"administrator", "monitoring", "policymaker", "management"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
API: web.AppKey[ManagementAPI] = web.AppKey("api")
USER: web.RequestKey[Any] = web.RequestKey("user")  # the authenticated auth.User

# Access levels a handler declares with @access(...).
MGMT = "management"  # any management user; the handler filters what it shows
MONITOR = "monitoring"  # administrator or monitoring
ADMIN = "administrator"
VHOST = "vhost"  # administrator, or a user with permissions in the path's vhost
VHOST_VISIBLE = "vhost-visible"  # VHOST, or monitoring


class ApiError(Exception):
    """An error answer: HTTP status, RabbitMQ's error name and a reason."""

    def __init__(self, status: int, error: str, reason: str):
        super().__init__(reason)
        self.status, self.error, self.reason = status, error, reason


def bad_request(reason: str) -> ApiError:
    return ApiError(400, "bad_request", reason)


def not_found(reason: str = "Not Found") -> ApiError:
    return ApiError(404, "Object Not Found", reason)


def refused(reason: str) -> ApiError:
    return ApiError(REFUSED_STATUS, "not_authorised", reason)


def routing_error(e: RoutingError) -> ApiError:
    """An AMQP refusal as RabbitMQ's management plugin maps it."""
    if isinstance(e, MetadataUnavailable):
        return ApiError(503, "service_unavailable", e.description or "the cluster has no majority")
    if e.condition == Condition.UNAUTHORIZED_ACCESS:
        return refused(e.description or "access refused")
    if e.condition == Condition.NOT_FOUND:
        return not_found(e.description or "Not Found")
    return bad_request(e.description or e.condition)


def access(level: str) -> Callable[[Handler], Handler]:
    def mark(handler: Handler) -> Handler:
        handler.access = level  # type: ignore[attr-defined]
        return handler

    return mark


# ---------------------------------------------------------------- responses


def json_response(request: web.Request, data: Any, status: int = 200) -> web.Response:
    """`data` as JSON, sorted and trimmed per ?sort=, ?sort_reverse= and
    ?columns= as RabbitMQ does."""
    query = request.query
    if isinstance(data, list) and "sort" in query:
        key = query["sort"]
        data = sorted(data, key=lambda item: _sort_key(item.get(key)), reverse=query.get("sort_reverse") == "true")
    columns = [c for c in query.get("columns", "").split(",") if c]
    return web.Response(text=fmt.dumps(fmt.select_columns(data, columns)), status=status,
                        content_type="application/json")  # fmt: skip


def _sort_key(value: Any) -> tuple:
    return (0, value, "") if isinstance(value, int | float) else (1, 0, str(value))


def no_content() -> web.Response:
    return web.Response(status=204)


def created_or_updated(created: bool) -> web.Response:
    return web.Response(status=201 if created else 204)


def error_response(status: int, error: str, reason: str, headers: dict | None = None) -> web.Response:
    return web.Response(text=fmt.dumps({"error": error, "reason": reason}), status=status,
                        content_type="application/json", headers=headers)  # fmt: skip


async def read_body(request: web.Request) -> dict:
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as e:
        raise bad_request(f"malformed JSON body: {e}") from None
    if not isinstance(body, dict):
        raise bad_request("the body must be a JSON object")
    return body


# ---------------------------------------------------------------- request helpers

DEFAULT_EXCHANGE_PATH = "amq.default"  # the default exchange's name in paths


def api_of(request: web.Request) -> ManagementAPI:
    return request.app[API]


def query_flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "").lower() == "true"


def body_bool(body: dict, key: str, default: bool) -> bool:
    value = body.get(key, default)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise bad_request(f"'{key}' must be a boolean")
    return value


def body_arguments(body: dict) -> dict:
    arguments = body.get("arguments") or {}
    if not isinstance(arguments, dict):
        raise bad_request("'arguments' must be a JSON object")
    return arguments


def exchange_name(segment: str) -> str:
    return "" if segment == DEFAULT_EXCHANGE_PATH else segment


def check_permission(request: web.Request, vhost: str, kind: str, resource: str, what: str) -> None:
    """The AMQP permission the same operation would need (raises AccessRefused)."""
    user = request[USER]
    permission = permission_of(api_of(request).node, user, vhost)
    permissions.check(permission, user.name, vhost, kind, resource, what)


# ---------------------------------------------------------------- who is asking


def management_user(user: Any) -> Any:
    """`user`, if its tags let it use the API."""
    if not MANAGEMENT_TAGS.intersection(user.tags):
        raise refused("Not management user")
    return user


def permission_of(node: ManagementNode, user: Any, vhost: str) -> permissions.Permission | None:
    """The permission entry of an API user in `vhost`: a token's scopes, or the user's entry."""
    if isinstance(user, TokenUser):
        return user.grant.permission(vhost)
    return node.auth.permission(user.name, vhost)


def token_scopes(user: Any) -> Any:
    """A token user's scopes (its topic scopes decide topic access), None for a user."""
    return user.grant.scopes if isinstance(user, TokenUser) else None


def is_admin(user: Any) -> bool:
    return "administrator" in user.tags


def is_monitor(user: Any) -> bool:
    return "administrator" in user.tags or "monitoring" in user.tags
