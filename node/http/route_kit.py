"""What every route module of the management HTTP API is built from: access
levels a handler declares, errors and how they answer, JSON responses, reading
a request, and who the authenticated user is and may see.

node/http/api.py serves the route modules' tables (its `ROUTES`); the route
modules import this and not api.py (but for type hints), so no import goes
in a circle (tests/test_layout.py checks it).
"""

from __future__ import annotations

import json
import re
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
DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE = 100, 500  # rabbit_mgmt_util's
MAX_FILTER_LENGTH = 1024  # the longest ?name= regular expression
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
    if isinstance(data, list):
        data = _sorted(request, data)
    return _json(request, data, status)


def list_response(request: web.Request, items: list[dict]) -> web.Response:
    """A listing that pages, as RabbitMQ's queues, exchanges, vhosts,
    connections, channels and bindings (rabbit_mgmt_util reply_list_or_paginate):
    with ?page= (and ?page_size=, at most 500, default 100) the answer is an
    object with the page's `items` and the counts, after ?name= kept the items
    whose name holds it (a case-insensitive regular expression with
    ?use_regex=true); without ?page= the sorted list, unfiltered."""
    page, size = _page_params(request.query)
    items = _sorted(request, items)
    if page is None:
        return _json(request, items)
    total, filtered, chosen = _page_of(request, items, page, size, lambda i: str(i.get("name", "")))
    return _page_json(request, total, filtered, page, size, chosen)


async def costly_list_response(request: web.Request, objects: list, keys: dict[str, Callable[[Any], Any]],
                               build: Callable[[Any], dict],
                               prepare: Callable[[list], Awaitable[None]]) -> web.Response:  # fmt: skip
    """list_response for objects whose JSON is costly (queues: counts asked of
    other nodes, rates, memory): with ?page= and no ?sort= or a sort on one of
    `keys` (each reads its field from an object, as `keys["name"]` its name),
    only the page's objects are prepared and built, so the first page of
    10,000 queues costs what 100 do; otherwise every object, then list_response.
    The answer is the same either way."""
    query = request.query
    page, size = _page_params(query)
    sort = query.get("sort")
    if page is None or (sort and sort not in keys):
        await prepare(objects)
        return list_response(request, [build(o) for o in objects])
    if sort:
        field = keys[sort]
        objects = sorted(objects, key=lambda o: _sort_key(field(o)), reverse=query.get("sort_reverse") == "true")
    total, filtered, chosen = _page_of(request, objects, page, size, lambda o: str(keys["name"](o)))
    await prepare(chosen)
    return _page_json(request, total, filtered, page, size, [build(o) for o in chosen])


def _page_of(request: web.Request, items: list, page: int, size: int,
             name_of: Callable[[Any], str]) -> tuple[int, int, list]:  # fmt: skip
    """(all, those ?name= keeps, the page's) of sorted `items`."""
    query = request.query
    total = len(items)
    name = query.get("name")
    if name:
        items = [i for i in items if _name_matches(name, name_of(i), query.get("use_regex") == "true")]
    start = (page - 1) * size
    if start > len(items):
        raise ApiError(400, "page_out_of_range",
                       f"Page out of range, page: {page} page size: {size}, len: {len(items)}")  # fmt: skip
    return total, len(items), items[start : start + size]


def _page_json(request: web.Request, total: int, filtered: int, page: int, size: int, chosen: list) -> web.Response:
    return _json(request, {"total_count": total, "item_count": len(chosen), "filtered_count": filtered,
                           "page": page, "page_size": size, "page_count": -(-filtered // size),
                           "items": chosen})  # fmt: skip


def _page_params(query: Any) -> tuple[int | None, int]:
    raw_page, raw_size = query.get("page"), query.get("page_size")
    if raw_page is None:
        return None, DEFAULT_PAGE_SIZE
    try:
        page = int(raw_page)
        size = DEFAULT_PAGE_SIZE if raw_size is None else int(raw_size)
    except ValueError:
        raise bad_request("Pagination parameters are invalid") from None
    if page < 1 or not 0 < size <= MAX_PAGE_SIZE:
        raise ApiError(400, "invalid_pagination_parameters",
                       f"Invalid pagination parameters: page number {page}, page size {size}")  # fmt: skip
    name = query.get("name", "")
    if query.get("use_regex") == "true":
        if len(name) > MAX_FILTER_LENGTH:
            raise ApiError(400, "invalid_pagination_parameters", "name filter regex is too long")
        try:
            re.compile(name)
        except re.error as e:
            raise bad_request(f"invalid name filter regex: {e}") from None
    return page, size


def _name_matches(pattern: str, name: str, regex: bool) -> bool:
    if regex:
        return re.search(pattern, name, re.IGNORECASE) is not None
    return pattern.lower() in name.lower()


def _sorted(request: web.Request, items: list) -> list:
    """?sort= names a field, dotted into nested objects (message_stats.publish);
    a missing one sorts as 0, before everything else, as in RabbitMQ."""
    key = request.query.get("sort")
    if not key:
        return items
    path = key.split(".")
    return sorted(
        items, key=lambda item: _sort_key(_dotted(item, path)), reverse=request.query.get("sort_reverse") == "true"
    )


def _dotted(item: Any, path: list[str]) -> Any:
    for part in path:
        if not isinstance(item, dict):
            return 0
        item = item.get(part, 0)
    return item


def _json(request: web.Request, data: Any, status: int = 200) -> web.Response:
    columns = [c for c in request.query.get("columns", "").split(",") if c]
    if columns and isinstance(data, dict) and "items" in data and "page_count" in data:
        data = {**data, "items": fmt.select_columns(data["items"], columns)}  # a page's items lose columns
    else:
        data = fmt.select_columns(data, columns)
    return web.Response(text=fmt.dumps(data), status=status, content_type="application/json")


def _sort_key(value: Any) -> tuple:
    if value is None:
        return (0, 0, "")
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


def member_name(node: ManagementNode, member: str) -> str:
    """A cluster member's node name (warren@host) from its cluster address, as RabbitMQ names nodes."""
    return node.node_names.name_of(member) if node.node_names is not None else member


def member_address(node: ManagementNode, name: str) -> str:
    """A member's cluster address from its node name or address."""
    if name == node.config.node_name:
        return node.node_id
    return node.node_names.member_of(name) if node.node_names is not None else name


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


def check_policymaker(request: web.Request) -> None:
    user = request[USER]
    if not is_admin(user) and "policymaker" not in user.tags:
        raise refused("Not policymaker or administrator user")


def is_admin(user: Any) -> bool:
    return "administrator" in user.tags


def is_monitor(user: Any) -> bool:
    return "administrator" in user.tags or "monitoring" in user.tags
